#!/usr/bin/env bash
# shows: after a cache failure, `wbreplay` recovers the frozen images offline
#   (skips without the tool)
#
# After a fail-stop, the frozen images are recoverable offline: dm-wbkit dies
# when the cache device starts failing writes, and the host tool wbreplay
# then brings every write acknowledged before the last completed flush home
# to the backing image.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_need_tool wbreplay
wbkit_prepare
VM_TIMEOUT=420

make_devices backing 32M cache 12M

W="--seed 45 --ops 3000 --size 32M"
run_guest <<GUEST
wb_load_target wbkit
LC=\$(wb_sectors /dev/vdb)
wb_dm_create cached "0 \$LC linear /dev/vdb 0"
wb_dm_create wb "0 \$(wb_sectors /dev/vda) writeboost /dev/vda /dev/mapper/cached"
wb_stamp write write /dev/mapper/wb $W --ops 1500 --flush-every 30
wb_swap_table cached "0 \$LC flakey /dev/vdb 0 0 60 1 error_writes"
# The writes after the failure must fail on the dead target, and no other way:
# a write error (EIO) as wbstamp reports it, not a crash or a hang.
rc=0
\$WBSTAMP write /dev/mapper/wb $W --first 1501 --flush-every 30 >/tmp/after.out 2>&1 || rc=\$?
if [ \$rc = 0 ]; then
	wb_report write_after failed
elif grep -qi "input/output error" /tmp/after.out; then
	wb_report write_after ok
else
	wb_report write_after "exit_\$rc"
	tail -n 3 /tmp/after.out
fi
wb_report status_dead "\$(wb_dm_status wb)"
wb_report dead "\$(wb_dm_status wb | grep -q ' dead 1' && echo yes || echo no)"
\$DMSETUP remove wb && wb_report removed yes
GUEST
guest_passed
echo "dead: $(vm_result status_dead)"
require_all ok write write_after
require_all yes dead removed
"$wbreplay" --cache "$work/cache.img" --backing "$work/backing.img" -q || { echo "wbreplay failed"; exit 1; }
"$VM_WBSTAMP" verify "$work/backing.img" $W --flushed 1500 || { echo "recovered data fails verification"; exit 1; }
echo "recovered offline: every write before the last completed flush is on the backing image"
