#!/usr/bin/env bash
# dm-wbkit against the caches already in the kernel, in one VM boot, every
# cache over the same two disks: the modelled 7200 rpm hard disk (bench/hdd)
# behind each of dm-wbkit (target "wbkit"), upstream dm-writeboost (Debian's
# dkms module), dm-writecache (SSD mode, 4 KiB blocks: defaults, and
# high_watermark 90 low_watermark 80, the two knobs its documentation gives
# for when writeback starts and stops), bcache in writeback mode (make-bcache
# in the guest; sequential_cutoff default and 0) and dm-cache (smq,
# writeback, metadata on the first WBKIT_BENCH_DMCACHE_META MiB of its
# slice), and the bare disk and the bare cache disk for reference. Every
# cache gets the same WBKIT_BENCH_CACHE MiB slice of the cache disk (bcache
# with buckets of a 1024th of it: the kernel refuses fewer than 513; dm-cache
# with its metadata inside the slice). The caches are built by the guest's
# wb_cache_create (tests/vm/guest-lib.sh), as tests/crash/peers.sh builds them.
#
# Every row starts from a fresh cache (formatted, empty) and the caches go
# in a different order each round (a Latin square: rotated by two places
# per round, reversed every other round). Rows (WBKIT_BENCH_ROWS):
#   randwrite  random 4 KiB writes QD32 into the empty cache, a quarter of
#              the cache over WBKIT_BENCH_REGION (IOPS; WBKIT_BENCH_TIME at most)
#   steady     random 4 KiB writes QD16 over 4x the cache: one cache's worth
#              unmeasured, then WBKIT_BENCH_STEADY_WRAPS caches' worth (or
#              WBKIT_BENCH_TIME) measured: IOPS and write latency p50, p99,
#              p99.9 and maximum; the bare disks time-based
#   fsync      4 KiB random write + fdatasync, QD1, WBKIT_BENCH_FSYNC_TIME s:
#              writes/s and the fdatasync's 99th percentile
#   dbench     dbench -s, 4 clients, WBKIT_BENCH_DBENCH_TIME s, fresh ext4 (MB/s)
#   untar      a source tree unpacked onto a fresh ext4, then sync (s), as vm-hdd.sh
#   readhit    a quarter of the cache written (each 4 KiB block once), then
#              random 4 KiB reads of it QD32 for WBKIT_BENCH_READ_TIME s (IOPS)
#   coldread   random 4 KiB reads QD1 over WBKIT_BENCH_REGION on the fresh
#              cache, WBKIT_BENCH_READ_TIME s: what a miss costs over the bare
#              disk (mean latency, and its ratio to the bare disk's)
#   drain      WBKIT_BENCH_DIRTY of random 4 KiB writes (the same blocks for
#              every cache) with writeback held off, then the time to write
#              them all back: writeboost drop_caches; dm-writecache's
#              cleaner message; bcache writeback_percent 0 (no rate limit)
#              and writeback_running 1; dm-cache reloaded with the cleaner
#              policy; each polled until its dirty count is 0. Also how much
#              each held dirty when the drain began
#   fsyncstates the fsync row at three cache states: a fresh 32 MiB cache,
#              a fresh 1 GiB one, and a CACHE-sized one already full of dirty
#              data (a cache's worth of random writes first); writes/s and
#              the fdatasync's p50 and p99 at each
#   kmem       slab + vmalloc growth (/proc/meminfo) from before the cache is
#              built to after one cache's worth of random writes, per GiB of cache
#   trim       a deleted file's dirty data (issue 61): on a fresh
#              WBKIT_BENCH_TRIM_CACHE MiB cache (big enough that no cache
#              writes back on its own: dm-writecache starts at half full),
#              ext4 with WBKIT_BENCH_TRIM_MB of files written and synced,
#              then deleted; fstrim (its time), unmount, and the drain as in
#              the drain row: its time and what reached the hard disk from
#              the fstrim on (MiB, from the guest's disk statistics). A
#              cache that refuses discard (upstream) drains it all
# Prints, one per line, "ours/<peer> <row>: X" for peer dm-writecache, bcache,
# dm-cache (their default configurations) and row randwrite, steady, fsync,
# dbench (pair medians of dm-wbkit / peer: higher is better for dm-wbkit),
# and "max latency ours/upstream: X" (steady state, lower is better), and
# writes the table to bench/results/vm-peers-<date>.md with the load average
# at the start and the end. TCG on a shared machine: take figures at a load
# below 1.5 only.
# Usage: bench/vm-peers.sh [BUILD_DIR]
#   WBKIT_BENCH_ROUNDS (5), WBKIT_BENCH_ROWS ("randwrite steady fsync
#   fsyncstates dbench untar readhit coldread drain kmem trim"), WBKIT_BENCH_PEERS (the caches: "wbkit
#   upstream writecache writecache-wm bcache bcache-seq0 dmcache"),
#   WBKIT_BENCH_CACHE (128: MiB), WBKIT_BENCH_REGION (1G), WBKIT_BENCH_DIRTY
#   (16256K), WBKIT_BENCH_STEADY_WRAPS (2), WBKIT_BENCH_TIME (60: s, the cap
#   of every measured fio run), WBKIT_BENCH_FSYNC_TIME (20),
#   WBKIT_BENCH_READ_TIME (20), WBKIT_BENCH_DBENCH_TIME (15),
#   WBKIT_BENCH_UNTAR_DIRS ("fs kernel mm"), WBKIT_BENCH_DMCACHE_META (8: MiB),
#   WBKIT_BENCH_TRIM_MB (1024), WBKIT_BENCH_TRIM_CACHE (3072: MiB),
#   WBKIT_BENCH_DISK_SIZE (4G), WBKIT_HDD_PARAMS, WBKIT_BENCH_RESULTS
#   (bench/results; "-" writes no file)
# A validation run on small sizes:
#   WBKIT_BENCH_ROUNDS=1 WBKIT_BENCH_CACHE=32 WBKIT_BENCH_REGION=256M WBKIT_BENCH_TIME=10 \
#   WBKIT_BENCH_FSYNC_TIME=5 WBKIT_BENCH_READ_TIME=5 WBKIT_BENCH_DBENCH_TIME=5 \
#   WBKIT_BENCH_DIRTY=4M WBKIT_BENCH_UNTAR_DIRS=mm WBKIT_BENCH_RESULTS=- bench/vm-peers.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/vm-bench.inc"
source "$here/hdd/hdd.inc"
build=$(realpath "${1:-$WBKIT_ROOT/build}")

rounds=${WBKIT_BENCH_ROUNDS:-5}
rows=${WBKIT_BENCH_ROWS:-randwrite steady fsync fsyncstates dbench untar readhit coldread drain kmem trim}
peers=${WBKIT_BENCH_PEERS:-wbkit upstream writecache writecache-wm bcache bcache-seq0 dmcache}
cache_mb=${WBKIT_BENCH_CACHE:-128}
region=${WBKIT_BENCH_REGION:-1G}
dirty=${WBKIT_BENCH_DIRTY:-16256K}
steady_wraps=${WBKIT_BENCH_STEADY_WRAPS:-2}
fio_time=${WBKIT_BENCH_TIME:-60}
fsync_time=${WBKIT_BENCH_FSYNC_TIME:-20}
read_time=${WBKIT_BENCH_READ_TIME:-20}
dbench_time=${WBKIT_BENCH_DBENCH_TIME:-15}
untar_dirs=${WBKIT_BENCH_UNTAR_DIRS:-fs kernel mm}
dmcache_meta_mb=${WBKIT_BENCH_DMCACHE_META:-8}
disk_size=${WBKIT_BENCH_DISK_SIZE:-4G}
trim_mb=${WBKIT_BENCH_TRIM_MB:-1024}
trim_cache_mb=${WBKIT_BENCH_TRIM_CACHE:-3072}
# ext4 of 2 GiB holds the files; the cache disk is 4 GiB.
[ "$trim_mb" -le 1536 ] && [ "$trim_cache_mb" -le 4096 ] ||
	{ echo "vm-peers: WBKIT_BENCH_TRIM_MB must be <= 1536 and WBKIT_BENCH_TRIM_CACHE <= 4096"; exit 2; }
results=${WBKIT_BENCH_RESULTS:-$WBKIT_ROOT/bench/results}
# bcache's bucket: the largest power of two that leaves 1024 buckets (the
# kernel needs more than 512), at most make-bcache's default of 512 KiB.
bcache_bucket_kb=4
while [ $((bcache_bucket_kb * 2 * 1024)) -le $((cache_mb * 1024)) ] && [ "$bcache_bucket_kb" -lt 512 ]; do
	bcache_bucket_kb=$((bcache_bucket_kb * 2))
done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
vm_bench_prepare
vm_has_upstream || { echo "skipped: upstream dm-writeboost.ko not built for $VM_KVER (dm-writeboost-dkms)"; exit 0; }
command -v make-bcache >/dev/null || echo "note: make-bcache not installed (bcache-tools): the bcache rows will be skipped"
hdd_filter "$build"

work=$(mktemp -d "$VM_WORK/bench-peers.XXXXXX") # not tmpfs: cache=none needs O_DIRECT
trap 'hdd_stop; rm -rf "$work"' EXIT
vm_bench_dbench_tar "$work/extras.tar"
vm_bench_untar_tree "$untar_dirs" "$work/tree.tar"

vm_image "$work/disk.img" "$disk_size"
vm_image "$work/ssd.img" 4G
hdd_start "$work/disk.img" "$work/hdd.sock" "$work/hdd.stats"
hdd_params="full_stroke_ms=8.5 settle_ms=0.5 rpm=7200 mb_per_s=150 rotation=clock ncq=32 max_wait_ms=100${WBKIT_HDD_PARAMS:+ (then $WBKIT_HDD_PARAMS)}"

VM_TIMEOUT=${WBKIT_BENCH_VM_TIMEOUT:-14400}
VM_MEM=${WBKIT_BENCH_VM_MEM:-3072}
{
	echo "ROUNDS=$rounds ROWS='$rows' PEERS='$peers' CACHE_MB=$cache_mb REGION=$region DIRTY=$dirty"
	echo "STEADY_WRAPS=$steady_wraps FIO_TIME=$fio_time FSYNC_TIME=$fsync_time READ_TIME=$read_time DBENCH_TIME=$dbench_time"
	echo "TRIM_MB=$trim_mb TRIM_CACHE_MB=$trim_cache_mb"
	echo "WB_WBKIT_TARGET=wbkit WB_BCACHE_BUCKET=${bcache_bucket_kb}k CACHE_BCACHE_BUCKET=${bcache_bucket_kb}k WB_DMCACHE_META_SECTORS=$((dmcache_meta_mb * 2048))"
	cat <<'GUEST'
. /lib/wbguest.sh
# /dev/vda the hard-disk model, /dev/vdb the cache disk, /dev/vdc the
# extras, /dev/vdd the tree to unpack.
tar -xf /dev/vdc -C / || wb_fail "unpacking the extras failed"
. /lib/wbbench.sh
for m in lib/crc16 fs/mbcache fs/jbd2/jbd2 fs/ext4/ext4; do
	insmod /lib/modules/*/kernel/$m.ko || wb_fail "insmod $m failed"
done
mkdir -p /mnt
HDD=/dev/vda
SSD=/dev/vdb
wb_load_target upstream
wb_load_target wbkit target_name=wbkit
for k in $PEERS; do wb_cache_modules "$k"; done
# open_cache <kind> [MiB]: a fresh cache of that kind over the hard disk
# and the first CACHE_MB (or MiB) MiB of the cache disk, or one of the bare
# disks (raw, ssd), in $DEV.
open_cache() {
	mb=${2:-$CACHE_MB}
	# bcache's bucket: the largest power of two that leaves 1024 buckets,
	# at most 512 KiB (the host's choice for CACHE_MB otherwise).
	if [ "$mb" != "$CACHE_MB" ]; then
		bucket_kb=4
		while [ $((bucket_kb * 2 * 1024)) -le $((mb * 1024)) ] && [ $bucket_kb -lt 512 ]; do
			bucket_kb=$((bucket_kb * 2))
		done
		WB_BCACHE_BUCKET=${bucket_kb}k
	else
		WB_BCACHE_BUCKET=$CACHE_BCACHE_BUCKET
	fi
	case $1 in
	raw) DEV=$HDD ;;
	ssd) DEV=$SSD ;;
	*)
		wb_dm_create wbc "0 $((mb * 2048)) linear $SSD 0"
		wb_cache_create "$1" $HDD /dev/mapper/wbc format 2>/tmp/create.err ||
			wb_fail "building $1: $(tr '\n' ' ' </tmp/create.err)"
		DEV=$WB_CACHE_DEV
		;;
	esac
}
# cache_state <kind>: what the cache holds, one token (dirty blocks or bytes, used).
cache_state() {
	case $1 in
	raw | ssd) echo - ;;
	bcache*)
		s=/sys/block/${DEV#/dev/}/bcache
		echo "dirty_data=$(cat $s/dirty_data),state=$(cat $s/state)"
		;;
	wbkit) echo "dirty_blocks=$(wb_status_field 7 wb),moved=$($DMSETUP message wb 0 forward_counts | awk '{ print $2 "/" $4 }')" ;;
	upstream) echo "dirty_blocks=$(wb_status_field 7 wb)" ;;
	writecache*) echo "blocks=$(wb_status_field 2 wb),free=$(wb_status_field 3 wb),writeback=$(wb_status_field 4 wb)" ;;
	dmcache) echo "used=$(wb_status_field 4 wb),dirty=$(wb_status_field 11 wb)" ;;
	esac
}
close_cache() {
	case $1 in raw | ssd) return 0 ;; esac
	wb_report "r$r.$1.$2.end_state" "$(cache_state "$1")"
	wb_cache_remove "$1" || wb_fail "removing $1 failed"
	$DMSETUP remove --retry wbc || wb_fail "remove wbc failed"
}
randwrite_row() {
	open_cache "$1"
	fio_terse --name=rw --filename=$DEV --rw=randwrite --bs=4k --size="$REGION" \
		--io_size=$((CACHE_MB / 4))M --ioengine=libaio --iodepth=32 --runtime="$FIO_TIME" --randseed=1
	wb_report "r$r.$1.randwrite" "$(terse 49)"
	close_cache "$1" randwrite
}
steady_row() {
	open_cache "$1"
	size=$((CACHE_MB * 4))M
	case $1 in
	raw | ssd)
		fio_terse --name=steady --filename=$DEV --rw=randwrite --bs=4k --size=$size \
			--ioengine=libaio --iodepth=16 --runtime="$FIO_TIME" --time_based --randseed=2
		;;
	*)
		# The first cache's worth fills the empty cache at the cache's speed.
		$FIO --name=fill --filename=$DEV --rw=randwrite --bs=4k --size=$size --io_size=${CACHE_MB}M \
			--direct=1 --ioengine=libaio --iodepth=16 --randseed=1 --runtime="$FIO_TIME" \
			--output-format=terse >/dev/null 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fill on $1 failed"; }
		fio_terse --name=steady --filename=$DEV --rw=randwrite --bs=4k --size=$size \
			--io_size=$((CACHE_MB * STEADY_WRAPS))M --ioengine=libaio --iodepth=16 --randseed=2 --runtime="$FIO_TIME" \
			--write_lat_log=/tmp/steadylat --log_avg_msec=0
		# The three longest stalls and when they came (ms into the run:
		# longest wait in us; waits within 300 ms of a longer one are the
		# same stall), which tell one long stall from many short ones.
		for f in /tmp/steadylat_lat*.log; do
			wb_report "r$r.$1.steadyworst" "$(sort -t, -k2 -n -r "$f" | awk -F, '{
				for (i = 1; i <= n; i++) if ($1 - t[i] < 300 && t[i] - $1 < 300) next
				t[++n] = $1; printf "%s%d:%d", (n > 1 ? " " : ""), $1, $2 / 1000
				if (n == 3) exit }')"
			rm -f "$f"
		done
		;;
	esac
	wb_report "r$r.$1.steady" "$(terse 49)"
	# Write completion latency (us).
	wb_report "r$r.$1.steadyp50" "$(terse_write_pct 50)"
	wb_report "r$r.$1.steadyp99" "$(terse_write_pct 99)"
	wb_report "r$r.$1.steadyp999" "$(terse_write_pct 99.9)"
	wb_report "r$r.$1.steadymax" "$(terse 56)"
	close_cache "$1" steady
}
# fio's JSON, one key a line: the write IOPS and the fdatasync latency's
# 99th percentile (ns), which the terse format does not carry.
# fsync_run <kind> <key>: the fdatasync job on $DEV; reports <key> (writes/s),
# <key>p50 and <key>p99 (the fdatasync's latency, us).
fsync_run() {
	$FIO --name=fsync --filename=$DEV --rw=randwrite --bs=4k --size="$REGION" --direct=1 \
		--ioengine=psync --fdatasync=1 --runtime="$FSYNC_TIME" --time_based --randseed=3 \
		--output-format=json >/tmp/fio.json 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fsync on $1 failed"; }
	wb_report "r$r.$1.$2" "$(awk '/"write" : \{/ { w = 1 } w && /"iops" :/ { gsub(/[ ,]/, ""); split($0, a, ":"); print a[2]; exit }' /tmp/fio.json)"
	for p in 50 99; do
		wb_report "r$r.$1.$2p$p" "$(awk -v p="\"$p.000000\" :" '/"sync" : \{/ { s = 1 } s && index($0, p) { gsub(/[ ,"]/, ""); split($0, a, ":"); print a[2] / 1000; exit }' /tmp/fio.json)"
	done
}
fsync_row() {
	open_cache "$1"
	fsync_run "$1" fsync
	close_cache "$1" fsync
}
fsyncstates_row() {
	open_cache "$1" 32
	fsync_run "$1" fsync32m
	close_cache "$1" fsync32m
	open_cache "$1" 1024
	fsync_run "$1" fsync1g
	close_cache "$1" fsync1g
	open_cache "$1"
	case $1 in
	raw | ssd) ;;
	*)
		$FIO --name=fill --filename=$DEV --rw=randwrite --bs=4k --size="$REGION" --io_size=${CACHE_MB}M \
			--direct=1 --ioengine=libaio --iodepth=16 --randseed=8 --runtime="$FIO_TIME" \
			--output-format=terse >/dev/null 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fill on $1 failed"; }
		wb_report "r$r.$1.fsyncfull_state" "$(cache_state "$1")"
		;;
	esac
	fsync_run "$1" fsyncfull
	close_cache "$1" fsyncfull
}
# fs_mount <kind> [MiB]: a fresh cache (open_cache) with ext4 at /mnt.
fs_mount() {
	open_cache "$@"
	/usr/sbin/mke2fs -q -F -t ext4 -E lazy_itable_init=1,lazy_journal_init=1,nodiscard "$DEV" 2G ||
		wb_fail "mke2fs on $DEV failed"
	# noinit_itable: no ext4lazyinit thread writing inode tables during the row (vm-hdd.sh).
	mount -t ext4 -o noinit_itable "$DEV" /mnt || wb_fail "mount of $DEV failed"
}
fs_umount() {
	umount /mnt || wb_fail "umount failed"
	close_cache "$1" "$2"
}
dbench_row() {
	fs_mount "$1"
	/usr/bin/dbench -s -c /usr/share/dbench/client.txt -D /mnt -t "$DBENCH_TIME" 4 \
		>/tmp/dbench.out 2>&1 || { tail -5 /tmp/dbench.out; wb_fail "dbench on $1 failed"; }
	wb_report "r$r.$1.dbench" "$(awk '/Throughput/ { print $2 }' /tmp/dbench.out | tail -1)"
	fs_umount "$1" dbench
}
untar_row() {
	fs_mount "$1"
	now t0
	tar -xf /dev/vdd -C /mnt || wb_fail "untar on $1 failed"
	sync
	now t1
	wb_report "r$r.$1.untar" $((t1 - t0))
	fs_umount "$1" untar
}
readhit_row() {
	open_cache "$1"
	hot=$((CACHE_MB / 4))M
	$FIO --name=hot --filename=$DEV --rw=randwrite --bs=4k --size=$hot --direct=1 --ioengine=libaio \
		--iodepth=32 --randseed=4 --runtime="$FIO_TIME" --output-format=terse >/dev/null 2>/tmp/fio.err ||
		{ cat /tmp/fio.err; wb_fail "writing the hot set on $1 failed"; }
	fio_terse --name=readhit --filename=$DEV --rw=randread --bs=4k --size=$hot --ioengine=libaio \
		--iodepth=32 --runtime="$READ_TIME" --time_based --randseed=5
	wb_report "r$r.$1.readhit" "$(terse 8)"
	close_cache "$1" readhit
}
coldread_row() {
	open_cache "$1"
	fio_terse --name=coldread --filename=$DEV --rw=randread --bs=4k --size="$REGION" \
		--runtime="$READ_TIME" --time_based --randseed=6
	wb_report "r$r.$1.coldread" "$(terse 8)"
	wb_report "r$r.$1.coldreadlat" "$(terse 16)"
	close_cache "$1" coldread
}
# wait_clean <kind>: polls until the cache holds nothing dirty (10 ms steps).
is_clean() {
	case $1 in
	wbkit | upstream) [ "$(wb_status_field 7 wb)" = 0 ] ;;
	writecache*) [ "$(wb_status_field 3 wb)" = "$(wb_status_field 2 wb)" ] ;;
	bcache*) case $(cat /sys/block/${DEV#/dev/}/bcache/dirty_data) in 0 | 0.0k) true ;; *) false ;; esac ;;
	dmcache) [ "$(wb_status_field 11 wb)" = 0 ] ;;
	esac
}
drain_row() {
	t=$1
	open_cache "$t"
	case $t in
	bcache*) echo 0 >/sys/block/${DEV#/dev/}/bcache/writeback_running ;;
	esac
	$FIO --name=dirty --filename=$DEV --rw=randwrite --bs=4k --size="$REGION" --io_size="$DIRTY" \
		--direct=1 --ioengine=libaio --iodepth=16 --randrepeat=1 --end_fsync=1 \
		--output-format=terse >/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "dirty set on $t failed"; }
	wb_report "r$r.$t.drain_start_state" "$(cache_state "$t")"
	b0=$(busy_ms)
	now t0
	drain "$t"
	now t1
	wb_report "r$r.$t.drain" $((t1 - t0))
	wb_report "r$r.$t.drainbusy" $(($(busy_ms) - b0))
	close_cache "$t" drain
}
# drain <kind>: every dirty block written back, each cache its own way.
drain() {
	case $1 in
	wbkit | upstream) $DMSETUP message wb 0 drop_caches || wb_fail "drop_caches on $1 failed" ;;
	writecache*) $DMSETUP message wb 0 cleaner || wb_fail "cleaner on $1 failed" ;;
	bcache*)
		s=/sys/block/${DEV#/dev/}/bcache
		echo 0 >$s/writeback_percent
		echo 1 >$s/writeback_running
		;;
	dmcache)
		table=$($DMSETUP table wb | sed 's/ writeback smq 0$/ writeback cleaner 0/')
		$DMSETUP reload wb --table "$table" && $DMSETUP suspend wb && $DMSETUP resume wb ||
			wb_fail "switching $1 to the cleaner policy failed"
		;;
	esac
	polls=0
	while ! is_clean "$1"; do
		polls=$((polls + 1))
		[ $polls -lt 360000 ] || wb_fail "$1 still dirty after an hour of draining: $(cache_state "$1")"
		usleep 10000
	done
}
hdd_sectors_written() { awk '{ print $7 }' /sys/block/vda/stat; }
trim_row() {
	t=$1
	fs_mount "$t" "$TRIM_CACHE_MB"
	case $t in
	bcache*) echo 0 >/sys/block/${DEV#/dev/}/bcache/writeback_running ;;
	esac
	i=0
	while [ $((i * 64)) -lt "$TRIM_MB" ]; do
		$DD if=/dev/zero of=/mnt/f$i bs=1M count=64 2>/dev/null || wb_fail "writing the files on $t failed"
		i=$((i + 1))
	done
	sync
	wb_report "r$r.$t.trim_start_state" "$(cache_state "$t")"
	rm -f /mnt/f*
	sync
	w0=$(hdd_sectors_written)
	b0=$(busy_ms)
	now t0
	if ! busybox fstrim /mnt 2>/tmp/fstrim.err; then
		wb_report "r$r.$t.trim_refused" "$(tr '\n' ' ' </tmp/fstrim.err)"
	fi
	now t1
	umount /mnt || wb_fail "umount failed"
	drain "$t"
	now t2
	wb_report "r$r.$t.trim" $((t1 - t0))
	wb_report "r$r.$t.trimdrain" $((t2 - t1))
	wb_report "r$r.$t.trimmib" $((($(hdd_sectors_written) - w0) / 2048))
	wb_report "r$r.$t.trimbusy" $(($(busy_ms) - b0))
	close_cache "$t" trim
}
kernel_kb() { awk '/^Slab:|^VmallocUsed:/ { kb += $2 } END { print kb }' /proc/meminfo; }
kmem_row() {
	echo 3 >/proc/sys/vm/drop_caches
	k0=$(kernel_kb)
	open_cache "$1"
	$FIO --name=fill --filename=$DEV --rw=randwrite --bs=4k --size="$REGION" --io_size=${CACHE_MB}M \
		--direct=1 --ioengine=libaio --iodepth=32 --randseed=7 --runtime="$FIO_TIME" \
		--output-format=terse >/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fill on $1 failed"; }
	k1=$(kernel_kb)
	wb_report "r$r.$1.kmemkb" $((k1 - k0))
	wb_report "r$r.$1.kmem" $(((k1 - k0) * 1024 / CACHE_MB))
	wb_report "r$r.$1.kmemwritten" "$(terse 47)"
	close_cache "$1" kmem
}
# The order of the targets in round r: rotated by two places per round and
# reversed every other round, so no target always goes first or last.
round_order() {
	n=0
	for t in $1; do n=$((n + 1)); eval "at_$n=$t"; done
	out=
	i=0
	while [ $i -lt $n ]; do
		eval "t=\$at_$(((i + 2 * ($2 - 1)) % n + 1))"
		if [ $(($2 % 2)) = 0 ]; then out="$t $out"; else out="$out $t"; fi
		i=$((i + 1))
	done
	echo $out
}
r=1
while [ $r -le "$ROUNDS" ]; do
	for name in $ROWS; do
		# Which rows the bare disks join: not where there is no cache to measure.
		case $name in
		drain | kmem | trim) targets=$PEERS ;;
		*) targets="$PEERS raw ssd" ;;
		esac
		for t in $(round_order "$targets" $r); do
			wb_report "r$r.$t.$name.begin" "$(cut -d' ' -f1 /proc/uptime)"
			${name}_row "$t"
		done
	done
	wb_report "r$r.done" "$(cut -d' ' -f1 /proc/uptime)"
	r=$((r + 1))
done
GUEST
} >"$work/guest.sh"

vrc=0
vm_run "$work/guest.sh" "$HDD_URL" "$work/ssd.img" "$work/extras.tar" "$work/tree.tar" || vrc=$?
hdd_stop
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "VM: ${VM_ELAPSED}s, log $VM_LOG; load average at start: $load_start, at end: $load_end"
echo "disk model: $(cat "$work/hdd.stats" 2>/dev/null)"
if [ "$vrc" != 0 ]; then
	echo "the VM run failed (rc $vrc): $(vm_result fail)"
	exit 1
fi
[ -z "$(vm_result skip)" ] || { echo "skipped: $(vm_result skip)"; exit 0; }

date=$(date -u '+%Y-%m-%d %H:%M UTC')
report=$work/report.md
{
	echo "# vm-peers, $date"
	echo
	echo "\`bench/vm-peers.sh\` at $(git -C "$WBKIT_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), load average $load_start at the start, $load_end at the end ($(nproc) cores), TCG, kernel $VM_KVER."
	echo "Disk model: $disk_size, $hdd_params. $rounds rounds; rows: $rows."
	echo "Every cache: a fresh $cache_mb MiB slice of the cache disk per row (bcache buckets ${bcache_bucket_kb} KiB;"
	echo "dm-cache: $dmcache_meta_mb MiB of it metadata, 32 KiB blocks); random I/O over $region; fio runs capped at ${fio_time}s;"
	echo "steady: 1 + $steady_wraps caches' worth over 4x the cache, QD16; drain: $dirty dirty; untar: $UNTAR_WHAT;"
	echo "trim: $trim_mb MiB of files deleted on a $trim_cache_mb MiB cache."
	echo
	vm_results | awk -v rounds="$rounds" -v rows="$rows" -v peers="$peers" -f "$here/medians.awk" -f <(cat <<'AWK'
	# Text, not a number: the last round's, by key and target.
	/^r[0-9]+\.[a-z0-9-]+\.(steadyworst|drain_start_state|fsyncfull_state|trim_start_state|trim_refused)=/ {
		split($0, kv, "="); split(kv[1], k, ".")
		held[k[3], k[2]] = substr($0, index($0, "=") + 1)
		next
	}
	/^r[0-9]+\.[a-z0-9-]+\.[a-z0-9]+=/ {
		split($0, kv, "="); split(kv[1], k, ".")
		val[substr(k[1], 2), k[2] "." k[3]] = kv[2] + 0
		next
	}
	function measured(key,   r) {
		for (r = 1; r <= rounds; r++) if ((r, key) in val) return 1
		return 0
	}
	function cell(t, key, scale, fmt) {
		return measured(t "." key) ? sprintf(fmt, median(t "." key) / scale) : ""
	}
	# A write + fdatasync row's rate and the fdatasync's p50 and p99.
	function fsync_rows(key, what) {
		row("4 KiB write + fdatasync QD1" what, "writes/s", key, 1, "%.0f", 1)
		row("the fdatasync's p50" what, "ms", key "p50", 1000, "%.2f", 1)
		row("the fdatasync's p99" what, "ms", key "p99", 1000, "%.2f", 1)
	}
	function row(what, unit, key, scale, fmt, with_bare,   i, line) {
		line = "| " what " | " unit
		for (i = 1; i <= nt; i++)
			line = line " | " ((with_bare || (tl[i] != "raw" && tl[i] != "ssd")) ? cell(tl[i], key, scale, fmt) : "")
		print line " |"
	}
	BEGIN {
		nt = split(peers " raw ssd", tl, " ")
		# fsyncstates_row's keys, in its order.
		nfs = split("fsync32m fsync1g fsyncfull", fsk, " ")
		fs_what["fsync32m"] = "fresh 32 MiB cache"; fs_what["fsync1g"] = "fresh 1 GiB cache"
		fs_what["fsyncfull"] = "cache full of dirty data"
		name["wbkit"] = "dm-wbkit"; name["upstream"] = "upstream"; name["writecache"] = "dm-writecache"
		name["writecache-wm"] = "dm-writecache 90/80"; name["bcache"] = "bcache"
		name["bcache-seq0"] = "bcache seq_cutoff 0"; name["dmcache"] = "dm-cache"
		name["raw"] = "bare disk"; name["ssd"] = "bare cache disk"
		peer_of["writecache"] = "dm-writecache"; peer_of["bcache"] = "bcache"; peer_of["dmcache"] = "dm-cache"
	}
	END {
		head = "| row | unit"; sep = "|---|---"
		for (i = 1; i <= nt; i++) { head = head " | " name[tl[i]]; sep = sep "|---" }
		print head " |"
		print sep "|"
		n = split(rows, rl, " ")
		for (i = 1; i <= n; i++) {
			r = rl[i]
			if (r == "randwrite") row("random 4 KiB writes QD32 into an empty cache", "IOPS", "randwrite", 1, "%.0f", 1)
			if (r == "steady") {
				row("steady state, random 4 KiB writes QD16", "IOPS", "steady", 1, "%.0f", 1)
				row("steady state: write latency p50", "ms", "steadyp50", 1000, "%.2f", 1)
				row("steady state: write latency p99", "ms", "steadyp99", 1000, "%.1f", 1)
				row("steady state: write latency p99.9", "ms", "steadyp999", 1000, "%.1f", 1)
				row("steady state: write latency max", "ms", "steadymax", 1000, "%.1f", 1)
				# One long stall or many short ones: the three longest.
				line = "| steady state: the 3 longest stalls, ms at s into the run (last round) | "
				for (j = 1; j <= nt; j++) {
					cellw = ""
					m = split(held["steadyworst", tl[j]], w, " ")
					for (q = 1; q <= m && q <= 3; q++) {
						split(w[q], tw, ":")
						cellw = cellw (q > 1 ? ", " : "") sprintf("%.0f at %.1f", tw[2] / 1000, tw[1] / 1000)
					}
					line = line " | " cellw
				}
				print line " |"
			}
			if (r == "fsync") fsync_rows("fsync", "")
			if (r == "fsyncstates") {
				for (q = 1; q <= nfs; q++) fsync_rows(fsk[q], ", " fs_what[fsk[q]])
				line = "| full cache: what it held when the run began (last round) | "
				for (j = 1; j <= nt; j++) line = line " | " ((("fsyncfull_state", tl[j]) in held) ? held["fsyncfull_state", tl[j]] : "")
				print line " |"
			}
			if (r == "dbench") row("dbench -s 4 clients", "MB/s", "dbench", 1, "%.1f", 1)
			if (r == "untar") row("untar + sync", "s", "untar", 100, "%.2f", 1)
			if (r == "readhit") row("read hits after writes, 4 KiB QD32", "IOPS", "readhit", 1, "%.0f", 1)
			if (r == "coldread") {
				row("cold reads, 4 KiB QD1", "IOPS", "coldread", 1, "%.0f", 1)
				row("cold reads: mean latency", "ms", "coldreadlat", 1000, "%.2f", 1)
				line = "| cold reads: mean latency / the bare disk's (pair median) | x"
				for (j = 1; j <= nt; j++) line = line " | " (tl[j] == "raw" ? "" : pair(tl[j] ".coldreadlat", "raw.coldreadlat"))
				print line " |"
			}
			if (r == "drain") {
				row("draining the dirty set", "s", "drain", 100, "%.2f", 0)
				row("the hard disk busy meanwhile", "s", "drainbusy", 1000, "%.2f", 0)
				line = "| dirty when the drain began (last round) | "
				for (j = 1; j <= nt; j++) line = line " | " ((("drain_start_state", tl[j]) in held) ? held["drain_start_state", tl[j]] : "")
				print line " |"
			}
			if (r == "trim") {
				row("dirty files deleted: fstrim", "s", "trim", 100, "%.2f", 0)
				row("then unmount and drain", "s", "trimdrain", 100, "%.2f", 0)
				row("written to the hard disk from the fstrim on", "MiB", "trimmib", 1, "%.0f", 0)
				row("the hard disk busy meanwhile", "s", "trimbusy", 1000, "%.2f", 0)
				line = "| held before the delete (last round) | "
				for (j = 1; j <= nt; j++) line = line " | " ((("trim_start_state", tl[j]) in held) ? held["trim_start_state", tl[j]] : "")
				print line " |"
				line = "| fstrim refused (last round) | "
				for (j = 1; j <= nt; j++) line = line " | " ((("trim_refused", tl[j]) in held) ? held["trim_refused", tl[j]] : "")
				print line " |"
			}
			if (r == "kmem") {
				# A fixed cost (buffers sized by the table, not the cache)
				# dominates the per-GiB figure of a small cache: both shown.
				row("kernel memory (slab + vmalloc) growth, building to full", "MiB", "kmemkb", 1024, "%.1f", 0)
				row("the same per GiB of cache", "MiB", "kmem", 1024, "%.1f", 0)
			}
		}
		print ""
		print "Medians over the rounds. ours/<peer>: the median over the rounds of dm-wbkit's figure over the peer's,"
		print "each pair measured in the same round (rates: higher is better for dm-wbkit)."
		print ""
		for (p in peer_of) {
			for (i = 1; i <= n; i++) {
				r = rl[i]
				if (r == "randwrite" || r == "steady" || r == "fsync" || r == "dbench")
					printf "ours/%s %s: %s\n", peer_of[p], r, pair("wbkit." r, p "." r) > "/dev/stderr"
				if (r == "fsyncstates")
					for (q = 1; q <= nfs; q++) {
						fk = fsk[q]
						printf "ours/%s %s: %s\n", peer_of[p], fk, pair("wbkit." fk, p "." fk) > "/dev/stderr"
						printf "p99 %s/ours %s: %s\n", peer_of[p], fk, pair(p "." fk "p99", "wbkit." fk "p99") > "/dev/stderr"
					}
			}
		}
		for (i = 1; i <= n; i++)
			if (rl[i] == "steady")
				printf "max latency ours/upstream: %s\n", pair("wbkit.steadymax", "upstream.steadymax") > "/dev/stderr"
	}
AWK
	) 2>"$work/lines"
} >"$report"
sort "$work/lines" -o "$work/lines"
cat "$report"
cat "$work/lines"
if [ "$results" != - ]; then
	mkdir -p "$results"
	out=$results/vm-peers-$(date -u +%Y-%m-%d-%H%M).md
	{
		cat "$report"
		echo '```'
		cat "$work/lines"
		echo '```'
	} >"$out"
	echo "table written to $out"
fi
