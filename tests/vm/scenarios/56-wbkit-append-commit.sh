#!/usr/bin/env bash
# shows: an fsync appends to the open segment in place: 300 one-write fsyncs
#   take 3 segments, not 300; overwrites of committed blocks, a reload and a
#   power cut amid appends lose nothing acknowledged, and wbdump agrees
#
# dm-wbkit commits a partly filled segment by appending in place
# (kmod/dm-wbkit-flush.c, wb_append_segment): the new blocks and the
# metablock area first, the header's first logical block last, behind a
# PREFLUSH; the segment stays open. Blocks a commit took are frozen: a
# later write to one of them takes a new block of the segment. Before,
# every fsync sealed the open segment, so each one burned a 512 KiB slot
# and a small cache wrapped (and waited for writeback) every nr_segments
# fsyncs.
#
# 1. 300 stamped writes in a 1 MiB region (256 blocks, a quarter of them
#    512-byte writes, so committed blocks are overwritten, wholly and in
#    part), each followed by fsync: the open segment's id (status field
#    current_id) must stay at 3 or below, where sealing took 300.
# 2. Remove and re-create: the replay of the appended segments holds every
#    write.
# 3. A background writer goes on, one fsync per write, and the guest
#    powers off amid it. The next boot holds every write up to the last
#    fsync that returned; the cache image as the cut left it is one wbdump
#    finds no error in; after drop_caches the backing device alone holds
#    the same.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_need_tool wbdump
VM_TIMEOUT=300

make_devices backing 64M cache 16M

A="--seed 21 --ops 300 --offset 0 --size 1M"
B="--seed 22 --ops 1000000 --offset 4M --size 1M"

run_guest <<GUEST
wb_load_target wbkit
wb_start
dev=/dev/mapper/wb
wb_stamp write_a write \$dev $A --flush-every 1
wb_report ids_a "\$(wb_status_field 4) \$(wb_status_field 5)"
wb_recreate status_replayed
wb_stamp verify_a_replayed verify \$dev $A --flushed 300
\$WBSTAMP write \$dev $B --flush-every 1 --report-flushes 2>&1 &
sleep 3
wb_report status_cut "\$(wb_dm_status wb)"
GUEST
guest_passed
require_all ok write_a verify_a_replayed
read -r open_id flushed_id <<<"$(vm_result ids_a)"
echo "after 300 fsyncs: open segment $open_id, last flushed $flushed_id"
if ! [ "${open_id:-999}" -le 3 ]; then
	echo "300 one-write fsyncs took $open_id segments: each fsync sealed one"
	exit 1
fi
acked=$(wbkit_acked_in_flight 0 1000000) || exit 1
echo "acknowledged at the cut: writes 1..$acked of the background writer"

dump_rc=0
# shellcheck disable=SC2154 # wbdump: set by wbkit_need_tool
"$wbdump" "$work/cache.img" >"$work/wbdump.txt" 2>&1 || dump_rc=$?
if [ "$dump_rc" != 0 ]; then
	echo "wbdump reports findings on the cache the cut left (exit $dump_rc):"
	head -n 30 "$work/wbdump.txt"
	exit 1
fi

run_guest <<GUEST
wb_load_target wbkit
wb_start
dev=/dev/mapper/wb
wb_report status_after_cut "\$(wb_dm_status wb)"
wb_stamp verify_a_cut verify \$dev $A --flushed 300
wb_stamp verify_b_cut verify \$dev $B --flushed $acked
wb_drop_caches_remove
wb_stamp verify_a_backing verify /dev/vda $A --flushed 300
wb_stamp verify_b_backing verify /dev/vda $B --flushed $acked
GUEST
guest_passed
echo "status after the cut: $(vm_result status_after_cut)"
require_all ok verify_a_cut verify_b_cut verify_a_backing verify_b_backing
