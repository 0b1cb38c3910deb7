#!/usr/bin/env bash
# shows: a suspend while the periodic thread writes the superblock record to
#   an 8 s cache device: its wait reports itself, no blocked-task report at a 2
#   s hung-task timeout (the module before: three); a remove of a suspended
#   device during `drop_caches` (24 batches at 1 s per backing write) returns at
#   once, the message fails with `-ENODEV`, the next table replays every block
#   (the module before: 45 s)
#
# Issue 57, item 6: the waits of suspend and remove.
#
# 1. postsuspend stops the periodic thread while it writes the superblock
#    record to a cache device that takes 8 s per write (dm-delay). The
#    module before this change waited in kthread_stop, one sleep of up to
#    8 s: with the hung-task timeout at 2 s, `dmsetup suspend` was reported
#    blocked. Now the round in progress ends in a slice-woken wait that
#    reports itself (slow_wait_secs=3) and the hung-task detector reports
#    nothing. The writes dm-delay holds are watched, so that the suspend
#    comes just after a record write starts.
# 2. `dmsetup remove` of a suspended device while drop_caches writes back,
#    one segment per batch, to a backing device that takes 1 s per write:
#    dm waits for the message's hold on the device before it calls the
#    target (__dm_destroy), so the module before this change made remove
#    wait for the whole drop_caches (24 batches). Now drop_caches sees the
#    remove between two batches and stops; remove returns within seconds,
#    the message fails, and a new table over the same devices replays the
#    log: every block reads back.
#
# dm-wbkit only: the waits are its own (upstream's suspend stops no thread).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420
# dump_stack() of the slow-wait report prints "Call Trace:", and part 1
# counts the hung-task reports itself (the module before this change had
# one): neither ends the run.
VM_FAIL_PATTERNS='Kernel panic|BUG: |Oops: |general protection fault|WARNING: CPU: |\] WARNING: |UBSAN:|KASAN:|ODEBUG: '

make_devices backing 64M cache 32M

run_guest <<'GUEST'
wb_load_target wbkit
wb_swappable_disks
dev=/dev/mapper/wb
# swap <name> <table>: a new table for a device, live.
swap() {
	$DMSETUP suspend "$1" && $DMSETUP load "$1" --table "$2" && $DMSETUP resume "$1" ||
		wb_fail "cannot load $1: $2"
}
# The writes dm-delay holds (its status: reads, writes, flushes held).
cache_inflight_writes() {
	$DMSETUP status cached | cut -d' ' -f5
}

# 1. Suspend while the periodic thread writes the record, slowly.
wb_dm_create wb "0 $LB writeboost /dev/mapper/backd /dev/mapper/cached 2 update_sb_record_interval 1"
swap cached "0 $LC delay /dev/vdb 0 0 /dev/vdb 0 8000"
echo 3 2>/dev/null >/sys/module/dm_wbkit/parameters/slow_wait_secs || wb_report slow_wait_secs absent
echo 2 >/proc/sys/kernel/hung_task_timeout_secs || wb_fail "no hung-task detector"
wb_log_mark "suspend begins"
# A record write starts: 0 writes in flight, then 1.
seen_idle=0
for i in $(seq 200); do
	n=$(cache_inflight_writes)
	[ "$n" = 0 ] && seen_idle=1
	[ "$seen_idle" = 1 ] && [ "$n" != 0 ] && break
	sleep 0.1
done
[ "$seen_idle" = 1 ] && [ "$n" != 0 ] || wb_fail "no record write seen starting on the cache device (writes in flight: '$n')"
start=$(date +%s)
$DMSETUP suspend wb || wb_fail "suspend"
wb_report suspend_seconds $(($(date +%s) - start))
sleep 3	# one more check of the hung-task detector
echo 120 >/proc/sys/kernel/hung_task_timeout_secs
echo 120 2>/dev/null >/sys/module/dm_wbkit/parameters/slow_wait_secs
log=$(wb_log_since "suspend begins")
wb_report hung_reports "$(echo "$log" | grep -c 'blocked for more than')"
wb_report hung_dmsetup "$(echo "$log" | grep -c 'task dmsetup:[0-9]* blocked for more than')"
wb_report slow_stop "$(echo "$log" | grep -c 'has waited more than 3 s in wb_stop_periodic_daemon')"
echo "$log" | grep -E 'blocked for more than|has waited more than' | sed 's/^/dmesg: /'
swap cached "0 $LC linear /dev/vdb 0"
$DMSETUP resume wb || wb_fail "resume"
$DMSETUP remove wb || wb_fail "remove after part 1"

# 2. Remove during drop_caches on a suspended device.
wb_dm_create wb "0 $LB writeboost /dev/mapper/backd /dev/mapper/cached 4 writeback_threshold 0 nr_max_batched_writeback 1"
$DD if=/dev/urandom of=/tmp/data bs=508k count=24 2>/dev/null
$DD if=/tmp/data of=$dev bs=508k oflag=direct conv=fsync 2>/dev/null || wb_fail "write"
wb_report dirty_before "$(wb_status_field 7)"
swap backd "0 $LB delay /dev/vda 0 0 /dev/vda 0 1000"
$DMSETUP suspend wb || wb_fail "suspend before drop_caches"
$DMSETUP message wb 0 drop_caches 2>/tmp/drop.err &
D=$!
sleep 4
kill -0 $D 2>/dev/null && wb_report drop_running_at_4s yes || wb_report drop_running_at_4s no
start=$(date +%s)
$DMSETUP remove wb && wb_report removed yes || wb_report removed no
wb_report remove_seconds $(($(date +%s) - start))
wait $D && wb_report drop_rc 0 || wb_report drop_rc failed
dmesg | grep 'drop_caches stopped' | tail -n 1 | sed 's/^/dmesg: /'
wb_report drop_stopped_by_remove "$(dmesg | grep -c 'drop_caches stopped (the device is being removed)')"
swap backd "0 $LB linear /dev/vda 0"
$DMSETUP info wb >/dev/null 2>&1 && $DMSETUP remove wb
wb_dm_create wb "0 $LB writeboost /dev/mapper/backd /dev/mapper/cached"
$DD if=$dev of=/tmp/back bs=508k count=24 iflag=direct 2>/dev/null
$CMP -s /tmp/data /tmp/back && wb_report data ok || wb_report data wrong
$DMSETUP remove wb || wb_fail "final remove"
wb_report end yes
GUEST
guest_passed
echo "1. suspend took $(vm_result suspend_seconds) s; hung-task reports $(vm_result hung_reports) (dmsetup $(vm_result hung_dmsetup)); slow-wait reports in wb_stop_periodic_daemon $(vm_result slow_stop)"
echo "2. remove during drop_caches took $(vm_result remove_seconds) s (drop_caches running at 4 s: $(vm_result drop_running_at_4s), its exit: $(vm_result drop_rc)); data $(vm_result data)"
fail=0
wbkit_expect hung_reports 0 || fail=1
[ "$(vm_result slow_stop)" -ge 1 ] 2>/dev/null || { echo "the wait for the periodic thread did not report itself"; fail=1; }
[ "$(vm_result suspend_seconds)" -ge 3 ] 2>/dev/null || { echo "the suspend did not wait for a record write"; fail=1; }
expect_all yes drop_running_at_4s removed
[ "$(vm_result remove_seconds)" -le 10 ] 2>/dev/null || { echo "remove waited for drop_caches"; fail=1; }
wbkit_expect drop_rc failed || fail=1
wbkit_expect drop_stopped_by_remove 1 || fail=1
wbkit_expect data ok || fail=1
wbkit_expect end yes || fail=1
exit $fail
