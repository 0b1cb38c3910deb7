#!/usr/bin/env bash
# shows: `wbreplay` and the target replay the same power-cut cache to
#   identical backing images (skips without the tool)
#
# Offline replay equals online replay: a dirty cache left by dm-wbkit (power
# cut with writes in flight) is replayed onto a copy of the backing image by
# the host tool wbreplay, and, from the same images, by the target in the VM
# (construct, drop_caches, remove). The two backing images must be identical
# byte for byte, and hold every write acknowledged before the last flush.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_need_tool wbreplay
wbkit_prepare
VM_TIMEOUT=420

make_devices backing 32M cache 12M

W="--seed 51 --ops 1000000 --size 32M"
run_guest <<GUEST
wb_load_target wbkit
wb_start
wb_stamp write write /dev/mapper/wb $W --ops 2000 --flush-every 25
# Every fsync that returns is on the console (acked_flush=N) before the next write.
\$WBSTAMP write /dev/mapper/wb $W --first 2001 --flush-every 10 --report-flushes 2>&1 &
sleep 3
wb_report status_cut "\$(wb_dm_status wb)"
GUEST
guest_passed
wbkit_expect write ok || exit 1
# Writes in flight at the cut; the last fsync the background writer saw return.
acked=$(wbkit_acked_in_flight 2000 1000000) || exit 1
echo "acknowledged at the cut: writes 1..$acked"

replay_offline || exit 1

run_guest <<GUEST
wb_load_target wbkit
wb_start
wb_report status_replayed "\$(wb_dm_status wb)"
wb_drop_caches_remove
wb_report done yes
GUEST
guest_passed
echo "online replay: $(vm_result status_replayed)"
images_equal "$work/backing.img" "$work/offline.img" "offline and online replay differ" || exit 1
"$VM_WBSTAMP" verify "$work/offline.img" $W --flushed "$acked" || { echo "replayed data fails verification"; exit 1; }
echo "offline replay == online replay"
