#!/usr/bin/env bash
# Kernel memory of each cache at several cache sizes, side by side in one VM
# boot: slab + vmalloc (/proc/meminfo) from before the cache is built to
# after it has taken WBKIT_BENCH_KMEM_WRITE of random 4 KiB writes (so that
# what a cache allocates lazily is counted too), and the drop of MemFree over
# the same span, which also counts whole pages (bcache's btree node cache). The cache disk is a sparse
# image (zeros become holes), so a 64 GiB cache takes little room on the host.
# Each size is a fresh slice of it; every figure is the median over rounds.
# Prints "ours/<peer> kmem <size>: X" (lower is better for dm-wbkit) and
# "wbkit bytes per cache block <size>: X", and writes the table to
# bench/results/vm-kmem-<date>.md. Memory, not time, is measured, so the
# load does not change the figures; it is printed all the same.
# Usage: bench/vm-kmem.sh [BUILD_DIR]
#   WBKIT_BENCH_ROUNDS (3), WBKIT_BENCH_KMEM_SIZES ("1 64": GiB),
#   WBKIT_BENCH_PEERS ("wbkit upstream writecache bcache dmcache"),
#   WBKIT_BENCH_KMEM_WRITE (16M), WBKIT_BENCH_VM_MEM (4096: MiB),
#   WBKIT_BENCH_RESULTS (bench/results; "-" writes no file)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/vm-bench.inc"
build=$(realpath "${1:-$WBKIT_ROOT/build}")

rounds=${WBKIT_BENCH_ROUNDS:-3}
sizes=${WBKIT_BENCH_KMEM_SIZES:-1 64}
peers=${WBKIT_BENCH_PEERS:-wbkit upstream writecache bcache dmcache}
write=${WBKIT_BENCH_KMEM_WRITE:-16M}
results=${WBKIT_BENCH_RESULTS:-$WBKIT_ROOT/bench/results}
max_gib=0
for s in $sizes; do [ "$s" -le "$max_gib" ] || max_gib=$s; done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
vm_bench_prepare
vm_has_upstream || { echo "skipped: upstream dm-writeboost.ko not built for $VM_KVER (dm-writeboost-dkms)"; exit 0; }
command -v make-bcache >/dev/null || echo "note: make-bcache not installed (bcache-tools): the bcache rows will be skipped"

work=$(mktemp -d "$VM_WORK/bench-kmem.XXXXXX")
trap 'rm -rf "$work"' EXIT
vm_image "$work/disk.img" 4G
truncate -s "$((max_gib + 1))G" "$work/ssd.img"

VM_TIMEOUT=${WBKIT_BENCH_VM_TIMEOUT:-7200}
VM_MEM=${WBKIT_BENCH_VM_MEM:-4096}
export VM_DRIVE_OPTS_vdb=discard=unmap,detect-zeroes=unmap
{
	echo "ROUNDS=$rounds SIZES='$sizes' PEERS='$peers' WRITE=$write"
	cat <<'GUEST'
. /lib/wbguest.sh
HDD=/dev/vda
SSD=/dev/vdb
wb_load_target upstream
wb_load_target wbkit target_name=wbkit
WB_WBKIT_TARGET=wbkit
WB_BCACHE_BUCKET=512k
WB_DMCACHE_BLOCK=64
for k in $PEERS; do wb_cache_modules "$k"; done
kernel_kb() { awk '/^Slab:|^VmallocUsed:/ { kb += $2 } END { print kb }' /proc/meminfo; }
# MemFree after dropping the page cache: memory a cache takes in whole pages
# (bcache's btree node cache) shows here, not in slab + vmalloc.
free_kb() {
	sync
	echo 3 >/proc/sys/vm/drop_caches
	awk '/^MemFree:/ { print $2 }' /proc/meminfo
}
r=1
while [ $r -le "$ROUNDS" ]; do
	for gib in $SIZES; do
		# dm-cache's metadata: 64 MiB per 64 GiB of 32 KiB blocks is ample
		# (about 8 bytes of mapping and 4 of hints per block, in 4 KiB nodes).
		WB_DMCACHE_META_SECTORS=$(((gib < 8 ? 8 : gib) * 2048))
		for t in $PEERS; do
			f0=$(free_kb)
			k0=$(kernel_kb)
			wb_dm_create wbc "0 $((gib * 2097152)) linear $SSD 0"
			wb_cache_create "$t" $HDD /dev/mapper/wbc format 2>/tmp/create.err ||
				wb_fail "building $t at $gib GiB: $(tr '\n' ' ' </tmp/create.err)"
			k1=$(kernel_kb)
			$FIO --name=w --filename=$WB_CACHE_DEV --rw=randwrite --bs=4k --size=1G --io_size=$WRITE \
				--direct=1 --ioengine=libaio --iodepth=16 --randseed=9 --output-format=terse \
				>/dev/null 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "writes on $t failed"; }
			k2=$(kernel_kb)
			f2=$(free_kb)
			wb_report "r$r.$t.$gib.built" $((k1 - k0))
			wb_report "r$r.$t.$gib.kmem" $((k2 - k0))
			wb_report "r$r.$t.$gib.used" $((f0 - f2))
			[ "$t" != wbkit ] || wb_report "r$r.$t.$gib.blocks" "$(wb_status_field 2 wb)"
			wb_cache_remove "$t" || wb_fail "removing $t failed"
			$DMSETUP remove --retry wbc || wb_fail "remove wbc failed"
		done
	done
	r=$((r + 1))
done
GUEST
} >"$work/guest.sh"

vm_bench_run "$work/guest.sh" "$work/disk.img" "$work/ssd.img"

report=$work/report.md
{
	vm_bench_report_head vm-kmem
	echo "Slab + vmalloc growth from before the cache is built to after $write of random 4 KiB writes; medians over $rounds rounds."
	echo "MemFree drop: free memory (page cache dropped) before the build and after the writes, whole-page allocations included."
	echo "On-disk metadata: bcache 512 KiB buckets, its btree in the cache device; dm-cache 32 KiB blocks, smq, a metadata device of 1 MiB per GiB of cache (at least 8 MiB);"
	echo "dm-writecache 16 B per 4 KiB block in the cache device; dm-wbkit and upstream 16 B per block in each segment's header."
	echo
	vm_results | awk -v rounds="$rounds" -v sizes="$sizes" -v peers="$peers" -f "$here/medians.awk" -f <(cat <<'AWK'
	/^r[0-9]+\.[a-z0-9-]+\.[0-9]+\.[a-z]+=/ {
		split($0, kv, "="); split(kv[1], k, ".")
		val[substr(k[1], 2), k[2] "." k[3] "." k[4]] = kv[2] + 0
	}
	BEGIN {
		name["wbkit"] = "dm-wbkit"; name["upstream"] = "upstream"; name["writecache"] = "dm-writecache"
		name["bcache"] = "bcache"; name["dmcache"] = "dm-cache"
	}
	END {
		np = split(peers, pl, " "); ns = split(sizes, sl, " ")
		head = "| cache | figure"; sep = "|---|---"
		for (i = 1; i <= np; i++) { head = head " | " name[pl[i]]; sep = sep "|---" }
		print head " |"; print sep "|"
		for (j = 1; j <= ns; j++) {
			g = sl[j]
			line = "| " g " GiB | KiB built"
			for (i = 1; i <= np; i++) line = line " | " sprintf("%d", median(pl[i] "." g ".built"))
			print line " |"
			line = "| " g " GiB | KiB after " "writes"
			for (i = 1; i <= np; i++) line = line " | " sprintf("%d", median(pl[i] "." g ".kmem"))
			print line " |"
			line = "| " g " GiB | MemFree drop, KiB"
			for (i = 1; i <= np; i++) line = line " | " sprintf("%d", median(pl[i] "." g ".used"))
			print line " |"
		}
		print ""
		print "```"
		for (j = 1; j <= ns; j++) {
			g = sl[j]
			w = median("wbkit." g ".kmem")
			b = median("wbkit." g ".blocks")
			if (b > 0)
				printf "wbkit bytes per cache block %s GiB: %.2f (%d blocks; bound 16 B a block + 8 MiB: %d KiB)\n",
					g, w * 1024 / b, b, int((16 * b + 8 * 1048576) / 1024)
			for (i = 2; i <= np; i++)
				if (median(pl[i] "." g ".kmem") > 0)
					printf "ours/%s kmem %s GiB: %.3f\n", pl[i], g, w / median(pl[i] "." g ".kmem")
		}
		print "```"
	}
AWK
)
} >"$report"
vm_bench_save "$report" vm-kmem "$results"
