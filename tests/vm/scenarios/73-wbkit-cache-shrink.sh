#!/usr/bin/env bash
# shows: a cache device shrunk under a first-lap log of dirty data (62 slots
#   cut to 24) is refused untouched, with the reason; grown back every write
#   reads back; written back and cut again still refused; zeroed first and last
#   MiB it is formatted anew and reads the backing device's data. The module of
#   845bb85 replayed the shrunk log and read wrong data for the segments past
#   the new end
#
# Issue 57, item 4: a cache device shrunk under its log.
#
# A log in its first lap holds ids 1..n in slots 0..n-1. Cut the device
# after slot k and what is left reads as an intact log of k segments: the
# module before this change replayed it and dropped segments k+1..n
# without a word, dirty data among them, so reads of those blocks returned
# the backing device's older data. The trust record now names the ring
# size its log was written in, and a replay on a smaller device refuses
# the log (wb_replay_check_ring) and writes nothing. Here, on a 62-slot
# cache:
#   1. 40 segments of dirty data (no writeback), flushed, removed;
#   2. the device cut to 24 slots (a linear table over its start): the
#      construction is refused, with the reason in the kernel log, and the
#      cache device is unchanged;
#   3. grown back to 62 slots: every block reads what was written;
#   4. written back (drop_caches), removed, cut again: still refused (a
#      clean shutdown cannot be told from a power cut after the record);
#   5. the documented way to shrink a written-back cache: zero its first
#      and last MiB, and it is formatted anew; every block reads what was
#      written, now from the backing device.
# dm-wbkit only: upstream's dm-writeboost records no ring size.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420

make_devices backing 64M cache 32M

run_guest <<'GUEST'
wb_load_target wbkit
LB=$(wb_sectors /dev/vda)
LC=$(wb_sectors /dev/vdb)
SLOTS=$(((LC - 2048) / 1024))
[ "$SLOTS" = 62 ] || wb_fail "expected 62 slots, got $SLOTS"
SMALL=$((2048 + 24 * 1024))
dev=/dev/mapper/wb
wb_dm_create big "0 $LC linear /dev/vdb 0"

# create <cache> <key>: constructs wb over it, reporting key=created|refused.
create() {
	if $DMSETUP create wb --table "0 $LB writeboost /dev/vda $1" 2>/tmp/err; then
		$DMSETUP mknodes
		wb_report "$2" created
	else
		$DMSETUP remove wb 2>/dev/null
		wb_report "$2" refused
	fi
}

# check_data <key>: reports key=ok when wb reads back the 40 segments.
check_data() {
	$DD if=$dev bs=508k count=40 iflag=direct 2>/dev/null | wb_digest >/tmp/got
	$CMP -s /tmp/got /tmp/want && wb_report "$1" ok || wb_report "$1" wrong
}

# create_shrunk <key>: wb over the cut device (create); should it come up
# all the same, reports what it reads as <key>_data and removes it.
create_shrunk() {
	create /dev/mapper/small "$1"
	$DMSETUP table wb >/dev/null 2>&1 && {
		check_data "$1_data"
		$DMSETUP remove wb
	}
}

# 1. 40 segments of dirty data.
$DD if=/dev/urandom of=/tmp/data bs=508k count=40 2>/dev/null
$DD if=/tmp/data bs=1M 2>/dev/null | wb_digest >/tmp/want
create /dev/mapper/big first
$DD if=/tmp/data of=$dev bs=508k oflag=direct conv=fsync 2>/dev/null || wb_fail "write"
wb_report dirty_before "$(wb_status_field 7)"
$DMSETUP remove wb || wb_fail "remove"

# 2. Cut to 24 slots.
cache_before=$(wb_digest </dev/vdb)
backing_before=$(wb_digest </dev/vda)
wb_dm_create small "0 $SMALL linear /dev/vdb 0"
dmesg -c >/dev/null
create_shrunk dirty_shrunk
dmesg | grep -q 'smaller than the ring' && wb_report shrunk_message ok || wb_report shrunk_message missing
dmesg | grep -i 'writeboost\|wbkit' | tail -3 | sed 's/^/dmesg: /'
[ "$(wb_digest </dev/vdb)" = "$cache_before" ] && wb_report cache_unchanged yes || wb_report cache_unchanged no
[ "$(wb_digest </dev/vda)" = "$backing_before" ] && wb_report backing_unchanged yes || wb_report backing_unchanged no

# 3. Back to its size: everything is there.
create /dev/mapper/big grown_back
check_data grown_back_data

# 4. Written back, removed, cut again.
timeout 120 $DMSETUP message wb 0 drop_caches || wb_fail "drop_caches"
wb_report dirty_after_drop "$(wb_status_field 7)"
$DMSETUP remove wb || wb_fail "remove"
create_shrunk clean_shrunk

# 5. Zero the first and last MiB of the smaller device: a new cache.
wb_zero_cache /dev/mapper/small
create /dev/mapper/small zeroed
check_data zeroed_data
$DMSETUP remove wb || wb_fail "remove"
wb_report done yes
GUEST
guest_passed
fail=0
expect_all created first grown_back zeroed
expect_all refused dirty_shrunk clean_shrunk
expect_all ok shrunk_message grown_back_data zeroed_data
expect_all yes cache_unchanged backing_unchanged done
wbkit_expect dirty_before 5080 || fail=1
wbkit_expect dirty_after_drop 0 || fail=1
[ "$fail" = 0 ] && echo "a shrunk cache is refused untouched (dirty or written back), grown back it reads every write, zeroed it starts anew"
exit $fail
