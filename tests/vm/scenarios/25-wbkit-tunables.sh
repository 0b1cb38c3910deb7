#!/usr/bin/env bash
# shows: constructor refusals, `sync_data_interval` across a power cut, the
#   superblock record, threshold writeback, messages, table line
#
# dm-wbkit tunables and messages: constructor refusals with a readable
# reason; sync_data_interval writes the RAM buffer without any flush request
# (it survives a power cut); update_sb_record_interval writes
# last_writeback_id to sector 2047; writeback_threshold starts background
# writeback; messages change tunables, refuse bad values and the options
# fixed at construction, clear_stat works;
# the table line round-trips.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=300

make_devices backing 32M cache 8M

W="--seed 25 --ops 400 --size 16M"
run_guest <<GUEST
wb_load_target wbkit
refused() {
	if \$DMSETUP create bad --table "\$(wb_table \$1)" 2>/dev/null; then
		\$DMSETUP remove bad; echo accepted
	else
		dmesg | grep -q "\$2" && echo refused || echo "refused-without-reason"
	fi
}
wb_report refuse_rct "\$(refused '2 read_cache_threshold 128' 'read_cache_threshold must be')"
wb_report refuse_wam "\$(refused '2 write_around_mode 2' 'write_around_mode must be')"
wb_report refuse_cells "\$(refused '2 nr_read_cache_cells 0' 'nr_read_cache_cells must be')"
wb_report refuse_thr "\$(refused '2 writeback_threshold 101' 'writeback_threshold must be')"
wb_report refuse_key "\$(refused '2 no_such_key 1' 'Unknown optional argument')"
wb_report refuse_odd "\$(refused '1 writeback_threshold' 'pairs')"
\$DD if=/dev/zero of=/tmp/small bs=1M count=1 2>/dev/null
wb_report accept_zero "\$(\$DMSETUP create ok0 --table "\$(wb_table 4 read_cache_threshold 0 write_around_mode 0)" 2>&1 && \$DMSETUP remove ok0 && echo yes)"

wb_start 4 sync_data_interval 1 update_sb_record_interval 1
wb_report table "\$(\$DMSETUP table wb | cut -d' ' -f3-)"
\$WBSTAMP write /dev/mapper/wb $W --flush-every 0 >/dev/null 2>&1 || wb_fail "writes failed"
sleep 3
set -- \$(wb_dm_status wb)
wb_report synced "\$( [ "\$5" -gt 0 ] && [ "\$7" -gt 0 ] && echo yes || echo "no:\$*")"
\$DMSETUP message wb 0 writeback_threshold 100 || wb_fail "message writeback_threshold failed"
sleep 4
set -- \$(wb_dm_status wb)
wb_report background "\$( [ "\$6" = "\$5" ] && echo yes || echo "no:\$*")"
lw=\$6
sleep 3
rec=\$(\$DD if=/dev/vdb bs=512 skip=2047 count=1 iflag=direct 2>/dev/null | od -An -tu8 -N8 | tr -d ' ')
wb_report record "\$( [ "\$rec" = "\$lw" ] && echo yes || echo "no:\$rec!=\$lw")"
\$DMSETUP message wb 0 writeback_threshold 101 2>/dev/null && wb_report bad_message accepted
\$DMSETUP message wb 0 read_cache_threshold 128 2>/dev/null && wb_report bad_message accepted
\$DMSETUP message wb 0 nr_read_cache_cells 16 2>/dev/null && wb_report bad_message accepted
\$DMSETUP message wb 0 write_around_mode 0 2>/dev/null && wb_report bad_message accepted
\$DMSETUP message wb 0 nr_max_batched_writeback 7 || wb_fail "message nr_max_batched_writeback failed"
\$DMSETUP message wb 0 writeback_threshold 0 || wb_fail "message writeback_threshold failed"
\$DMSETUP message wb 0 clear_stat || wb_fail "clear_stat failed"
st=\$(wb_dm_status wb)
wb_report status_msg "\$st"
set -- \$st
shift 7
# nr_cur_batched_writeback is the size of the last batch: 1..32 after the
# background writeback above.
wb_report cleared "\$(echo "\$*" | sed -E 's/nr_cur_batched_writeback ([1-9]|[12][0-9]|3[0-2]) /nr_cur_batched_writeback N /' | grep -qx "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 16 writeback_threshold 0 nr_cur_batched_writeback N sync_data_interval 1 update_sb_record_interval 1 read_cache_threshold 0 dead 0 nr_discarded_blocks 0 nr_discarded_dirty 0" && echo yes || echo no)"
# More writes, no flush, then the power goes: sync_data_interval saves them.
\$WBSTAMP write /dev/mapper/wb $W --first 401 --ops 500 --flush-every 0 >/dev/null 2>&1 || wb_fail "writes failed"
sleep 3
GUEST
guest_passed
echo "tunables: ${VM_ELAPSED}s; table: $(vm_result table); status: $(vm_result status_msg)"
fail=0
expect_all refused refuse_rct refuse_wam refuse_cells refuse_thr refuse_key refuse_odd
expect_all yes accept_zero synced background record cleared
[ -z "$(vm_result bad_message)" ] || { echo "a bad message was accepted"; fail=1; }
# The keys in the table line's order, as dm-writeboost prints them.
[ "$(vm_result table)" = "writeboost 254:0 254:16 4 sync_data_interval 1 update_sb_record_interval 1" ] ||
	[ "$(vm_result table | cut -d' ' -f4-)" = "4 sync_data_interval 1 update_sb_record_interval 1" ] ||
	{ echo "unexpected table line: $(vm_result table)"; fail=1; }

run_guest <<GUEST
wb_load_target wbkit
wb_start
\$WBSTAMP verify /dev/mapper/wb $W --ops 500 --flushed 500 >/tmp/v.out 2>&1 && wb_report after_cut ok || { tail -n 5 /tmp/v.out; wb_report after_cut failed; }
GUEST
guest_passed
wbkit_expect after_cut ok || fail=1
exit $fail
