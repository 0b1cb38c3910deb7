#!/usr/bin/env bash
# shows: upstream, then dm-wbkit: writes around the cache, reads through the
#   read cache, a write drops the cached copy, the log rotates; a dirty log
#   written back first (dm-wbkit)
#
# write_around_mode 1. Run on the upstream module first (the reference),
# then on dm-wbkit, in one boot, each with "6 write_around_mode 1
# read_cache_threshold 4 nr_read_cache_cells 8" on a fresh 2-segment cache
# over a backing device full of random data:
# - writes reach the backing device at once and log nothing;
# - reads still use the read cache (8 random reads, then 8 hits);
# - a write to a cached block drops the cached copy: the next read is a
#   miss and returns the new data;
# - 300 random reads cached through a 2-segment ring: the log rotates;
# - the target always presents exactly the backing device's content.
# The 16 counters and blocks logged of each phase must equal upstream's.
# Then dm-wbkit only: a cache left dirty by write-back mode, loaded with
# write_around_mode 1, is written back before the device goes live (the
# data is on the backing device; upstream formats the cache instead and
# loses it, reported for comparison). Last, on both: data written back in
# write-back mode, then overwritten in write-around mode, is not brought
# back by a replay in write-back mode.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=900

make_devices backing-up 8M backing-wb 8M cache-up 2M cache-wb 2M

run_guest <<'GUEST'
$DD if=/dev/urandom of=/tmp/base bs=1M count=8 2>/dev/null
$DD if=/dev/urandom of=/tmp/new bs=4k count=16 2>/dev/null
# wr <block> <block of /tmp/new>
wr() { $DD if=/tmp/new of=/dev/mapper/wb bs=4k skip="$2" seek="$1" count=1 oflag=direct conv=notrunc 2>/dev/null || wb_fail "write of block $1 failed"; }
writes() { for i in 0 1 2 3 4 5 6 7; do wr $((10 + 3 * i)) "$i"; done; }
overwrite() { wr 103 8; wb_read_blocks 103; }
many() { i=0; while [ $i -lt 300 ]; do wb_read_blocks $((1024 + 2 * i)); i=$((i + 1)); done; }
# the target and the backing device hold the same bytes
same() {
	a=$($DD if=/dev/mapper/wb bs=1M iflag=direct 2>/dev/null | wb_digest)
	b=$($DD if="$1" bs=1M iflag=direct 2>/dev/null | wb_digest)
	[ "$a" = "$b" ] && echo yes || echo no
}

run() { # <backing> <cache> <tag>
	$DD if=/tmp/base of="$1" bs=1M oflag=direct 2>/dev/null || wb_fail "cannot fill $1"
	wb_dm_create wb "0 $(wb_sectors "$1") writeboost $1 $2 6 write_around_mode 1 read_cache_threshold 4 nr_read_cache_cells 8"
	wb_report "table_$3" "$($DMSETUP table wb | cut -d' ' -f6-)"
	# Upstream logs an empty segment first: get past it with one generation.
	wb_read_blocks 700 703 706 709 712 715 718 721
	sleep 1
	wb_phase "$3" writes writes
	got=$($DD if="$1" bs=4k skip=31 count=1 iflag=direct 2>/dev/null | wb_digest)
	[ "$got" = "$($DD if=/tmp/new bs=4k skip=7 count=1 2>/dev/null | wb_digest)" ] && wb_report "on_backing_$3" yes || wb_report "on_backing_$3" no
	wb_report "writes_dirty_$3" "$(wb_status_field 7)"
	wb_phase "$3" reads wb_read_twice 100 103 106 109 112 115 118 121
	wb_phase "$3" overwrite overwrite
	got=$($DD if=/dev/mapper/wb bs=4k skip=103 count=1 iflag=direct 2>/dev/null | wb_digest)
	[ "$got" = "$($DD if=/tmp/new bs=4k skip=8 count=1 2>/dev/null | wb_digest)" ] && wb_report "new_data_$3" yes || wb_report "new_data_$3" no
	c=$(wb_status_field 4)
	many
	sleep 1
	wb_report "rotated_$3" "$( [ "$(wb_status_field 4)" -ge $((c + 2)) ] && echo yes || echo "no: current_id $c -> $(wb_status_field 4)")"
	wb_report "dirty_$3" "$(wb_status_field 7)"
	wb_report "same_$3" "$(same "$1")"
	$DMSETUP remove wb || wb_fail "$3: remove failed"

	# A cache left dirty by write-back mode, then write_around_mode 1.
	$DD if=/tmp/base of="$1" bs=1M oflag=direct 2>/dev/null || wb_fail "cannot fill $1"
	wb_zero_cache "$2"
	wb_dm_create wb "0 $(wb_sectors "$1") writeboost $1 $2"
	for i in 9 10 11 12 13 14 15; do wr $((1500 + i)) "$i"; done
	$DMSETUP remove wb || wb_fail "$3: remove failed"
	want=$($DD if=/tmp/new bs=4k skip=9 count=7 2>/dev/null | wb_digest)
	wb_dm_create wb "0 $(wb_sectors "$1") writeboost $1 $2 2 write_around_mode 1"
	got=$($DD if="$1" bs=4k skip=1509 count=7 iflag=direct 2>/dev/null | wb_digest)
	[ "$got" = "$want" ] && wb_report "dirty_log_kept_$3" yes || wb_report "dirty_log_kept_$3" no
	wb_report "dirty_log_same_$3" "$(same "$1")"
	$DMSETUP remove wb || wb_fail "$3: remove failed"

	# Write-back data D, written back; write-around data W over it; then
	# write-back mode again: replay must not bring D back over W.
	wb_zero_cache "$2"
	wb_dm_create wb "0 $(wb_sectors "$1") writeboost $1 $2"
	wr 1600 0
	$DD if=/dev/null of=/dev/mapper/wb bs=4k count=0 conv=fsync,notrunc 2>/dev/null || wb_fail "$3: flush failed"
	$DMSETUP message wb 0 drop_caches || wb_fail "$3: drop_caches failed"
	$DMSETUP remove wb || wb_fail "$3: remove failed"
	wb_dm_create wb "0 $(wb_sectors "$1") writeboost $1 $2 2 write_around_mode 1"
	wr 1600 1
	$DMSETUP remove wb || wb_fail "$3: remove failed"
	wb_dm_create wb "0 $(wb_sectors "$1") writeboost $1 $2"
	got=$($DD if=/dev/mapper/wb bs=4k skip=1600 count=1 iflag=direct 2>/dev/null | wb_digest)
	[ "$got" = "$($DD if=/tmp/new bs=4k skip=1 count=1 2>/dev/null | wb_digest)" ] && wb_report "no_stale_replay_$3" yes || wb_report "no_stale_replay_$3" no
	$DMSETUP remove wb || wb_fail "$3: remove failed"
	wb_report "done_$3" yes
}

wb_on_both_modules run "/dev/vda /dev/vdc" "/dev/vdb /dev/vdd"
GUEST
echo "write-around: ${VM_ELAPSED}s"
guest_passed
fail=0
compare_modules 18 table writes writes_logged on_backing writes_dirty reads reads_logged overwrite overwrite_logged \
	new_data rotated dirty same no_stale_replay done
# What the reference shows (index = write<<3 | hit<<2 | on_buffer<<1 | fullsize);
# without upstream ($ref=wbkit), checked on dm-wbkit's values.
wbkit_expect done_wbkit yes || fail=1
if [ "$with_upstream" = 0 ]; then
	# What the comparison with upstream's values would have shown.
	expect_all yes new_data_wbkit rotated_wbkit same_wbkit no_stale_replay_wbkit
	expect_all 0 writes_dirty_wbkit dirty_wbkit
fi
[ "$(vm_result on_backing_$ref)" = yes ] && [ "$(vm_result writes_logged_$ref)" = 0 ] ||
	{ echo "$ref: writes did not go around the cache"; fail=1; }
r=$(vm_result reads_$ref)
[ "$(wbkit_counter "$r" 1)" = 8 ] && [ "$(wbkit_counter "$r" 7)" = 8 ] || { echo "$ref: reads not cached in write-around mode"; fail=1; }
[ "$(wbkit_counter "$(vm_result overwrite_$ref)" 15)" = 1 ] && [ "$(wbkit_counter "$(vm_result overwrite_$ref)" 1)" = 1 ] ||
	{ echo "$ref: a write did not drop the cached copy"; fail=1; }
echo "a dirty write-back log loaded in write-around mode: data kept upstream $(vm_result dirty_log_kept_upstream), dm-wbkit $(vm_result dirty_log_kept_wbkit)"
expect_all yes dirty_log_kept_wbkit dirty_log_same_wbkit
exit $fail
