#!/usr/bin/env bash
# shows: a clean copy the cache device cannot read (8 s late, then dm-error)
#   pins the slot the next segment reuses; 8 segments wait behind it and a
#   read-cache injection waits on the bio worker: the fallback read runs on its
#   own queue, so the cycle (worker waits for flusher, flusher for the pin, pin
#   for the worker) cannot form; the read returns the backing device's data and
#   the writes finish; both sliced waits report themselves (`slow_wait_secs=4`).
#   The module before this change stopped the device with no hung-task report
#
# Issue 57, item 1: a cycle of sliced waits that the hung-task detector
# cannot see, forced, and every such wait reporting itself.
#
# A clean copy that the cache device cannot read is served again from the
# backing device (wb_fallback), and its bio keeps its slot pinned until
# then. The module before this change queued that fallback on the ordered
# bio worker (io_wq). Here:
#   1. the ring is written once and written back: every slot holds clean
#      copies, the next segment reuses slot 0;
#   2. R reads block 0, a clean copy in slot 0: remapped to the cache
#      device, slot 0 pinned; the cache device's reads are slowed to 8 s
#      (dm-delay) and block 0's read fails (dm-error), so R comes back
#      through the fallback;
#   3. meanwhile W writes 9 segments: segment 63 reuses slot 0, and the
#      flusher, which writes it there, waits for R's pin; 8 segments wait
#      to be written, and W waits for a RAM buffer;
#   4. M, a read miss with read caching on (one cell per generation), has
#      the bio worker inject it: the injection waits for a RAM buffer too.
# When R's read fails, its fallback must run. On io_wq, behind M's
# injection, it never did: the worker waits for the flusher, the flusher for
# the pin, the pin for the worker, and every one of those waits wakes each
# second, so the device stopped without a blocked-task report. Now the
# fallback has its own queue: R returns block 0's data from the backing
# device, and W and M finish.
#
# With slow_wait_secs=4 (module parameter) the waits of this cycle that
# last longer than 4 s report themselves with their stacks: the flusher's
# wait for the pin (wb_write_segment) and W's wait for a buffer
# (__wb_get_cur). The guest requires both reports.
#
# dm-wbkit only: upstream's dm-writeboost has no fallback (a clean copy
# the cache cannot read kills it, scenario 92).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420
# dump_stack() of the slow-wait reports prints "Call Trace:": expected here.
VM_FAIL_PATTERNS='Kernel panic|BUG: |Oops: |general protection fault|WARNING: CPU: |\] WARNING: |UBSAN:|KASAN:|blocked for more than|ODEBUG: '

make_devices backing 64M cache 32M

run_guest <<'GUEST'
wb_load_target wbkit
wb_swappable_disks
dev=/dev/mapper/wb
# 62 slots of 1024 sectors from sector 2048; block 0 of slot 0 at 2056.
SLOTS=$(((LC - 2048) / 1024))
[ "$SLOTS" = 62 ] || wb_fail "expected 62 slots, got $SLOTS"
wb_dm_create cacherd "0 2056 linear /dev/vdb 0
2056 8 error
2064 $((LC - 2064)) linear /dev/vdb 2064"
wb_dm_create wb "0 $LB writeboost /dev/mapper/backd /dev/mapper/cached 4 read_cache_threshold 1 nr_read_cache_cells 1"

# 1. The whole ring, then written back: 62 segments of 127 blocks.
$DD if=/dev/urandom of=/tmp/ring bs=508k count=$SLOTS 2>/dev/null
$DD if=/tmp/ring of=$dev bs=508k oflag=direct 2>/dev/null || wb_fail "ring write"
$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches"
wb_report dirty_after_drop "$(wb_status_field 7)"
$DD if=/tmp/ring bs=4k count=1 2>/dev/null | wb_digest >/tmp/want0

# 2. Reads of the cache device: 8 s late, block 0 of slot 0 failing.
$DMSETUP suspend cached && $DMSETUP load cached --table "0 $LC delay /dev/mapper/cacherd 0 8000 /dev/vdb 0 0" &&
	$DMSETUP resume cached || wb_fail "cannot slow the cache device's reads"
echo 4 2>/dev/null >/sys/module/dm_wbkit/parameters/slow_wait_secs || wb_report slow_wait_secs absent
wb_log_mark "cycle begins"
start=$(date +%s)
$DD if=$dev of=/tmp/r0 bs=4k count=1 iflag=direct 2>/tmp/r0.err &
R=$!
sleep 1
# 3. W: 9 segments of new blocks (8000 on), 8 of them waiting to be written.
$DD if=/dev/urandom of=/tmp/w bs=508k count=9 2>/dev/null
$DD if=/tmp/w of=$dev bs=508k seek=$((8000 / 127 + 1)) oflag=direct 2>/tmp/w.err &
W=$!
sleep 3
kill -0 $W 2>/dev/null && wb_report w_waiting_at_4s yes || wb_report w_waiting_at_4s no
# 4. M: a read miss, injected by the bio worker.
$DD if=$dev of=/dev/null bs=4k count=1 skip=15000 iflag=direct 2>/dev/null || wb_report m_read failed

waited=0
while kill -0 $R 2>/dev/null || kill -0 $W 2>/dev/null; do
	if [ $waited -ge 60 ]; then
		wb_report cycle "hang: R or W not done after 60 s"
		echo w >/proc/sysrq-trigger
		sleep 2
		dmesg | grep -A 12 'blocked state' | sed 's/^/dmesg: /' | head -n 80
		exit 0
	fi
	sleep 1
	waited=$((waited + 1))
done
wb_report cycle "done"
wb_report cycle_seconds $(($(date +%s) - start))
wait $R && wb_report r_read ok || { wb_report r_read failed; cat /tmp/r0.err; }
wait $W && wb_report w_write ok || { wb_report w_write failed; cat /tmp/w.err; }
[ "$(wb_digest </tmp/r0)" = "$(cat /tmp/want0)" ] && wb_report r_data ok || wb_report r_data wrong
wb_report counts "$($DMSETUP message wb 0 error_counts | tr ' ' ,)"
log=$(wb_log_since "cycle begins")
wb_report slow_flusher "$(echo "$log" | grep -c 'has waited more than 4 s in wb_write_segment')"
wb_report slow_writer "$(echo "$log" | grep -c 'has waited more than 4 s in __wb_get_cur')"
echo "$log" | grep 'has waited more than' | sed 's/^/dmesg: /'
echo 120 2>/dev/null >/sys/module/dm_wbkit/parameters/slow_wait_secs

# Everything reads back: the cache device's reads at full speed again.
$DMSETUP suspend cached && $DMSETUP load cached --table "0 $LC linear /dev/vdb 0" &&
	$DMSETUP resume cached || wb_fail "cannot restore the cache device"
$DD if=$dev of=/tmp/wback bs=508k count=9 skip=$((8000 / 127 + 1)) iflag=direct 2>/dev/null
$CMP -s /tmp/w /tmp/wback && wb_report w_data ok || wb_report w_data wrong
$DD if=$dev of=/tmp/ringback bs=508k count=$SLOTS iflag=direct 2>/dev/null
$CMP -s /tmp/ring /tmp/ringback && wb_report ring_data ok || wb_report ring_data wrong
$DMSETUP remove wb || wb_fail "remove"
wb_report dead_end "no"
GUEST
guest_passed
echo "cycle: $(vm_result cycle) (${VM_ELAPSED:-?} s boot); R+W done in $(vm_result cycle_seconds) s; W waiting at 4 s: $(vm_result w_waiting_at_4s)"
echo "error counts: $(vm_result counts)"
echo "slow-wait reports: flusher $(vm_result slow_flusher), writer $(vm_result slow_writer)"
fail=0
expect_all yes w_waiting_at_4s
expect_all done cycle
expect_all ok r_read r_data w_write w_data ring_data
expect_all no dead_end
fallbacks=$(vm_result counts | tr , '\n' | sed -n '/^cache_read_fallback$/{n;p}')
[ "$fallbacks" = 1 ] || { echo "expected one cache_read_fallback, got '$fallbacks'"; fail=1; }
[ "$(vm_result slow_flusher)" -ge 1 ] 2>/dev/null || { echo "the flusher's wait for the pin did not report itself"; fail=1; }
[ "$(vm_result slow_writer)" -ge 1 ] 2>/dev/null || { echo "the writer's wait for a buffer did not report itself"; fail=1; }
exit $fail
