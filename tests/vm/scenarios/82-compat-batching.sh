#!/usr/bin/env bash
# Adaptive writeback batching, shown in nr_cur_batched_writeback. Run on the
# upstream module first (the reference), then on dm-wbkit, in one boot,
# each on a 66-segment cache with writeback_threshold 0 and
# nr_max_batched_writeback 4:
# - fresh: 0 (no batch yet);
# - foreground writes of three times the cache: the ring is full and every
#   writer waits for one slot, so batches shrink to 1;
# - idle, drop_caches: as slots come free the batch grows back to 4 (the
#   status is polled while drop_caches runs; the largest value seen is 4).
#   Upstream recounts its free slots once a second (its modulator thread):
#   until then its batches stay at 1, and a fast backing disk can take the
#   whole cache back in that second. The backing device is a dm-delay
#   device: writes are held 200 ms while drop_caches runs, so the
#   writeback lasts seconds on both modules;
# - foreground writes again: back to 1.
set -euo pipefail
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=900

work=$(mktemp -d "$VM_WORK/batching.XXXXXX")
trap 'rm -rf "$work"' EXIT
vm_image "$work/backing.img" 112M
# 1 MiB superblock region + 66 segments of 512 KiB
vm_image "$work/cache-up.img" 34M
vm_image "$work/cache-wb.img" 34M

rc=0
vm_run - "$work/backing.img" "$work/cache-up.img" "$work/cache-wb.img" <<'GUEST' || rc=$?
. /lib/wbguest.sh
batch() { wb_status_field 29; }
backing_sectors=$(wb_sectors /dev/vda)
wb_dm_create slow "0 $backing_sectors delay /dev/vda 0 0"
write_delay() { # <ms>: holds each write to the backing disk that long
	$DMSETUP suspend slow &&
		$DMSETUP load slow --table "0 $backing_sectors delay /dev/vda 0 0 /dev/vda 0 $1" &&
		$DMSETUP resume slow || wb_fail "setting the backing disk's write delay to $1 ms failed"
}
pressure() { # <tag> <seek in MiB>: 100 MiB of writes, no flush
	$DD if=/dev/urandom of=/dev/mapper/wb bs=1M count=100 seek="$2" oflag=direct 2>/dev/null ||
		wb_fail "$1: writes failed"
}
run() { # <cache> <tag>
	wb_dm_create wb "0 $backing_sectors writeboost /dev/mapper/slow $1 4 writeback_threshold 0 nr_max_batched_writeback 4"
	wb_report "fresh_$2" "$(batch)"
	pressure "$2" 0
	wb_report "pressure_$2" "$(batch)"
	wb_report "segments_$2" "$(wb_dm_status wb | cut -d' ' -f3)"
	# Upstream's drop_caches waits for the RAM buffer too: flush it first.
	$DD if=/dev/null of=/dev/mapper/wb bs=4k count=0 conv=fsync,notrunc 2>/dev/null || wb_fail "$2: flush failed"
	write_delay 200
	$DMSETUP message wb 0 drop_caches &
	pid=$!
	seen=""
	max=0
	while kill -0 $pid 2>/dev/null; do
		b=$(batch)
		case " $seen " in *" $b "*) ;; *) seen="$seen $b" ;; esac
		[ "$b" -gt "$max" ] && max=$b
		sleep 0.05
	done
	wait $pid || wb_fail "$2: drop_caches failed"
	write_delay 0
	wb_report "idle_seen_$2" "$(echo $seen | tr ' ' ,)"
	wb_report "idle_max_$2" "$max"
	wb_report "idle_dirty_$2" "$(wb_dm_status wb | cut -d' ' -f7)"
	pressure "$2" 4
	wb_report "again_$2" "$(batch)"
	$DMSETUP remove wb || wb_fail "$2: remove failed"
}
if wb_has_upstream; then
	wb_load_target upstream
	run /dev/vdb upstream
	rmmod dm_writeboost || wb_fail "rmmod dm_writeboost failed"
fi
wb_load_target wbkit
run /dev/vdc wbkit
GUEST
echo "batching: ${VM_ELAPSED}s"
[ "$rc" = 0 ] || { echo "guest failed: $(vm_result fail) (log: $VM_LOG)"; exit 1; }
[ -z "$(vm_result skip)" ] || { echo "skip: $(vm_result skip)"; exit 77; }
fail=0
for m in $([ "$with_upstream" = 1 ] && echo upstream) wbkit; do
	echo "$m: fresh $(vm_result "fresh_$m"), under writes $(vm_result "pressure_$m"), idle drop_caches saw $(vm_result "idle_seen_$m") (max $(vm_result "idle_max_$m")), writes again $(vm_result "again_$m")"
	wbkit_expect "segments_$m" 66 || fail=1
	wbkit_expect "fresh_$m" 0 || fail=1
	wbkit_expect "pressure_$m" 1 || fail=1
	wbkit_expect "idle_max_$m" 4 || fail=1
	wbkit_expect "idle_dirty_$m" 0 || fail=1
	wbkit_expect "again_$m" 1 || fail=1
done
exit $fail
