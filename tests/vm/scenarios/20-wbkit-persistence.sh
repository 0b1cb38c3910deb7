#!/usr/bin/env bash
# shows: suspend/resume, remove + re-create, power cut with writes in flight:
#   every write before the last completed flush is there
#
# dm-wbkit persistence: data written through the target reads back after
# suspend/resume, after remove + re-create (log replay), and after a power
# cut with the target active (the guest powers off with writes in flight):
# everything acknowledged before the last completed flush (the last fsync
# that returned, as the writer reported it) must be there, later writes may
# or may not. Then drop_caches: the backing device alone
# holds the same content.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420

make_devices backing 64M cache 16M

# Region A: 0..32M, seed 11, 2000 writes, no flush, then suspend/remove.
# Region B: 32M..48M, seed 12, writes 1..1500 flushed, then more in flight.
A="--seed 11 --ops 2000 --offset 0 --size 32M"
B="--seed 12 --ops 1000000 --offset 32M --size 16M"

run_guest <<GUEST
wb_load_target wbkit
wb_start
dev=/dev/mapper/wb
wb_stamp write_a write \$dev $A --flush-every 0
\$DMSETUP suspend wb || wb_fail "suspend failed"
\$DMSETUP resume wb || wb_fail "resume failed"
wb_stamp verify_a_resumed verify \$dev $A --flushed 2000
wb_recreate status_replayed
wb_stamp verify_a_replayed verify \$dev $A --flushed 2000
wb_stamp write_b write \$dev $B --ops 1500 --flush-every 16
# In flight at the power cut: flushes every 8 writes, never finishes. Every
# fsync that returns is on the console (acked_flush=N) before the next write.
\$WBSTAMP write \$dev $B --first 1501 --flush-every 8 --report-flushes 2>&1 &
sleep 4
wb_report status_cut "\$(wb_dm_status wb)"
# The script ends with the target active: /init powers off at once.
GUEST
guest_passed
echo "boot 1: ${VM_ELAPSED}s, status at the cut: $(vm_result status_cut)"
require_all ok write_a verify_a_resumed verify_a_replayed write_b
# The last fsync the background writer saw return: everything up to it must
# survive the cut.
acked=$(wbkit_acked_in_flight 1500 1000000) || exit 1
echo "acknowledged at the cut: writes 1..$acked (the writer was still writing)"

run_guest <<GUEST
wb_load_target wbkit
wb_start
dev=/dev/mapper/wb
wb_report status_after_cut "\$(wb_dm_status wb)"
wb_stamp verify_a_cut verify \$dev $A --flushed 2000
wb_stamp verify_b_cut verify \$dev $B --flushed $acked
wb_drop_caches_remove status_dropped
wb_stamp verify_a_backing verify /dev/vda $A --flushed 2000
wb_stamp verify_b_backing verify /dev/vda $B --flushed $acked
GUEST
echo "boot 2: ${VM_ELAPSED}s, status after the cut: $(vm_result status_after_cut)"
guest_passed
require_all ok verify_a_cut verify_b_cut verify_a_backing verify_b_backing
