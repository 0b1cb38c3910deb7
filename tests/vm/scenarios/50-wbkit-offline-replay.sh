#!/usr/bin/env bash
# shows: `wbreplay` and the target replay the same power-cut cache to
#   identical backing images (skips without the tool)
#
# Offline replay equals online replay: a dirty cache left by dm-wbkit (power
# cut with writes in flight) is replayed onto a copy of the backing image by
# the host tool wbreplay, and, from the same images, by the target in the VM
# (construct, drop_caches, remove). The two backing images must be identical
# byte for byte, and hold every write acknowledged before the last flush.
set -euo pipefail
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_need_tool wbreplay
wbkit_prepare
VM_TIMEOUT=420

work=$(mktemp -d "$VM_WORK/wbkit-offline.XXXXXX")
trap 'rm -rf "$work"' EXIT
vm_image "$work/backing.img" 32M
vm_image "$work/cache.img" 12M

W="--seed 51 --ops 1000000 --size 32M"
rc=0
vm_run - "$work/backing.img" "$work/cache.img" <<GUEST || rc=$?
. /lib/wbguest.sh
wb_load_target wbkit
wb_dm_create wb "0 \$(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
wb_stamp write write /dev/mapper/wb $W --ops 2000 --flush-every 25
# Every fsync that returns is on the console (acked_flush=N) before the next write.
\$WBSTAMP write /dev/mapper/wb $W --first 2001 --flush-every 10 --report-flushes 2>&1 &
sleep 3
wb_report status_cut "\$(wb_dm_status wb)"
GUEST
[ "$rc" = 0 ] || exit 1
wbkit_expect write ok || exit 1
# Writes in flight at the cut; the last fsync the background writer saw return.
acked=$(wbkit_acked_in_flight 2000 1000000) || exit 1
echo "acknowledged at the cut: writes 1..$acked"

cp "$work/backing.img" "$work/offline.img"
cp "$work/cache.img" "$work/cache-copy.img"
"$wbreplay" --cache "$work/cache-copy.img" --backing "$work/offline.img" -q || { echo "wbreplay failed"; exit 1; }

rc=0
vm_run - "$work/backing.img" "$work/cache.img" <<GUEST || rc=$?
. /lib/wbguest.sh
wb_load_target wbkit
wb_dm_create wb "0 \$(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
wb_report status_replayed "\$(wb_dm_status wb)"
\$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
\$DMSETUP remove wb || wb_fail "remove failed"
wb_report done yes
GUEST
[ "$rc" = 0 ] || exit 1
echo "online replay: $(vm_result status_replayed)"
if ! cmp -s "$work/backing.img" "$work/offline.img"; then
	echo "offline and online replay differ:"
	cmp -l "$work/backing.img" "$work/offline.img" | head -5
	exit 1
fi
"$VM_WBSTAMP" verify "$work/offline.img" $W --flushed "$acked" || { echo "replayed data fails verification"; exit 1; }
echo "offline replay == online replay"
