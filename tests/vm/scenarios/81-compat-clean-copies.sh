#!/usr/bin/env bash
# shows: upstream, then dm-wbkit: written-back blocks keep serving reads
#   (2-segment cache, newest of three segments read back, after `drop_caches`, a
#   partial clean copy), equal counters, `nr_cur_batched_writeback` 0 fresh and
#   1 after the wrap, replay over a clean copy
#
# Written-back blocks keep serving reads, and hits and misses are counted as
# dm-writeboost counts them. Run on the upstream module first (the
# reference), then on dm-wbkit, in one boot, each on a 2-segment cache with
# writeback_threshold 0:
# - a fresh device reports nr_cur_batched_writeback 0;
# - 381 writes of 4 KiB (three segments) wrap the ring; the ring needs one
#   segment written back at a time (nr_cur_batched_writeback 1), not all;
# - the newest segment read back: 127 read hits from the RAM buffer;
# - after a flush and drop_caches the same blocks are clean copies on the
#   cache device: 127 read hits, nothing dirty;
# - a 512-byte write written back is a clean copy without every sector: its
#   4 KiB read is a hit served from the backing device, with the right data;
# - a write over a clean copy, remove and re-create: replay gives the newest
#   data, never the clean copy's.
# The 16 counters of every phase must equal upstream's, and the read data
# the written data.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=600

# Caches of 2 MiB: the 1 MiB superblock region + 2 segments of 512 KiB.
make_devices backing-up 16M backing-wb 16M cache-up 2M cache-wb 2M

run_guest <<'GUEST'
$DD if=/dev/urandom of=/tmp/data bs=4k count=400 2>/dev/null
flush() { $DD if=/dev/null of=/dev/mapper/wb bs=4k count=0 conv=fsync,notrunc 2>/dev/null || wb_fail "$1: flush failed"; }
# expect_read <tag> <what> <block> <count> <digest>
expect_read() {
	got=$($DD if=/dev/mapper/wb bs=4k skip="$3" count="$4" iflag=direct 2>/dev/null | wb_digest)
	[ "$got" = "$5" ] || wb_fail "$1: $2 reads back wrong data"
}
newest=$($DD if=/tmp/data bs=4k skip=254 count=127 2>/dev/null | wb_digest)

run() { # <backing> <cache> <tag>
	table="0 $(wb_sectors "$1") writeboost $1 $2 2 writeback_threshold 0"
	wb_dm_create wb "$table"
	wb_report "fresh_batch_$3" "$(wb_status_field 29)"
	$DD if=/tmp/data of=/dev/mapper/wb bs=4k count=381 oflag=direct 2>/dev/null || wb_fail "$3: writes failed"
	wb_report "write_stats_$3" "$(wb_counters)"
	wb_report "wrapped_batch_$3" "$(wb_status_field 29)"

	$DMSETUP message wb 0 clear_stat
	expect_read "$3" "the newest segment" 254 127 "$newest"
	wb_report "newest_stats_$3" "$(wb_counters)"

	flush "$3"
	$DMSETUP message wb 0 drop_caches || wb_fail "$3: drop_caches failed"
	wb_report "dropped_dirty_$3" "$(wb_status_field 7)"
	$DMSETUP message wb 0 clear_stat
	expect_read "$3" "the written-back segment" 254 127 "$newest"
	wb_report "clean_stats_$3" "$(wb_counters)"

	# Sector 3 of block 400, written back: a clean copy of one sector.
	$DD if=/tmp/data of=/dev/mapper/wb bs=512 skip=5 count=1 seek=3203 oflag=direct conv=notrunc 2>/dev/null ||
		wb_fail "$3: partial write failed"
	flush "$3"
	$DMSETUP message wb 0 drop_caches || wb_fail "$3: drop_caches failed"
	$DMSETUP message wb 0 clear_stat
	want=$( ( $DD if=/dev/zero bs=512 count=3; $DD if=/tmp/data bs=512 skip=5 count=1; $DD if=/dev/zero bs=512 count=4 ) 2>/dev/null | wb_digest)
	expect_read "$3" "the partial clean copy" 400 1 "$want"
	wb_report "partial_stats_$3" "$(wb_counters)"

	# New data over a clean copy, then replay.
	$DD if=/tmp/data of=/dev/mapper/wb bs=4k skip=390 count=1 seek=254 oflag=direct conv=notrunc 2>/dev/null ||
		wb_fail "$3: overwrite failed"
	flush "$3"
	$DMSETUP remove wb || wb_fail "$3: remove failed"
	wb_dm_create wb "$table"
	expect_read "$3" "the overwritten block after replay" 254 1 "$($DD if=/tmp/data bs=4k skip=390 count=1 2>/dev/null | wb_digest)"
	expect_read "$3" "the rest after replay" 255 126 "$($DD if=/tmp/data bs=4k skip=255 count=126 2>/dev/null | wb_digest)"
	$DMSETUP remove wb || wb_fail "$3: remove failed"
	wb_report "done_$3" yes
}

wb_on_both_modules run "/dev/vda /dev/vdc" "/dev/vdb /dev/vdd"
GUEST
echo "clean copies: ${VM_ELAPSED}s"
guest_passed
fail=0
# The counters of each phase.
compare_modules 13 write_stats newest_stats clean_stats partial_stats
# What the reference shows (index = write<<3 | hit<<2 | on_buffer<<1 | fullsize);
# without upstream ($ref=wbkit), checked on dm-wbkit's counters.
[ "$(wbkit_counter "$(vm_result write_stats_$ref)" 9)" = 381 ] || { echo "$ref: not 381 full write misses"; fail=1; }
[ "$(wbkit_counter "$(vm_result newest_stats_$ref)" 7)" = 127 ] || { echo "$ref: not 127 read hits from the RAM buffer"; fail=1; }
[ "$(wbkit_counter "$(vm_result clean_stats_$ref)" 5)" = 127 ] || { echo "$ref: not 127 read hits on written-back blocks"; fail=1; }
[ "$(wbkit_counter "$(vm_result partial_stats_$ref)" 5)" = 1 ] || { echo "$ref: the partial clean copy is not a hit"; fail=1; }
for m in $(modules_ran upstream wbkit); do
	echo "$m: nr_cur_batched_writeback fresh $(vm_result "fresh_batch_$m"), after the wrap $(vm_result "wrapped_batch_$m")"
	expect_all 0 "fresh_batch_$m" "dropped_dirty_$m"
	expect_all 1 "wrapped_batch_$m"
	expect_all yes "done_$m"
done
exit $fail
