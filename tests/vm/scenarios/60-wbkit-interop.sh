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
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420
vm_has_upstream || { echo "skip: $(vm_upstream_why)"; exit 77; }

make_devices backing 24M cache 16M

A="--seed 61 --ops 1500 --offset 0 --size 12M"
B="--seed 62 --ops 1500 --offset 12M --size 12M"
run_guest <<GUEST
dev=/dev/mapper/wb
sum() { \$SHA256SUM <\$dev | cut -d' ' -f1; }
# handover <region> <wbstamp args> <from> <to>: the target on module <from>
# writes the region (on top of what the cache holds) and is removed with
# the cache dirty; module <to> replays that cache and must present the same
# content.
handover() {
	wb_stamp "write_\$1" write \$dev \$2 --flush-every 100
	before=\$(sum)
	wb_report "status_\$3" "\$(wb_dm_status wb)"
	\$DMSETUP remove wb || wb_fail "remove failed"
	wb_unload_target \$3
	wb_load_target \$4
	wb_dm_create wb "\$WB_TABLE"
	wb_report "status_\$4_replayed" "\$(wb_dm_status wb)"
	[ "\$(sum)" = "\$before" ] && wb_report "same_\$1" yes || wb_report "same_\$1" no
}
# verify_both <tag> <device>: every write of both regions reads back.
verify_both() {
	wb_stamp "verify_a_\$1" verify \$2 $A --flushed 1500
	wb_stamp "verify_b_\$1" verify \$2 $B --flushed 1500
}

# dm-wbkit writes, upstream replays.
wb_load_target wbkit
wb_start
handover a "$A" wbkit upstream
wb_stamp verify_a_upstream verify \$dev $A --flushed 1500

# upstream writes (on top), dm-wbkit replays.
handover b "$B" upstream wbkit
verify_both wbkit \$dev
wb_drop_caches_remove
verify_both backing /dev/vda

# Side by side: upstream as "writeboost", dm-wbkit as "wbkit"; without the
# other name dm-wbkit refuses to load next to upstream.
wb_unload_target wbkit
wb_load_target upstream
insmod /lib/modules-extra/wbkit/dm-wbkit.ko 2>/dev/null && wb_report clash_refused no || wb_report clash_refused yes
wb_load_target wbkit target_name=wbkit
wb_report targets "\$(\$DMSETUP targets | awk '{ print \$1 }' | sort | tr '\n' ,)"
wb_dm_create wb "0 \$(wb_sectors /dev/vda) wbkit /dev/vda /dev/vdb"
verify_both renamed \$dev
\$DMSETUP remove wb || wb_fail "remove failed"
GUEST
echo "interop: ${VM_ELAPSED}s"
echo "upstream after replaying dm-wbkit's cache: $(vm_result status_upstream_replayed)"
echo "dm-wbkit after replaying upstream's cache: $(vm_result status_wbkit_replayed)"
guest_passed
require_all ok write_a verify_a_upstream write_b verify_a_wbkit verify_b_wbkit verify_a_backing verify_b_backing \
	verify_a_renamed verify_b_renamed
echo "target types with both modules loaded: $(vm_result targets)"
case ",$(vm_result targets)" in
*,wbkit,*writeboost,*) ;;
*) echo "FAIL: dmsetup targets does not list both wbkit and writeboost"; exit 1 ;;
esac
require_all yes clash_refused same_a same_b
