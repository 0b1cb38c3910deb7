#!/usr/bin/env bash
# Construction of a full log: a cache of WBKIT_BENCH_FULL_GIB GiB (sparse)
# whose every slot holds a valid segment of 127 dirty blocks (written by
# replay_synth sparse: headers only, the data blocks are zeros, so holes).
# Construction reads every header and indexes every block; it should take
# about as long as reading those headers does. Each round, in one VM boot:
#   headers  reading every slot's header block (4 KiB at each 512 KiB) with
#            fio, QD1 as dd would and QD32, from the device under the cache
#   create   `dmsetup create` of dm-wbkit over the full log, and of upstream
#            dm-writeboost, each followed by its remove
#   kmem     slab + vmalloc growth of that construction
# Medians over WBKIT_BENCH_ROUNDS (3); the load average at the start and end.
# Writes bench/results/vm-full-log-<date>.md.
# Usage: bench/vm-full-log.sh [BUILD_DIR]
#   WBKIT_BENCH_FULL_GIB (64), WBKIT_BENCH_ROUNDS (3),
#   WBKIT_BENCH_VM_MEM (4096: MiB), WBKIT_BENCH_RESULTS (bench/results; "-": none)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/vm-bench.inc"
build=$(realpath "${1:-$WBKIT_ROOT/build}")

gib=${WBKIT_BENCH_FULL_GIB:-64}
rounds=${WBKIT_BENCH_ROUNDS:-3}
results=${WBKIT_BENCH_RESULTS:-$WBKIT_ROOT/bench/results}
synth=$build/bench/replay_synth
[ -x "$synth" ] || { echo "no $synth: build the tree first" >&2; exit 2; }

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
vm_bench_prepare
vm_has_upstream || { echo "skipped: upstream dm-writeboost.ko not built for $VM_KVER (dm-writeboost-dkms)"; exit 0; }

work=$(mktemp -d "$VM_WORK/bench-full-log.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Slots of a cache of gib GiB (1 MiB superblock, 512 KiB slots), 127 blocks each.
slots=$(((gib * 1024 - 1) * 2))
"$synth" sparse "$work/cache.img" "$work/backing.img" $((slots * 127))

VM_TIMEOUT=${WBKIT_BENCH_VM_TIMEOUT:-7200}
VM_MEM=${WBKIT_BENCH_VM_MEM:-4096}
# The backing device takes zeros only (writeback of the zero data): holes.
export VM_DRIVE_OPTS_vda=discard=unmap,detect-zeroes=unmap
{
	echo "ROUNDS=$rounds SLOTS=$slots"
	cat <<'GUEST'
. /lib/wbguest.sh
BACKING=/dev/vda
CACHE=/dev/vdb
wb_load_target upstream
wb_load_target wbkit target_name=wbkit
kernel_kb() { awk '/^Slab:|^VmallocUsed:/ { kb += $2 } END { print kb }' /proc/meminfo; }
now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
headers() {
	$FIO --name=headers --filename=$CACHE --rw=read:508k --bs=4k --offset=1M --number_ios=$SLOTS \
		--direct=1 --ioengine=$1 --iodepth=$2 --output-format=terse >/tmp/fio.out 2>/tmp/fio.err ||
		{ cat /tmp/fio.err; wb_fail "reading the headers failed"; }
	# Terse field 9: the read runtime (ms); 6: KiB read.
	wb_report "r$r.headers$2" "$(cut -d';' -f9 /tmp/fio.out)"
	wb_report "r$r.headers$2.kib" "$(cut -d';' -f6 /tmp/fio.out)"
}
build() {
	sectors=$(wb_sectors $BACKING)
	echo 3 >/proc/sys/vm/drop_caches
	k0=$(kernel_kb)
	t0=$(now_ms)
	wb_dm_create wb "0 $sectors $2 $BACKING $CACHE" || wb_fail "$1: create over the full log failed"
	t1=$(now_ms)
	k1=$(kernel_kb)
	wb_report "r$r.$1.create" $((t1 - t0))
	wb_report "r$r.$1.kmem" $((k1 - k0))
	wb_report "r$r.$1.status" "$(wb_dm_status wb | cut -d' ' -f1-8)"
	$DMSETUP remove wb || wb_fail "$1: remove failed"
}
r=1
while [ $r -le "$ROUNDS" ]; do
	echo 3 >/proc/sys/vm/drop_caches
	headers psync 1
	headers libaio 32
	build wbkit wbkit
	build upstream writeboost
	r=$((r + 1))
done
GUEST
} >"$work/guest.sh"

vm_bench_run "$work/guest.sh" "$work/backing.img" "$work/cache.img"

report=$work/report.md
{
	vm_bench_report_head vm-full-log
	echo "A $gib GiB cache, every one of its $slots slots a valid segment of 127 dirty blocks ($((slots * 127)) blocks). Medians over $rounds rounds."
	echo "Status after construction (last round): dm-wbkit \`$(vm_result "r$rounds.wbkit.status")\`, upstream \`$(vm_result "r$rounds.upstream.status")\`."
	echo
	vm_results | awk -v rounds="$rounds" -f "$here/medians.awk" -f <(cat <<'AWK'
	/^r[0-9]+\.[a-z0-9.]+=/ {
		split($0, kv, "="); r = substr(kv[1], 2, index(kv[1], ".") - 2)
		val[r, substr(kv[1], index(kv[1], ".") + 1)] = kv[2] + 0
	}
	END {
		print "| figure | value |"
		print "|---|---|"
		printf "| reading every header, QD1 (fio, as dd would) | %.1f s |\n", median("headers1") / 1000
		printf "| reading every header, QD32 | %.1f s |\n", median("headers32") / 1000
		printf "| dm-wbkit: dmsetup create | %.1f s |\n", median("wbkit.create") / 1000
		printf "| upstream: dmsetup create | %.1f s |\n", median("upstream.create") / 1000
		printf "| dm-wbkit: kernel memory (slab + vmalloc) | %d KiB |\n", median("wbkit.kmem")
		printf "| upstream: kernel memory (slab + vmalloc) | %d KiB |\n", median("upstream.kmem")
		print ""
		print "```"
		printf "create/headers QD1 wbkit: %.2f\n", median("wbkit.create") / median("headers1")
		printf "create/headers QD32 wbkit: %.2f\n", median("wbkit.create") / median("headers32")
		printf "ours/upstream create: %.2f\n", median("wbkit.create") / median("upstream.create")
		print "```"
	}
AWK
)
} >"$report"
vm_bench_save "$report" vm-full-log "$results"
