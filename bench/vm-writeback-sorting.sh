#!/usr/bin/env bash
# The writeback experiment of dm-writeboost's design history: is sorted,
# batched writeback faster than writing the same dirty blocks back a segment
# at a time? Random 4 KiB writes fill the cache with writeback off
# (writeback_threshold 0), then `dmsetup message wb 0 drop_caches` is timed
# onto a backing disk that qemu throttles to hard-disk IOPS
# (throttling.iops-total on that drive only), with nr_max_batched_writeback 1
# and 32. Each run starts from a freshly formatted cache and writes the same
# dirty set (fio, fixed random seed). IOPS throttling does not model seeks:
# the gain measured here is the requests saved by merging adjacent blocks
# (the guest block layer and qemu's virtio-blk merge adjacent writes that
# arrive together), which sorting a larger batch makes more frequent.
# Usage: bench/vm-writeback-sorting.sh [BUILD_DIR]
#   WBKIT_BENCH_BACKING_IOPS (150), WBKIT_BENCH_REGION (32M: where the random
#   writes land), WBKIT_BENCH_DIRTY (16M: bytes written, each 4 KiB block at
#   most once, so 4096 dirty blocks, half of the region)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/vm-bench.inc"

iops=${WBKIT_BENCH_BACKING_IOPS:-150}
region=${WBKIT_BENCH_REGION:-32M}
dirty=${WBKIT_BENCH_DIRTY:-16M}

vm_bench_prepare
# upstream's runs in the other order: drift of the shared machine's load
# then does not favour one batch size.
runs="wbkit:1 wbkit:32"
if vm_has_upstream; then
	runs="$runs upstream:32 upstream:1"
else
	echo "upstream dm-writeboost.ko not built for $VM_KVER: measuring dm-wbkit only"
fi

work=$(mktemp -d "$VM_WORK/bench-wbsort.XXXXXX") # not tmpfs: cache=none needs O_DIRECT
trap 'rm -rf "$work"' EXIT
vm_image "$work/backing.img" 256M
# 128 MiB holds the dirty set many times over: nothing is written back
# before drop_caches.
vm_image "$work/cache.img" 128M

{
	echo "RUNS='$runs' REGION=$region DIRTY=$dirty"
	cat <<'GUEST'
. /lib/wbguest.sh
# Writes completed and merged by the guest's block layer on the backing
# device (/sys/block/<dev>/stat fields 5 and 6).
backing_writes() { set -- $(cat /sys/block/vda/stat); echo "$5 $6"; }
uptime_cs() { tr -d . </proc/uptime | cut -d' ' -f1; }
loaded=
for run in $RUNS; do
	t=${run%:*} batch=${run#*:}
	if [ "$t" != "$loaded" ]; then
		# Both modules register "writeboost": only one may be loaded at a time.
		case $loaded in
		wbkit) rmmod dm_wbkit || wb_fail "rmmod dm_wbkit failed" ;;
		upstream) rmmod dm_writeboost || wb_fail "rmmod dm_writeboost failed" ;;
		esac
		wb_load_target "$t"
		loaded=$t
	fi
	# An invalid magic makes the target format the cache: an empty log.
	wb_zero_cache /dev/vdb
	wb_dm_create wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb 4 writeback_threshold 0 nr_max_batched_writeback $batch"
	# randrepeat: the same blocks in the same order in every run; the final
	# fsync puts the RAM buffer on the cache device, so the timed part below
	# is writeback only.
	$FIO --name=dirty --filename=/dev/mapper/wb --rw=randwrite --bs=4k --size="$REGION" \
		--io_size="$DIRTY" --direct=1 --ioengine=libaio --iodepth=16 --randrepeat=1 \
		--end_fsync=1 --output-format=terse >/tmp/fio.out 2>/tmp/fio.err ||
		{ cat /tmp/fio.err; wb_fail "fio failed ($run)"; }
	wb_report "$t.$batch.before" "$(wb_dm_status wb)"
	w0=$(backing_writes)
	t0=$(uptime_cs)
	$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed ($run)"
	t1=$(uptime_cs)
	w1=$(backing_writes)
	wb_report "$t.$batch.after" "$(wb_dm_status wb)"
	wb_report "$t.$batch.centiseconds" $((t1 - t0))
	set -- $w0 $w1
	wb_report "$t.$batch.requests" "$(($3 - $1)) $(($4 - $2))"
	$DMSETUP remove wb || wb_fail "remove failed ($run)"
done
GUEST
} >"$work/guest.sh"

vrc=0
# lib.sh sets VM_TIMEOUT (240 s) already: too short on a loaded machine.
VM_TIMEOUT=${WBKIT_BENCH_VM_TIMEOUT:-600} VM_DRIVE_OPTS_vda="throttling.iops-total=$iops" \
	vm_run "$work/guest.sh" "$work/backing.img" "$work/cache.img" || vrc=$?
echo "VM: ${VM_ELAPSED}s, log $VM_LOG; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$vrc" != 0 ]; then
	echo "the VM run failed (rc $vrc): $(vm_result fail)"
	exit 1
fi
[ -z "$(vm_result skip)" ] || { echo "skipped: $(vm_result skip)"; exit 0; }

echo "drop_caches of $dirty of random 4 KiB writes (in $region) onto a backing disk throttled to $iops IOPS:"
# Requests as the guest's block layer counted them on the backing device
# (one per segment batch is the flush); qemu's virtio-blk may merge
# adjacent ones further before its throttle counts them.
printf "%-9s %6s %9s %8s %15s %14s\n" target batch seconds blocks "write requests" "guest merges"
declare -A cs
for t in wbkit upstream; do
	case " $runs " in *" $t:1 "*) ;; *) continue ;; esac
	for batch in 1 32; do
		cs[$t.$batch]=$(vm_result "$t.$batch.centiseconds")
		read -r -a req <<<"$(vm_result "$t.$batch.requests")"
		read -r -a before <<<"$(vm_result "$t.$batch.before")"
		read -r -a after <<<"$(vm_result "$t.$batch.after")"
		# nr_dirty_cache_blocks (7th status field) must reach 0.
		[ "${after[6]}" = 0 ] || echo "warning: $t batch $batch left ${after[6]} dirty blocks"
		printf "%-9s %6s %9.2f %8s %15s %14s\n" "$t" "$batch" "$(awk -v c="${cs[$t.$batch]}" 'BEGIN { print c / 100 }')" \
			"${before[6]}" "${req[0]}" "${req[1]}"
	done
	echo "$t: speed-up of sorted batches of 32 over batches of 1: $(awk -v a="${cs[$t.1]}" -v b="${cs[$t.32]}" 'BEGIN { printf "%.2f", a / b }')x"
done
