#!/usr/bin/env bash
# dm-wbkit against upstream dm-writeboost over a modelled 7200 rpm hard disk
# (bench/hdd: an nbdkit filter with seek, rotation and transfer times, one
# request at a time), in one VM boot, both modules loaded (dm-wbkit as target
# "wbkit"), every row on both targets back to back (which goes first
# alternates per round), over several rounds: medians, the ratio of the
# medians and the median of the per-round ratios (pair med). Rows:
#   model   once, on the bare disk model: the validation figures (4 KiB random
#           reads and writes at QD1 over the disk and over an 8 MiB region,
#           4 KiB writes 64 KiB apart, 1 MiB sequential reads, 4 KiB random
#           reads at QD16, where the disk's queue reorders, 1 MiB reads at QD4)
#   sort    random 4 KiB writes (WBKIT_BENCH_DIRTY over WBKIT_BENCH_REGION,
#           the same blocks every time) with writeback off, then the time of
#           `dmsetup message wb 0 drop_caches` with nr_max_batched_writeback
#           1 and 32, less that of a message that changes nothing (dmsetup's
#           start): the sorted writeback factor is time(1) / time(32). The
#           default dirty set is 32 segments of 127 blocks (16256 KiB), one
#           batch of 32: 16 MiB would add a 33rd segment of 32 blocks that
#           goes back as a batch of its own, unsorted against the rest.
#           Also the same set written to the bare disk, sorted and replayed
#           by fio at QD256: the disk's busy time for that sweep (io_ticks,
#           as for the targets' batch 32), and the factor it bounds (batch 1
#           / replay)
#   steady  random 4 KiB writes over WBKIT_BENCH_STEADY_REGION at QD16 on a
#           WBKIT_BENCH_STEADY_CACHE cache (default table options: writeback
#           only when the ring needs a slot): one cache's worth unmeasured,
#           then WBKIT_BENCH_STEADY_WRAPS caches' worth measured (IOPS), so
#           the targets go as fast as they write back; also the bare disk
#           (time-based, WBKIT_BENCH_STEADY_RAW_TIME s); with the write
#           latency's 99th percentile and maximum (ratios upstream / dm-wbkit)
#   dbench  dbench -s, 4 clients, WBKIT_BENCH_DBENCH_TIME s, on a fresh ext4
#           over the bare disk, upstream and dm-wbkit (MB/s)
#   untar   a source tree (WBKIT_BENCH_UNTAR_DIRS of Debian's linux-source-6.1,
#           or /usr/include without boost, node and llvm when it is not
#           installed) unpacked from its own virtio disk onto a fresh ext4,
#           then sync (seconds; the ratio is upstream / dm-wbkit)
#           dbench and untar also run on the cache disk alone (ext4 right on
#           dm-wbkit's cache image, no target): what the fast disk gives by
#           itself, a reference for how much room a cache target has. The
#           four go in a different order each round (file_order)
# Prints "sorted writeback factor: X" (dm-wbkit's), "steady state
# ours/upstream: X", "dbench ours/upstream: X", "untar ours/upstream: X" (pair
# medians) and writes the table to bench/results/vm-hdd-<date>.md with the
# load average at the start and the end. TCG on a shared machine: take
# figures at a load below 1.5 only.
# Usage: bench/vm-hdd.sh [BUILD_DIR]
#   WBKIT_BENCH_ROUNDS (5), WBKIT_BENCH_ROWS ("model sort steady dbench untar"),
#   WBKIT_BENCH_REGION (256M), WBKIT_BENCH_DIRTY (16256K), WBKIT_BENCH_STEADY_CACHE
#   (32: MiB), WBKIT_BENCH_STEADY_REGION (512M), WBKIT_BENCH_STEADY_WRAPS (3),
#   WBKIT_BENCH_STEADY_RAW_TIME (20), WBKIT_BENCH_DBENCH_TIME (15),
#   WBKIT_BENCH_UNTAR_DIRS ("fs kernel mm": 58 MiB, 2816 files), WBKIT_BENCH_MODEL_TIME (10 s per model row),
#   WBKIT_BENCH_DISK_SIZE (4G), WBKIT_HDD_PARAMS (filter parameters),
#   WBKIT_BENCH_RESULTS (bench/results; "-" writes no file)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/vm-bench.inc"
source "$here/hdd/hdd.inc"
build=$(realpath "${1:-$WBKIT_ROOT/build}")

rounds=${WBKIT_BENCH_ROUNDS:-5}
rows=${WBKIT_BENCH_ROWS:-model sort steady dbench untar}
region=${WBKIT_BENCH_REGION:-256M}
dirty=${WBKIT_BENCH_DIRTY:-16256K}
steady_cache=${WBKIT_BENCH_STEADY_CACHE:-32}
steady_region=${WBKIT_BENCH_STEADY_REGION:-512M}
steady_wraps=${WBKIT_BENCH_STEADY_WRAPS:-3}
steady_raw_time=${WBKIT_BENCH_STEADY_RAW_TIME:-20}
dbench_time=${WBKIT_BENCH_DBENCH_TIME:-15}
untar_dirs=${WBKIT_BENCH_UNTAR_DIRS:-fs kernel mm}
model_time=${WBKIT_BENCH_MODEL_TIME:-10}
disk_size=${WBKIT_BENCH_DISK_SIZE:-4G}
results=${WBKIT_BENCH_RESULTS:-$WBKIT_ROOT/bench/results}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
vm_bench_prepare
vm_has_upstream || { echo "skipped: upstream dm-writeboost.ko not built for $VM_KVER (dm-writeboost-dkms)"; exit 0; }
hdd_filter "$build"
has_row() { case " $rows " in *" $1 "*) return 0 ;; esac; return 1; }

work=$(mktemp -d "$VM_WORK/bench-hdd.XXXXXX") # not tmpfs: cache=none needs O_DIRECT
trap 'hdd_stop; rm -rf "$work"' EXIT

# dbench, mke2fs and ext4 come on a tar disk that the guest unpacks over its
# root (as in vm-fastpath.sh); the untar row's tree on a disk of its own.
vm_bench_dbench_tar "$work/extras.tar"

vm_bench_untar_tree "$untar_dirs" "$work/tree.tar"

vm_image "$work/disk.img" "$disk_size"
vm_image "$work/cache-wbkit.img" 4G
vm_image "$work/cache-upstream.img" 4G
hdd_start "$work/disk.img" "$work/hdd.sock" "$work/hdd.stats"
hdd_params="full_stroke_ms=8.5 settle_ms=0.5 rpm=7200 mb_per_s=150 rotation=clock ncq=32 max_wait_ms=100${WBKIT_HDD_PARAMS:+ (then $WBKIT_HDD_PARAMS)}"

VM_TIMEOUT=${WBKIT_BENCH_VM_TIMEOUT:-3600}
VM_MEM=${WBKIT_BENCH_VM_MEM:-3072}
{
	echo "ROUNDS=$rounds ROWS='$rows' REGION=$region DIRTY=$dirty STEADY_CACHE=$steady_cache"
	echo "STEADY_REGION=$steady_region STEADY_WRAPS=$steady_wraps STEADY_RAW_TIME=$steady_raw_time"
	echo "DBENCH_TIME=$dbench_time MODEL_TIME=$model_time"
	cat <<'GUEST'
. /lib/wbguest.sh
# /dev/vda the hard-disk model, /dev/vdb and /dev/vdc the caches of dm-wbkit
# and upstream, /dev/vdd the extras, /dev/vde the tree to unpack.
tar -xf /dev/vdd -C / || wb_fail "unpacking the extras failed"
for m in lib/crc16 fs/mbcache fs/jbd2/jbd2 fs/ext4/ext4; do
	insmod /lib/modules/*/kernel/$m.ko || wb_fail "insmod $m failed"
done
mkdir -p /mnt
HDD=/dev/vda
# now, busy_ms, fio_terse, terse: bench/vm-bench-guest.sh
. /lib/wbbench.sh
# new_target <wbkit|upstream> <cache dev> [table options...]
new_target() {
	t=$1 cache=$2 type=writeboost
	shift 2
	[ "$t" = wbkit ] && type=wbkit
	# An invalid magic makes either target format the cache: an empty log.
	wb_zero_cache "$cache"
	if [ $# -gt 0 ]; then opts="$# $*"; else opts=; fi
	wb_dm_create wb "0 $(wb_sectors $HDD) $type $HDD $cache${opts:+ $opts}"
}
end_target() {
	wb_report "r$r.$1.$2.status" "$(wb_dm_status wb)"
	$DMSETUP remove wb || wb_fail "remove failed"
}
cache_of() { if [ "$1" = wbkit ]; then echo /dev/vdb; else echo /dev/vdc; fi; }
model_rows() {
	fio_terse --name=rr --filename=$HDD --rw=randread --bs=4k --runtime="$MODEL_TIME" --time_based
	wb_report model.randread_qd1 "$(terse 8)"
	fio_terse --name=rr16 --filename=$HDD --rw=randread --bs=4k --ioengine=libaio --iodepth=16 \
		--runtime="$MODEL_TIME" --time_based
	wb_report model.randread_qd16 "$(terse 8)"
	fio_terse --name=sr --filename=$HDD --rw=read --bs=1M --runtime="$MODEL_TIME" --time_based
	wb_report model.seqread_kib_s "$(terse 7)"
	fio_terse --name=sr4 --filename=$HDD --rw=read --bs=1M --ioengine=libaio --iodepth=4 \
		--runtime="$MODEL_TIME" --time_based
	wb_report model.seqread_qd4_kib_s "$(terse 7)"
	fio_terse --name=rw --filename=$HDD --rw=randwrite --bs=4k --runtime="$MODEL_TIME" --time_based
	wb_report model.randwrite_qd1 "$(terse 49)"
	fio_terse --name=rw8 --filename=$HDD --rw=randwrite --bs=4k --size=8M --runtime="$MODEL_TIME" --time_based
	wb_report model.randwrite_8m "$(terse 49)"
	fio_terse --name=stride --filename=$HDD --rw=write:60k --bs=4k --runtime="$MODEL_TIME" --time_based
	wb_report model.stride64k_write "$(terse 49)"
	fio_terse --name=stride16 --filename=$HDD --rw=write:60k --bs=4k --ioengine=libaio --iodepth=16 \
		--runtime="$MODEL_TIME" --time_based
	wb_report model.stride64k_write_qd16 "$(terse 49)"
}
# dirty_set <dev> <what> <fio option>: the sort row's dirty set, the same
# blocks every time (one job, so the bound row replays what the targets got).
dirty_set() {
	$FIO --name=dirty --filename="$1" --rw=randwrite --bs=4k --size="$REGION" \
		--io_size="$DIRTY" --direct=1 --ioengine=libaio --iodepth=16 --randrepeat=1 \
		"$3" --output-format=terse >/tmp/fio.out 2>/tmp/fio.err ||
		{ cat /tmp/fio.err; wb_fail "fio failed ($2)"; }
}
# message_cs <message...>: how long `dmsetup message wb 0 <message>` takes,
# in $msg_cs (the median of three).
message_cs() {
	times=
	for i in 1 2 3; do
		now t0
		$DMSETUP message wb 0 "$@" || wb_fail "message $* failed"
		now t1
		times="$times $((t1 - t0))"
	done
	msg_cs=$(printf '%s\n' $times | sort -n | sed -n 2p)
}
# The time of drop_caches less that of a message that changes nothing (the
# tunable set to the value it has): dmsetup's own start (~45 ms under TCG,
# more than 2 % of the batch-32 time) is not writeback. Also the backing
# disk's busy time meanwhile.
sort_row() {
	t=$1
	for batch in 1 32; do
		new_target "$t" "$(cache_of "$t")" writeback_threshold 0 nr_max_batched_writeback $batch
		dirty_set /dev/mapper/wb "sort $t $batch" --end_fsync=1
		message_cs nr_max_batched_writeback $batch
		b0=$(busy_ms)
		now t0
		$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed ($t $batch)"
		now t1
		wb_report "r$r.$t.sortbusy$batch" $(($(busy_ms) - b0))
		wb_report "r$r.$t.sortmsg$batch" "$msg_cs"
		wb_report "r$r.$t.sortwall$batch" $((t1 - t0))
		wb_report "r$r.$t.sort$batch" $((t1 - t0 - msg_cs))
		end_target "$t" "sort$batch"
	done
}
# The sort row's dirty set, written by the same fio job to the bare disk with
# its offsets logged, then sorted and replayed from user space at QD256:
# how long the disk model takes to sweep exactly these blocks, the bound of
# the batch-32 side (the time of a target's sweep beyond it is its own).
sortset_row() {
	dirty_set $HDD "the dirty set on the bare disk" --write_iolog=/tmp/dirty.iolog
	{
		echo "fio version 2 iolog"
		echo "$HDD add"
		echo "$HDD open"
		awk -v d=$HDD '{ for (i = 1; i <= NF; i++) if ($i == "write") { print d, "write", $(i + 1), $(i + 2); break } }' \
			/tmp/dirty.iolog | sort -n -k3 -u
		echo "$HDD close"
	} >/tmp/sorted.iolog
	b0=$(busy_ms)
	fio_terse --name=sorted --filename=$HDD --read_iolog=/tmp/sorted.iolog --ioengine=libaio \
		--iodepth=256 --replay_no_stall=1
	# The disk's busy time (ms), as for the targets' batch 32: fio's own
	# runtime (terse field 50) came out ~0.13 s shorter than the span from
	# its first write's issue to its last one's completion in a block trace.
	wb_report "r$r.raw.sortsetbusy" $(($(busy_ms) - b0))
}
steady_row() {
	t=$1
	if [ "$t" = raw ]; then
		fio_terse --name=raw --filename=$HDD --rw=randwrite --bs=4k --size="$STEADY_REGION" \
			--ioengine=libaio --iodepth=16 --runtime="$STEADY_RAW_TIME" --time_based
		wb_report "r$r.raw.steady" "$(terse 49)"
		return
	fi
	c=$(cache_of "$t")
	wb_dm_create small "0 $((STEADY_CACHE * 2048)) linear $c 0"
	new_target "$t" /dev/mapper/small
	# The first cache's worth fills the empty log at the cache's speed.
	$FIO --name=fill --filename=/dev/mapper/wb --rw=randwrite --bs=4k --size="$STEADY_REGION" \
		--io_size="${STEADY_CACHE}M" --direct=1 --ioengine=libaio --iodepth=16 --randseed=1 \
		--output-format=terse >/dev/null 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fill failed"; }
	fio_terse --name=steady --filename=/dev/mapper/wb --rw=randwrite --bs=4k --size="$STEADY_REGION" \
		--io_size="$((STEADY_CACHE * STEADY_WRAPS))M" --ioengine=libaio --iodepth=16 --randseed=2
	wb_report "r$r.$t.steady" "$(terse 49)"
	# Write completion latency (us): 99th percentile (field 71, "99.000000%=N") and maximum.
	wb_report "r$r.$t.steadyp99" "$(terse 71 | cut -d= -f2)"
	wb_report "r$r.$t.steadymax" "$(terse 56)"
	end_target "$t" steady
	$DMSETUP remove small || wb_fail "remove small failed"
}
# fs_mount <raw|ssd|wbkit|upstream>: mounts a fresh ext4 on /mnt over the
# hard disk, the cache disk alone, or a target.
fs_mount() {
	t=$1 dev=/dev/mapper/wb
	case $t in
	raw) dev=$HDD ;;
	ssd) dev=$(cache_of wbkit) ;; # new_target zeroes its start again
	*) new_target "$t" "$(cache_of "$t")" ;;
	esac
	/usr/sbin/mke2fs -q -F -t ext4 -E lazy_itable_init=1,lazy_journal_init=1,nodiscard "$dev" 2G ||
		wb_fail "mke2fs on $dev failed"
	# noinit_itable: no ext4lazyinit thread zeroing the 32 MiB of inode
	# tables at its own pace while the row runs, on top of the workload.
	# Through a target those are plain writes, and how many fall inside the
	# measured window depends on the target: in a trial, dm-wbkit's cache
	# held 30 MiB more dirty data than upstream's after the same untar.
	mount -t ext4 -o noinit_itable "$dev" /mnt || wb_fail "mount of $dev failed"
}
fs_umount() {
	umount /mnt || wb_fail "umount failed"
	case $1 in raw | ssd) ;; *) end_target "$1" "$2" ;; esac
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
	tar -xf /dev/vde -C /mnt || wb_fail "untar on $1 failed"
	now tm
	sync
	now t1
	wb_report "r$r.$1.untar" $((t1 - t0))
	wb_report "r$r.$1.untarsync" $((t1 - tm))
	wb_report "r$r.$1.untarunpack" $((tm - t0))
	fs_umount "$1" untar
}
# The order of the file-system rows in round r: a Latin square of the bare
# disk, the cache disk alone and the targets (dm-wbkit goes before upstream
# in two rounds of four, after it in the other two).
file_order() {
	case $(($1 % 4)) in
	1) echo raw ssd wbkit upstream ;;
	2) echo upstream wbkit ssd raw ;;
	3) echo wbkit raw upstream ssd ;;
	0) echo ssd upstream raw wbkit ;;
	esac
}
wb_load_target upstream
wb_load_target wbkit target_name=wbkit
case " $ROWS " in *" model "*) model_rows ;; esac
r=1
while [ $r -le "$ROUNDS" ]; do
	if [ $((r % 2)) = 1 ]; then order="wbkit upstream"; else order="upstream wbkit"; fi
	for name in $ROWS; do
		[ "$name" = model ] && continue
		case $name in
		sort) sortset_row ;;
		steady) steady_row raw ;;
		dbench | untar)
			# Every position once in four rounds: a row that always ran
			# first would get whatever the machine gives early in a round.
			for t in $(file_order $r); do
				${name}_row "$t"
			done
			continue
			;;
		esac
		for t in $order; do
			${name}_row "$t"
		done
	done
	wb_report "r$r.done" "$(cut -d' ' -f1 /proc/uptime)"
	r=$((r + 1))
done
GUEST
} >"$work/guest.sh"

vrc=0
vm_run "$work/guest.sh" "$HDD_URL" "$work/cache-wbkit.img" "$work/cache-upstream.img" \
	"$work/extras.tar" "$work/tree.tar" || vrc=$?
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
	echo "# vm-hdd, $date"
	echo
	echo "\`bench/vm-hdd.sh\` at $(git -C "$WBKIT_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), load average $load_start at the start, $load_end at the end ($(nproc) cores), TCG."
	echo "Disk model: $disk_size, $hdd_params. $rounds rounds; rows: $rows."
	echo "sort: $dirty of random 4 KiB writes over $region; steady: ${steady_cache} MiB caches, writes over $steady_region, 1 + $steady_wraps caches' worth, QD16;"
	echo "dbench -s 4 clients ${dbench_time}s; untar: $UNTAR_WHAT then sync."
	echo
	# medians.awk: median, pair and ratio over val[round, key].
	vm_results | awk -v rounds="$rounds" -v rows="$rows" -f "$here/medians.awk" -f <(cat <<'AWK'
	# A steady-state latency row (key: steadyp99 or steadymax, in us).
	function latency_row(what, key) {
		printf "| steady state: write latency, %s | ms | %.1f | %.1f | | | %s | %s | |\n", what,
			median("wbkit." key) / 1000, median("upstream." key) / 1000,
			ratio(median("upstream." key), median("wbkit." key)), pair("upstream." key, "wbkit." key)
	}
	/^model\./ { split($0, kv, "="); model[substr(kv[1], 7)] = kv[2]; next }
	/^r[0-9]+\.[a-z]+\.[a-z0-9]+=/ {
		split($0, kv, "="); split(kv[1], k, ".")
		val[substr(k[1], 2), k[2] "." k[3]] = kv[2] + 0
		next
	}
	END {
		if ("randread_qd1" in model) {
			print "Disk model, bare (fio, one run each):"
			print ""
			print "| workload | figure |"
			print "|---|---|"
			printf "| 4 KiB random reads QD1, whole disk | %.0f IOPS |\n", model["randread_qd1"]
			printf "| 4 KiB random reads QD16, whole disk (the queue reorders) | %.0f IOPS |\n", model["randread_qd16"]
			printf "| 1 MiB sequential reads QD1 | %.1f MB/s |\n", model["seqread_kib_s"] * 1024 / 1e6
			printf "| 1 MiB sequential reads QD4 | %.1f MB/s |\n", model["seqread_qd4_kib_s"] * 1024 / 1e6
			printf "| 4 KiB random writes QD1, whole disk | %.0f IOPS |\n", model["randwrite_qd1"]
			printf "| 4 KiB random writes QD1, 8 MiB region (short seeks) | %.0f IOPS |\n", model["randwrite_8m"]
			printf "| 4 KiB writes 64 KiB apart QD1 (next one on the same track, just missed) | %.0f IOPS |\n", model["stride64k_write"]
			printf "| 4 KiB writes 64 KiB apart QD16 | %.0f IOPS |\n", model["stride64k_write_qd16"]
			print ""
		}
		print "| row | unit | dm-wbkit median | upstream median | raw disk median | cache disk alone | ratio | pair med | alone/upstream |"
		print "|---|---|---|---|---|---|---|---|---|"
		n = split(rows, rl, " ")
		for (i = 1; i <= n; i++) {
			name = rl[i]
			if (name == "sort") {
				for (b = 1; b <= 32; b += 31)
					printf "| writeback of the dirty set, batch %d (drop_caches less the message) | s | %.2f | %.2f | | | %s | %s | |\n", b,
						median("wbkit.sort" b) / 100, median("upstream.sort" b) / 100,
						ratio(median("upstream.sort" b), median("wbkit.sort" b)), pair("upstream.sort" b, "wbkit.sort" b)
				printf "| a message that changes nothing (subtracted above) | s | %.2f | %.2f | | | | | |\n",
					median("wbkit.sortmsg32") / 100, median("upstream.sortmsg32") / 100
				printf "| sorted writeback factor (batch 1 / batch 32) | x | %s | %s | | | | | |\n",
					pair("wbkit.sort1", "wbkit.sort32"), pair("upstream.sort1", "upstream.sort32")
				printf "| the same, wall clock (the message included) | x | %s | %s | | | | | |\n",
					pair("wbkit.sortwall1", "wbkit.sortwall32"), pair("upstream.sortwall1", "upstream.sortwall32")
				lines["sort"] = "sorted writeback factor: " pair("wbkit.sort1", "wbkit.sort32")
				lines["sortu"] = "sorted writeback factor (upstream): " pair("upstream.sort1", "upstream.sort32")
				printf "| backing disk busy (io_ticks) in batch 32; raw: the set sorted, replayed by fio (QD256) | s | %.2f | %.2f | %.2f | | %s | %s | |\n",
					median("wbkit.sortbusy32") / 1000, median("upstream.sortbusy32") / 1000,
					median("raw.sortsetbusy") / 1000,
					ratio(median("upstream.sortbusy32"), median("wbkit.sortbusy32")),
					pair("upstream.sortbusy32", "wbkit.sortbusy32")
				printf "| bound: batch 1 / busy time of the replay | x | %s | %s | | | | | |\n",
					pair("wbkit.sort1", "raw.sortsetbusy", 10), pair("upstream.sort1", "raw.sortsetbusy", 10)
				lines["sortb"] = "sorted writeback factor bound (batch 1 / the sorted set replayed): " pair("wbkit.sort1", "raw.sortsetbusy", 10)
			} else if (name == "steady") {
				printf "| steady-state 4 KiB random writes | IOPS | %.0f | %.0f | %.0f | | %s | %s | |\n",
					median("wbkit.steady"), median("upstream.steady"), median("raw.steady"),
					ratio(median("wbkit.steady"), median("upstream.steady")), pair("wbkit.steady", "upstream.steady")
				lines["steady"] = "steady state ours/upstream: " pair("wbkit.steady", "upstream.steady")
				latency_row("99th percentile", "steadyp99")
				latency_row("maximum", "steadymax")
			} else if (name == "dbench") {
				printf "| dbench -s 4 clients | MB/s | %.1f | %.1f | %.1f | %.1f | %s | %s | %s |\n",
					median("wbkit.dbench"), median("upstream.dbench"), median("raw.dbench"), median("ssd.dbench"),
					ratio(median("wbkit.dbench"), median("upstream.dbench")), pair("wbkit.dbench", "upstream.dbench"),
					pair("ssd.dbench", "upstream.dbench")
				lines["dbench"] = "dbench ours/upstream: " pair("wbkit.dbench", "upstream.dbench")
			} else if (name == "untar") {
				printf "| untar + sync | s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n",
					median("wbkit.untar") / 100, median("upstream.untar") / 100, median("raw.untar") / 100,
					median("ssd.untar") / 100,
					ratio(median("upstream.untar"), median("wbkit.untar")), pair("upstream.untar", "wbkit.untar"),
					pair("upstream.untar", "ssd.untar")
				lines["untar"] = "untar ours/upstream: " pair("upstream.untar", "wbkit.untar")
				printf "| untar: its sync alone | s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n",
					median("wbkit.untarsync") / 100, median("upstream.untarsync") / 100,
					median("raw.untarsync") / 100, median("ssd.untarsync") / 100,
					ratio(median("upstream.untarsync"), median("wbkit.untarsync")),
					pair("upstream.untarsync", "wbkit.untarsync"), pair("upstream.untarsync", "ssd.untarsync")
				# The unpack stays in the page cache (3 GiB of RAM; in a trial no
				# write reached the raw disk before the sync): guest CPU time.
				printf "| untar: the unpack before it | s | %.2f | %.2f | %.2f | %.2f | %s | %s | %s |\n",
					median("wbkit.untarunpack") / 100, median("upstream.untarunpack") / 100,
					median("raw.untarunpack") / 100, median("ssd.untarunpack") / 100,
					ratio(median("upstream.untarunpack"), median("wbkit.untarunpack")),
					pair("upstream.untarunpack", "wbkit.untarunpack"), pair("upstream.untarunpack", "ssd.untarunpack")
			}
		}
		print ""
		print "ratio: of the medians, dm-wbkit / upstream for rates, upstream / dm-wbkit for times (higher is"
		print "better for dm-wbkit); pair med: the median over the rounds of the same ratio, each pair measured"
		print "back to back. Sorted writeback factor: time with nr_max_batched_writeback 1 / with 32, per target."
		print "alone/upstream: the same pair median for ext4 on the cache disk alone (no target) against upstream."
		print "A target writes the same data to that disk and more (metadata, flushes): it can pass this figure"
		print "only by merging or dropping writes (group commit, overwrites in RAM)."
		print ""
		for (l in lines) printf "%s\n", lines[l] > "/dev/stderr"
	}
AWK
	) 2>"$work/lines"
} >"$report"
cat "$report"
for k in "sorted writeback factor:" "sorted writeback factor (upstream):" "sorted writeback factor bound" \
	"steady state ours/upstream:" "dbench ours/upstream:" "untar ours/upstream:"; do
	grep -F "$k" "$work/lines" || true
done
if [ "$results" != - ]; then
	mkdir -p "$results"
	out=$results/vm-hdd-$(date -u +%Y-%m-%d-%H%M).md
	{
		cat "$report"
		echo '```'
		for k in "sorted writeback factor:" "sorted writeback factor bound" "steady state ours/upstream:" \
			"dbench ours/upstream:" "untar ours/upstream:"; do
			grep -F "$k" "$work/lines" || true
		done
		echo '```'
	} >"$out"
	echo "table written to $out"
fi
