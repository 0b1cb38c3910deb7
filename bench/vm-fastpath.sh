#!/usr/bin/env bash
# dm-wbkit against the upstream dm-writeboost target, side by side in one VM
# boot: both modules loaded (dm-wbkit as target "wbkit"), every row run on
# both targets back to back, over several rounds; medians per row next to the
# best round, the ratio of the medians dm-wbkit / upstream (goal >= 1.2 on
# every row, read hits >= 1), and the median of the per-round ratios, which a
# drift of the shared machine's speed between rounds does not move.
# Rows, each on a freshly formatted cache:
#   randwrite  4 KiB random writes, libaio iodepth 32, 2 jobs (IOPS)
#   fsync      4 KiB random writes, QD1, fsync after each (IOPS; p50/p99/p99.9
#              of the fsync latency in microseconds)
#   dsync      8 writers, 4 KiB random O_DSYNC writes, QD1 each (IOPS)
#   readhit    4 KiB random reads of data written before (all in the cache),
#              libaio iodepth 16, 2 jobs (IOPS)
#   recent     4 KiB random reads of the newest 3 MiB of that data, written
#              last (IOPS): dm-wbkit serves them from the RAM buffers its
#              segments keep after they are written
#   randrw     70/30 random read/write over that same cached data (IOPS)
#              Of the default 64 MiB, about 43 % stays in the RAM buffers
#              dm-wbkit's written segments keep (up to ~27.5 MiB while
#              writeback is idle); WBKIT_BENCH_HIT_MIB=1024 makes nearly
#              every hit a read of the cache device.
#   dbench     dbench -s (4 clients, O_SYNC) on a fresh ext4 over the cached device,
#              backing disk throttled to hard-disk IOPS; also on the bare
#              throttled disk (MB/s)
# The fio rows use an unthrottled backing disk; writeback is off
# (writeback_threshold 0) and the caches are larger than a row writes, so the
# write rows measure the targets' write paths, not the backing device.
# The figures are TCG-emulated (no KVM) on a shared machine: compare the
# columns of one run only. The load average is printed at start and end.
# Usage: bench/vm-fastpath.sh [BUILD_DIR]
#   WBKIT_BENCH_ROUNDS (5), WBKIT_BENCH_RUNTIME (6 s per fio row),
#   WBKIT_BENCH_DBENCH_TIME (15 s), WBKIT_BENCH_BACKING_IOPS (150),
#   WBKIT_BENCH_ROWS (all: "randwrite fsync dsync readhit recent randrw dbench"),
#   WBKIT_BENCH_HIT_MIB (64: the data readhit, recent and randrw read),
#   WBKIT_BENCH_CACHE_SIZE (8G; a small one, 256M say, makes the write rows
#   wrap it and measure the steady state, writeback included: the bench then
#   warns for every such row)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/vm-bench.inc"

rounds=${WBKIT_BENCH_ROUNDS:-5}
runtime=${WBKIT_BENCH_RUNTIME:-6}
dbench_time=${WBKIT_BENCH_DBENCH_TIME:-15}
hdd_iops=${WBKIT_BENCH_BACKING_IOPS:-150}
rows=${WBKIT_BENCH_ROWS:-randwrite fsync dsync readhit recent randrw dbench}
hit_mib=${WBKIT_BENCH_HIT_MIB:-64}
cache_size=${WBKIT_BENCH_CACHE_SIZE:-8G}

vm_bench_prepare
vm_has_upstream || { echo "skipped: upstream dm-writeboost.ko not built for $VM_KVER (dm-writeboost-dkms)"; exit 0; }

work=$(mktemp -d "$VM_WORK/bench-fast.XXXXXX") # not tmpfs: cache=none needs O_DIRECT
trap 'rm -rf "$work"' EXIT

# dbench, mke2fs and ext4 are not in the test initramfs: they come on a tar
# disk that the guest unpacks over its root.
extras=
case " $rows " in
*" dbench "*)
	vm_bench_dbench_tar "$work/extras.tar"
	extras=$work/extras.tar
	;;
esac

vm_image "$work/backing.img" 4G
vm_image "$work/backing-hdd.img" 4G
# Sparse, 8 GiB by default: a row that seals a segment per write (fsync,
# dsync, dbench) writes 2-3 GiB of slots on a fast host, and a cache that
# wraps starts writeback in the middle of the row.
vm_image "$work/cache-wbkit.img" "$cache_size"
vm_image "$work/cache-upstream.img" "$cache_size"

VM_TIMEOUT=${WBKIT_BENCH_VM_TIMEOUT:-3600}
# Both modules stay loaded for the whole run, and upstream's keeps about
# 16 MiB per construction after its device is removed (tests/crash/README.md).
VM_MEM=${WBKIT_BENCH_VM_MEM:-3072}
{
	echo "ROUNDS=$rounds RUNTIME=$runtime DBENCH_TIME=$dbench_time ROWS='$rows' HIT_MIB=$hit_mib"
	cat <<'GUEST'
. /lib/wbguest.sh
# /dev/vda backing, /dev/vdb throttled backing, /dev/vdc and /dev/vdd the
# caches of dm-wbkit and upstream, /dev/vde the extras (when dbench runs).
if [ -b /dev/vdf ]; then
	tar -xf /dev/vde -C / || wb_fail "unpacking the extras failed"
	# In dependency order (crc32c is loaded already).
	for m in lib/crc16 fs/mbcache fs/jbd2/jbd2 fs/ext4/ext4; do
		insmod /lib/modules/*/kernel/$m.ko || wb_fail "insmod $m failed"
	done
	mkdir -p /mnt
fi
fio_run() {
	$FIO --direct=1 --randrepeat=1 --runtime="$RUNTIME" --time_based "$@" \
		>/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fio $* failed"; }
}
# Terse v3: read IOPS field 8, write IOPS field 49.
terse() { cut -d';' -f"$1" /tmp/fio.out | head -1; }
new_target() {
	t=$1 cache=$2 backing=$3 type=writeboost
	[ "$t" = wbkit ] && type=wbkit
	# An invalid magic makes either target format the cache: an empty log.
	wb_zero_cache "$cache"
	wb_dm_create wb "0 $(wb_sectors "$backing") $type $backing $cache 2 writeback_threshold 0"
}
end_target() {
	# last_writeback_id (6th field) must stay 0: nothing written back.
	wb_report "r$r.$1.$2.status" "$(wb_dm_status wb)"
	$DMSETUP remove wb || wb_fail "remove failed"
}
row() {
	t=$1 cache=$2 name=$3 dev=/dev/mapper/wb
	case $name in
	randwrite)
		new_target "$t" "$cache" /dev/vda
		fio_run --name=rw --filename=$dev --rw=randwrite --bs=4k --size=1G \
			--ioengine=libaio --iodepth=32 --numjobs=2 --group_reporting \
			--output-format=terse --terse-version=3
		wb_report "r$r.$t.randwrite" "$(terse 49)" ;;
	fsync)
		new_target "$t" "$cache" /dev/vda
		fio_run --name=fs --filename=$dev --rw=randwrite --bs=4k --size=1G \
			--ioengine=psync --fsync=1 --percentile_list=50:99:99.9 \
			--output-format=json
		# IOPS of the writes, then the percentiles of the fsync latency (ns).
		res=$(awk '/"write" :/ { w = 1 } w && /"iops" :/ && !i { i = $3 }
			/"sync" :/ { s = 1 }
			s && /"50.000000"/ { p50 = $3 } s && /"99.000000"/ { p99 = $3 }
			s && /"99.900000"/ { p999 = $3 }
			END { gsub(",", "", i); gsub(",", "", p50); gsub(",", "", p99); gsub(",", "", p999)
				print i, p50, p99, p999 }' /tmp/fio.out)
		wb_report "r$r.$t.fsync" "$res" ;;
	dsync)
		new_target "$t" "$cache" /dev/vda
		fio_run --name=ds --filename=$dev --rw=randwrite --bs=4k --size=1G \
			--ioengine=psync --sync=dsync --numjobs=8 --group_reporting \
			--output-format=terse --terse-version=3
		wb_report "r$r.$t.dsync" "$(terse 49)" ;;
	readhit|recent|randrw)
		new_target "$t" "$cache" /dev/vda
		# HIT_MIB written (and flushed): every later read of it is a hit.
		$FIO --name=fill --filename=$dev --rw=write --bs=1M --size=${HIT_MIB}M --direct=1 \
			--end_fsync=1 --output-format=terse >/dev/null 2>/tmp/fio.err ||
			{ cat /tmp/fio.err; wb_fail "fill failed"; }
		if [ "$name" = readhit ]; then
			fio_run --name=rh --filename=$dev --rw=randread --bs=4k --size=${HIT_MIB}M \
				--ioengine=libaio --iodepth=16 --numjobs=2 --group_reporting \
				--output-format=terse --terse-version=3
			wb_report "r$r.$t.readhit" "$(terse 8)"
		elif [ "$name" = recent ]; then
			fio_run --name=rr --filename=$dev --rw=randread --bs=4k --offset=$((HIT_MIB - 3))M --size=3M \
				--ioengine=libaio --iodepth=16 --numjobs=2 --group_reporting \
				--output-format=terse --terse-version=3
			wb_report "r$r.$t.recent" "$(terse 8)"
		else
			fio_run --name=mx --filename=$dev --rw=randrw --rwmixread=70 --bs=4k \
				--size=${HIT_MIB}M --ioengine=libaio --iodepth=32 --numjobs=2 --group_reporting \
				--output-format=terse --terse-version=3
			wb_report "r$r.$t.randrw" "$(($(terse 8 | cut -d. -f1) + $(terse 49 | cut -d. -f1)))"
		fi ;;
	dbench)
		if [ "$t" = raw ]; then
			dev=/dev/vdb
		else
			new_target "$t" "$cache" /dev/vdb
		fi
		/usr/sbin/mke2fs -q -F -t ext4 -E lazy_itable_init=1,lazy_journal_init=1 "$dev" 2G ||
			wb_fail "mke2fs on $dev failed"
		mount -t ext4 "$dev" /mnt || wb_fail "mount of $dev failed"
		# -s: O_SYNC file I/O, so the device (not the page cache) sets the pace.
		/usr/bin/dbench -s -c /usr/share/dbench/client.txt -D /mnt -t "$DBENCH_TIME" 4 \
			>/tmp/dbench.out 2>&1 || { tail -5 /tmp/dbench.out; wb_fail "dbench on $dev failed"; }
		umount /mnt || wb_fail "umount failed"
		wb_report "r$r.$t.dbench" "$(awk '/Throughput/ { print $2 }' /tmp/dbench.out | tail -1)"
		[ "$t" = raw ] && return ;;
	esac
	end_target "$t" "$name"
}
wb_load_target upstream
wb_load_target wbkit target_name=wbkit
r=1
while [ $r -le "$ROUNDS" ]; do
	# Each row runs on both targets back to back, dm-wbkit first in odd
	# rounds and upstream first in even ones: a drift of the shared
	# machine's speed reaches both figures of a pair alike and favours
	# neither.
	if [ $((r % 2)) = 1 ]; then order="wbkit upstream"; else order="upstream wbkit"; fi
	for name in $ROWS; do
		[ "$name" = dbench ] && row raw - dbench
		for t in $order; do
			if [ "$t" = wbkit ]; then cache=/dev/vdc; else cache=/dev/vdd; fi
			row "$t" "$cache" "$name"
		done
	done
	wb_report "r$r.done" "$(cut -d' ' -f1 /proc/uptime)"
	r=$((r + 1))
done
GUEST
} >"$work/guest.sh"

disks=("$work/backing.img" "$work/backing-hdd.img" "$work/cache-wbkit.img" "$work/cache-upstream.img")
[ -n "$extras" ] && disks+=("$extras")
vrc=0
VM_DRIVE_OPTS_vdb="throttling.iops-total=$hdd_iops" vm_run "$work/guest.sh" "${disks[@]}" || vrc=$?
echo "VM: ${VM_ELAPSED}s, log $VM_LOG; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$vrc" != 0 ]; then
	echo "the VM run failed (rc $vrc): $(vm_result fail)"
	exit 1
fi
[ -z "$(vm_result skip)" ] || { echo "skipped: $(vm_result skip)"; exit 0; }

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $rounds rounds, ${runtime}s per fio row, $cache_size caches, hits over $hit_mib MiB, dbench ${dbench_time}s on a disk throttled to $hdd_iops IOPS"
vm_results | awk -v rounds="$rounds" -v rows="$rows" '
	# Inserts x into v[1..m], kept sorted; returns the new count.
	function insert(v, m, x,   j) {
		for (j = m; j > 0 && v[j] > x; j--) v[j + 1] = v[j]
		v[j + 1] = x
		return m + 1
	}
	function middle(v, m) {
		return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
	}
	function median(key,   v, m, r) {
		m = 0
		for (r = 1; r <= rounds; r++)
			if ((r, key) in val) m = insert(v, m, val[r, key])
		return m ? middle(v, m) : 0
	}
	# Median over the rounds of wbkit/upstream (inv: upstream/wbkit).
	function pair_median(key, inv,   v, m, r, w, u) {
		m = 0
		for (r = 1; r <= rounds; r++) {
			if (!((r, "wbkit." key) in val) || !((r, "upstream." key) in val)) continue
			w = val[r, "wbkit." key]; u = val[r, "upstream." key]
			if (w > 0 && u > 0) m = insert(v, m, inv ? u / w : w / u)
		}
		return m ? sprintf("%.2f", middle(v, m)) : "-"
	}
	function best(key, low,   r, b, x) {
		b = ""
		for (r = 1; r <= rounds; r++) {
			if (!((r, key) in val)) continue
			x = val[r, key]
			if (b == "" || (low ? x < b : x > b)) b = x
		}
		return b == "" ? 0 : b
	}
	/^r[0-9]+\.[a-z]+\.[a-z]+=/ {
		split($0, kv, "="); split(kv[1], k, ".")
		r = substr(k[1], 2); t = k[2]; name = k[3]
		if (name == "status") next
		n = split(kv[2], f, " ")
		val[r, t "." name] = f[1] + 0
		if (name == "fsync") {
			val[r, t ".p50"] = f[2] / 1000; val[r, t ".p99"] = f[3] / 1000; val[r, t ".p999"] = f[4] / 1000
		}
		next
	}
	/^r[0-9]+\.[a-z]+\.[a-z]+\.status=/ {
		split($0, kv, "="); split(kv[1], k, "."); split(kv[2], s, " ")
		if (s[6] != 0) printf "warning: %s wrote back during row %s of round %s: the cache filled\n", k[2], k[3], substr(k[1], 2)
	}
	END {
		unit["randwrite"] = "IOPS"; unit["fsync"] = "IOPS"; unit["dsync"] = "IOPS"
		unit["readhit"] = "IOPS"; unit["recent"] = "IOPS"; unit["randrw"] = "IOPS"; unit["dbench"] = "MB/s"
		printf "%-10s %-5s %12s %12s %12s %12s %8s %9s\n", "row", "unit", "wbkit med", "wbkit best", "upstr med", "upstr best", "ratio", "pair med"
		nr = split(rows, rl, " ")
		for (i = 1; i <= nr; i++) {
			name = rl[i]
			w = median("wbkit." name); u = median("upstream." name)
			printf "%-10s %-5s %12.1f %12.1f %12.1f %12.1f %8s %9s\n", name, unit[name], w, best("wbkit." name), \
				u, best("upstream." name), (u > 0 ? sprintf("%.2f", w / u) : "-"), pair_median(name, 0)
			if (name == "fsync")
				for (p = 1; p <= 3; p++) {
					pk = p == 1 ? "p50" : (p == 2 ? "p99" : "p999")
					w = median("wbkit." pk); u = median("upstream." pk)
					printf "%-10s %-5s %12.0f %12.0f %12.0f %12.0f %8s %9s\n", " " pk, "us", w, best("wbkit." pk, 1), \
						u, best("upstream." pk, 1), (w > 0 ? sprintf("%.2f", u / w) : "-"), pair_median(pk, 1)
				}
			if (name == "dbench") {
				raw = median("raw.dbench")
				printf "%-10s %-5s %12.1f %12.1f %12s %12s %8s\n", " raw disk", "MB/s", raw, best("raw.dbench"), "", "", ""
				if (raw > 0) printf "  dbench over the cache / bare disk (medians): dm-wbkit %.2f, upstream %.2f\n", median("wbkit.dbench") / raw, median("upstream.dbench") / raw
			}
		}
		printf "ratio: dm-wbkit median / upstream median; pair med: the median over the rounds of dm-wbkit / upstream,\n"
		printf "each pair measured back to back (latency rows: upstream / dm-wbkit; higher is better for dm-wbkit everywhere)\n"
	}'
