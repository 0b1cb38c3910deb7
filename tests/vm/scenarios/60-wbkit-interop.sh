#!/usr/bin/env bash
# shows: dm-wbkit's dirty cache replayed by dm-writeboost and the reverse,
#   identical content; then both modules loaded at once (dm-wbkit as `wbkit`)
#
# dm-wbkit / dm-writeboost interoperability: a cache written by dm-wbkit and
# left dirty is replayed by the upstream target, which must present identical
# content; then the reverse, a dirty cache written by upstream (partial
# writes included) replayed by dm-wbkit. The two modules register the same
# target name, so the guest swaps them with rmmod/insmod. Last, dm-wbkit
# loaded as target "wbkit" next to upstream reads both workloads back.
set -euo pipefail
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420
vm_has_upstream || { echo "skip: $(vm_upstream_why)"; exit 77; }

work=$(mktemp -d "$VM_WORK/wbkit-interop.XXXXXX")
trap 'rm -rf "$work"' EXIT
vm_image "$work/backing.img" 24M
vm_image "$work/cache.img" 16M

A="--seed 61 --ops 1500 --offset 0 --size 12M"
B="--seed 62 --ops 1500 --offset 12M --size 12M"
rc=0
vm_run - "$work/backing.img" "$work/cache.img" <<GUEST || rc=$?
. /lib/wbguest.sh
table="0 \$(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
dev=/dev/mapper/wb
sum() { \$SHA256SUM <\$dev | cut -d' ' -f1; }

# dm-wbkit writes, upstream replays.
wb_load_target wbkit
wb_dm_create wb "\$table"
wb_stamp write_a write \$dev $A --flush-every 100
s1=\$(sum)
wb_report status_wbkit "\$(wb_dm_status wb)"
\$DMSETUP remove wb || wb_fail "remove failed"
rmmod dm_wbkit || wb_fail "rmmod dm_wbkit failed"
wb_load_target upstream
wb_dm_create wb "\$table"
wb_report status_upstream_replayed "\$(wb_dm_status wb)"
[ "\$(sum)" = "\$s1" ] && wb_report same_a yes || wb_report same_a no
wb_stamp verify_a_upstream verify \$dev $A --flushed 1500

# upstream writes (on top), dm-wbkit replays.
wb_stamp write_b write \$dev $B --flush-every 100
s2=\$(sum)
wb_report status_upstream "\$(wb_dm_status wb)"
\$DMSETUP remove wb || wb_fail "remove failed"
rmmod dm_writeboost || wb_fail "rmmod dm_writeboost failed"
wb_load_target wbkit
wb_dm_create wb "\$table"
wb_report status_wbkit_replayed "\$(wb_dm_status wb)"
[ "\$(sum)" = "\$s2" ] && wb_report same_b yes || wb_report same_b no
wb_stamp verify_a_wbkit verify \$dev $A --flushed 1500
wb_stamp verify_b_wbkit verify \$dev $B --flushed 1500
\$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
\$DMSETUP remove wb || wb_fail "remove failed"
wb_stamp verify_a_backing verify /dev/vda $A --flushed 1500
wb_stamp verify_b_backing verify /dev/vda $B --flushed 1500

# Side by side: upstream as "writeboost", dm-wbkit as "wbkit"; without the
# other name dm-wbkit refuses to load next to upstream.
rmmod dm_wbkit || wb_fail "rmmod dm_wbkit failed"
wb_load_target upstream
insmod /lib/modules-extra/wbkit/dm-wbkit.ko 2>/dev/null && wb_report clash_refused no || wb_report clash_refused yes
wb_load_target wbkit target_name=wbkit
wb_report targets "\$(\$DMSETUP targets | awk '{ print \$1 }' | sort | tr '\n' ,)"
wb_dm_create wb "0 \$(wb_sectors /dev/vda) wbkit /dev/vda /dev/vdb"
wb_stamp verify_a_renamed verify \$dev $A --flushed 1500
wb_stamp verify_b_renamed verify \$dev $B --flushed 1500
\$DMSETUP remove wb || wb_fail "remove failed"
GUEST
echo "interop: ${VM_ELAPSED}s"
echo "upstream after replaying dm-wbkit's cache: $(vm_result status_upstream_replayed)"
echo "dm-wbkit after replaying upstream's cache: $(vm_result status_wbkit_replayed)"
[ "$rc" = 0 ] || exit 1
for k in write_a verify_a_upstream write_b verify_a_wbkit verify_b_wbkit verify_a_backing verify_b_backing \
	verify_a_renamed verify_b_renamed; do
	wbkit_expect "$k" ok || exit 1
done
echo "target types with both modules loaded: $(vm_result targets)"
case ",$(vm_result targets)" in
*,wbkit,*writeboost,*) ;;
*) echo "FAIL: dmsetup targets does not list both wbkit and writeboost"; exit 1 ;;
esac
wbkit_expect clash_refused yes && wbkit_expect same_a yes && wbkit_expect same_b yes
