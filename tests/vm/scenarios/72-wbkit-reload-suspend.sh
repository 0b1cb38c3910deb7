#!/usr/bin/env bash
# shows: a suspended device stays byte-identical for 10 s while writeback had
#   work, and resumes it; suspended, an explicit `drop_caches` writes back;
#   option swap by reload; reload + resume during a workload with flushes;
#   reload + clear writes nothing
#
# Suspend means quiet, and a reload is safe:
# 1. suspend while writeback has work (threshold set after the writes, one
#    segment per batch, a slow backing disk, superblock record every
#    second): digests of both devices taken 10 s apart are equal, and so is
#    last_writeback_id; after resume writeback continues; suspended again,
#    an explicit drop_caches writes everything back;
# 2. a table swap of options (dmsetup reload + resume) takes effect;
# 3. reload + resume twice while a workload with flushes runs: every
#    flushed write is there, live and after remove + re-create;
# 4. reload + clear on a live device with partial blocks over older dirty
#    ones in the log: neither device changes.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=720

make_devices backing 64M cache 16M

# Backing writes at ~100 IOPS: a segment's writeback takes over a second.
VM_DRIVE_OPTS_vda=throttling.iops-write=100 \
run_guest <<'GUEST'
wb_load_target wbkit
T=$(wb_table)
W1="--seed 91 --size 8M --ops 2500 --flush-every 100"
W2="--seed 92 --offset 16M --size 8M --ops 3000 --flush-every 10"
W3="--seed 93 --offset 32M --size 1M --ops 400 --partial-pct 60 --flush-every 7"
digest() { echo "$($DD if=/dev/vda bs=1M iflag=direct 2>/dev/null | $SHA256SUM | cut -c1-12)-$($DD if=/dev/vdb bs=1M iflag=direct 2>/dev/null | $SHA256SUM | cut -c1-12)"; }
lw() { wb_dm_status wb | cut -d' ' -f6; }
# Waits until the status and both disks' I/O counters stop changing
# (writeback has nothing to do, and no write of the target's own is in
# flight: a move forward's append changes the status only once its writes
# complete, which on a loaded host can take seconds).
quiet_state() { echo "$(wb_dm_status wb) $(cat /sys/block/vda/stat /sys/block/vdb/stat)"; }
settle() {
	a=$(quiet_state)
	for i in $(seq 60); do
		sleep 2
		b=$(quiet_state)
		[ "$a" = "$b" ] && return 0
		a=$b
	done
	wb_fail "the device never settled"
}

# 1. Suspend is quiet.
wb_dm_create wb "$T 4 nr_max_batched_writeback 1 update_sb_record_interval 1"
$WBSTAMP write /dev/mapper/wb $W1 --final-flush >/dev/null || wb_fail "workload 1 failed"
# 25 dirty segments in a 30-slot ring: writeback starts only now.
$DMSETUP message wb 0 writeback_threshold 1 || wb_fail "message failed"
sleep 3
$DMSETUP suspend wb || wb_fail "suspend failed"
lw1=$(lw)
d1=$(digest)
sleep 10
d2=$(digest)
lw2=$(lw)
wb_report suspended_digests "$d1 $d2"
wb_report suspended_lw "$lw1 $lw2"
[ "$d1" = "$d2" ] && [ "$lw1" = "$lw2" ] && wb_report suspend_quiet yes || wb_report suspend_quiet no
[ "$lw1" -lt 25 ] && wb_report work_left_at_suspend yes || wb_report work_left_at_suspend no
$DMSETUP resume wb || wb_fail "resume failed"
sleep 4
lw3=$(lw)
wb_report resumed_lw "$lw3"
[ "$lw3" -gt "$lw2" ] && wb_report writeback_resumed yes || wb_report writeback_resumed no
# Asked explicitly, a suspended device writes back (Debian's writeboost
# script stops a cache with suspend, drop_caches, remove).
$DMSETUP suspend wb || wb_fail "suspend failed"
$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches on the suspended device failed"
set -- $(wb_dm_status wb)
[ "$6" = "$5" ] && [ "$7" = 0 ] && wb_report suspended_drop yes || wb_report suspended_drop "no: $*"
$DMSETUP resume wb || wb_fail "resume failed"

# 2. Table swap of options.
$DMSETUP reload wb --table "$T 2 writeback_threshold 0" || wb_fail "reload failed"
$DMSETUP resume wb || wb_fail "resume after reload failed"
wb_report swapped_table "$($DMSETUP table wb | cut -d' ' -f4-)"
$WBSTAMP verify /dev/mapper/wb $W1 --flushed 2500 >/dev/null 2>&1 && wb_report verify_swap ok || wb_report verify_swap failed

# 3. Reload + resume while a workload with flushes runs.
$WBSTAMP write /dev/mapper/wb $W2 --final-flush >/tmp/w2.out 2>&1 &
pid=$!
sleep 3
$DMSETUP reload wb --table "$T 2 writeback_threshold 30" && $DMSETUP resume wb || wb_fail "reload 1 failed"
sleep 2
$DMSETUP reload wb --table "$T 2 writeback_threshold 0" && $DMSETUP resume wb || wb_fail "reload 2 failed"
wait $pid && wb_report workload2 ok || wb_report workload2 failed
sed 's/^/WB: w2_/' /tmp/w2.out
$WBSTAMP verify /dev/mapper/wb $W2 --flushed 3000 >/tmp/v2.out 2>&1 && wb_report verify_reload_live ok || wb_report verify_reload_live failed
head -5 /tmp/v2.out | sed 's/^/WB: v2_/'

# 4. Reload + clear writes nothing.
$WBSTAMP write /dev/mapper/wb $W3 --final-flush >/dev/null || wb_fail "workload 3 failed"
settle
d1=$(digest)
$DMSETUP reload wb --table "$T 2 writeback_threshold 50" || wb_fail "reload failed"
$DMSETUP clear wb || wb_fail "clear failed"
sleep 2
d2=$(digest)
wb_report clear_digests "$d1 $d2"
[ "$d1" = "$d2" ] && wb_report clear_quiet yes || wb_report clear_quiet no

# Everything flushed survives remove + re-create (replay).
$DMSETUP remove wb || wb_fail "remove failed"
wb_dm_create wb "$T"
for w in 1 2 3; do
	case $w in 1) o="$W1 --flushed 2500" ;; 2) o="$W2 --flushed 3000" ;; 3) o="$W3 --flushed 400" ;; esac
	$WBSTAMP verify /dev/mapper/wb $o >/tmp/v.out 2>&1 && wb_report "verify_replayed_$w" ok || {
		wb_report "verify_replayed_$w" failed
		head -5 /tmp/v.out | sed "s/^/WB: v${w}_/"
	}
done
$DMSETUP remove wb || wb_fail "final remove failed"
GUEST
echo "reload/suspend: ${VM_ELAPSED}s"
guest_passed
echo "suspended: last_writeback_id $(vm_result suspended_lw), digests $(vm_result suspended_digests); after resume $(vm_result resumed_lw)"
echo "swapped table: $(vm_result swapped_table)"
echo "reload+clear digests: $(vm_result clear_digests)"
fail=0
expect_all yes work_left_at_suspend suspend_quiet writeback_resumed suspended_drop
case "$(vm_result swapped_table)" in
*"2 writeback_threshold 0"*) ;;
*) echo "the swapped table is not in effect"; fail=1 ;;
esac
case "$(vm_result swapped_table)" in *update_sb_record_interval*) echo "the old options survived the swap"; fail=1 ;; esac
expect_all ok verify_swap workload2 verify_reload_live
wbkit_expect clear_quiet yes || fail=1
expect_all ok verify_replayed_1 verify_replayed_2 verify_replayed_3
[ "$fail" = 0 ] || vm_results | grep -E "^v[0-9]_|^w2_" | head -20
exit $fail
