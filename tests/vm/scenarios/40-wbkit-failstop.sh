#!/usr/bin/env bash
# shows: dm-flakey `error_writes` and `error` under the cache and the backing
#   device: dead with the right cause, fast failures, frozen devices, removable,
#   no hung task
#
# dm-wbkit fail-stop: I/O errors injected under the cache device (dm-flakey
# error_writes, then a dm "error" table) and under the backing device (the
# same two). Each time the target must go dead (for the whole backing device
# failing, at writeback: a read miss fails alone) with the right cause in
# status, fail further I/O fast, leave both devices untouched from then on,
# and still be removable; the kernel log must show no hung task.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420

make_devices backing 16M cache 8M

run_guest <<'GUEST'
wb_load_target wbkit
dev=/dev/mapper/wb

# A fresh target over linear mappings that can be swapped for failing ones.
setup() {
	wb_zero_cache /dev/vdb
	wb_swappable_disks
	wb_dm_create wb "0 $LB writeboost /dev/mapper/backd /dev/mapper/cached"
	$WBSTAMP write $dev --seed 41 --ops 300 --size 8M --flush-every 50 --final-flush >/dev/null 2>&1 ||
		wb_fail "$1: writes before the failure failed"
}
# The devices as their media hold them: direct reads, not the page cache
# (a second buffered read would return what the first one cached).
sums() {
	echo "$($DD if=/dev/vda bs=1M iflag=direct 2>/dev/null | $SHA256SUM | cut -c1-16)-$($DD if=/dev/vdb bs=1M iflag=direct 2>/dev/null | $SHA256SUM | cut -c1-16)"
}
# An empty REQ_PREFLUSH bio and nothing else: fsync of the device with no
# dirty page (a buffered write before it would fail first, as a write).
flush() { timeout 30 $DD if=/dev/null of=$dev bs=4k count=0 conv=fsync,notrunc 2>/dev/null; }
# check <case> <expected cause prefix>: dead, fast failure, frozen devices, removable.
check() {
	st=$(wb_dm_status wb)
	cause=$($DMSETUP message wb 0 dead_cause)
	wb_report "status_$1" "$st"
	wb_report "cause_$1" "$cause"
	case "$st/$cause" in
	*" dead 1 "*"/$2"*) wb_report "dead_$1" yes ;;
	*) wb_report "dead_$1" no ;;
	esac
	before=$(sums)
	t0=$(cut -d. -f1 /proc/uptime)
	timeout 30 $DD if=$dev of=/dev/null bs=4k count=1 skip=7 iflag=direct 2>/dev/null && wb_report "read_fails_$1" no
	timeout 30 $DD if=/dev/zero of=$dev bs=4k count=1 seek=9 oflag=direct 2>/dev/null && wb_report "write_fails_$1" no
	flush && wb_report "flush_fails_$1" no
	t1=$(cut -d. -f1 /proc/uptime)
	[ $((t1 - t0)) -le 20 ] && wb_report "fast_$1" yes || wb_report "fast_$1" "no:$((t1 - t0))s"
	$DMSETUP message wb 0 drop_caches 2>/dev/null && wb_report "drop_fails_$1" no
	[ "$(sums)" = "$before" ] && wb_report "frozen_$1" yes || wb_report "frozen_$1" no
	timeout 60 $DMSETUP remove wb && wb_report "removed_$1" yes || wb_report "removed_$1" no
	$DMSETUP remove backd cached || wb_fail "cannot remove the underlying mappings"
}

# 1. Cache writes fail: the next segment flush kills the target.
setup cache_flakey
wb_swap_table cached "0 $LC flakey /dev/vdb 0 0 60 1 error_writes"
$WBSTAMP write $dev --seed 41 --first 301 --ops 600 --size 8M --flush-every 50 >/dev/null 2>&1 &&
	wb_report "wbstamp_fails_cache_flakey" no
check cache_flakey "cache write "

# 2. The cache device fails everything: a flush request kills the target.
setup cache_error
$WBSTAMP write $dev --seed 41 --first 301 --ops 310 --size 8M --flush-every 0 >/dev/null 2>&1
wb_swap_table cached "0 $LC error"
sync
echo x | $DD of=$dev bs=512 count=1 seek=1 conv=fsync oflag=direct 2>/dev/null && wb_report "flush_fails_early_cache_error" no
check cache_error "cache "

# 3. Backing writes fail: writeback (drop_caches) kills the target.
setup backing_flakey
wb_swap_table backd "0 $LB flakey /dev/vda 0 0 60 1 error_writes"
$DMSETUP message wb 0 drop_caches 2>/dev/null && wb_report "drop_fails_early_backing_flakey" no
check backing_flakey "backing write "

# 4. The backing device fails everything: a read miss fails alone (it
#    touched nothing the cache holds: 92-fault-table.sh), writeback kills.
setup backing_error
wb_swap_table backd "0 $LB error"
$DD if=$dev of=/dev/null bs=4k count=1 skip=3000 iflag=direct 2>/dev/null && wb_report "miss_fails_backing_error" no
case "$(wb_dm_status wb)" in *" dead 0 "*) wb_report live_after_miss yes ;; *) wb_report live_after_miss no ;; esac
$DMSETUP message wb 0 drop_caches 2>/dev/null && wb_report "drop_fails_early_backing_error" no
check backing_error "backing write "
dmesg | grep -q "blocked for more than" && wb_report hung_task yes || wb_report hung_task no
GUEST
echo "fail-stop: ${VM_ELAPSED}s"
guest_passed
fail=0
for c in cache_flakey cache_error backing_flakey backing_error; do
	echo "$c: $(vm_result "status_$c"), cause $(vm_result "cause_$c")"
	expect_all yes "dead_$c" "fast_$c" "frozen_$c" "removed_$c"
	for k in read_fails write_fails flush_fails drop_fails wbstamp_fails flush_fails_early drop_fails_early miss_fails; do
		[ -z "$(vm_result "${k}_$c")" ] || { echo "$c: $k: the operation succeeded on a dead target"; fail=1; }
	done
done
wbkit_expect live_after_miss yes || fail=1
wbkit_expect hung_task no || fail=1
exit $fail
