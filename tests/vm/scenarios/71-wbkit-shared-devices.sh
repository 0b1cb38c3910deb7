#!/usr/bin/env bash
# shows: upstream first (it accepts a second device over a cache in use), then
#   dm-wbkit: a second device over the cache, over the backing device, with them
#   swapped, refused and named; a reload of the same device works, data intact;
#   two `dmsetup create`s at once, five rounds, one succeeds each time (the
#   module before: both)
#
# Issue 57, item 6: two mapped devices over one cache (or backing) device.
#
# dm opens a device for every table that names it, and nothing in dm stops
# two devices from naming the same one. Two writeboost devices over one
# cache device each replay the log and then write their own over the
# other's; over one backing device, each writes back under the other. A
# table reload races the same way when it names another device's disks.
#
# Upstream's dm-writeboost first (the reference): it accepts a second
# device over a cache device in use. dm-wbkit refuses a table that shares a
# device, in either role, with a table of another mapped device, and says
# which; a reload of the same device (its old table live while the new one
# is built) still works, data intact; and of two `dmsetup create`s started
# at once over the same devices, exactly one succeeds, every round.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=300

make_devices backing1 64M cache 32M backing2 64M

run_guest <<'GUEST'
wb_load_both_targets
L=$(wb_sectors /dev/vda)

if wb_has_upstream; then
	wb_try_create upstream_first u1 "0 $L writeboost /dev/vda /dev/vdb"
	wb_try_create upstream_second_cache u2 "0 $L writeboost /dev/vdc /dev/vdb"
	for d in u2 u1; do $DMSETUP info $d >/dev/null 2>&1 && $DMSETUP remove $d; done
	wb_zero_cache /dev/vdb
fi

wb_try_create first a "0 $L wbkit /dev/vda /dev/vdb"
$DD if=/dev/urandom of=/tmp/data bs=1M count=4 2>/dev/null
$DD if=/tmp/data of=/dev/mapper/a bs=1M oflag=direct conv=fsync 2>/dev/null || wb_fail "write to a"
wb_log_mark "shared begins"
wb_try_create second_cache b "0 $L wbkit /dev/vdc /dev/vdb"
wb_try_create second_backing c "0 $L wbkit /dev/vda /dev/vdc"
wb_try_create backing_as_cache d "0 $L wbkit /dev/vdc /dev/vda"
wb_try_create cache_as_backing e "0 $(wb_sectors /dev/vdb) wbkit /dev/vdb /dev/vdc"
wb_report named "$(wb_log_since "shared begins" | grep -c 'is the cache or backing device of a$')"
dmesg | grep 'is the cache or backing device of' | head -n 2 | sed 's/^/dmesg: /'
for d in b c d e; do $DMSETUP info $d >/dev/null 2>&1 && $DMSETUP remove $d; done
# A reload of a itself: its new table is built while the old one is live.
$DMSETUP reload a --table "0 $L wbkit /dev/vda /dev/vdb 2 writeback_threshold 70" &&
	$DMSETUP resume a && wb_report reload ok || wb_report reload failed
$DMSETUP table a | sed 's/^/table: /'
$DD if=/dev/mapper/a of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null
$CMP -s /tmp/data /tmp/back && wb_report reload_data ok || wb_report reload_data wrong
$DMSETUP remove a || wb_fail "remove a"

# Two creates at once, the same devices: one wins.
winners=""
for round in 1 2 3 4 5; do
	$DMSETUP create x --table "0 $L wbkit /dev/vda /dev/vdb" 2>/dev/null &
	X=$!
	$DMSETUP create y --table "0 $L wbkit /dev/vda /dev/vdb" 2>/dev/null &
	Y=$!
	n=0
	wait $X && n=$((n + 1))
	wait $Y && n=$((n + 1))
	winners="$winners$n"
	for d in x y; do
		$DMSETUP info $d >/dev/null 2>&1 || continue
		$DMSETUP mknodes $d
		$DD if=/dev/mapper/$d of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null
		$CMP -s /tmp/data /tmp/back || wb_report race_data "wrong in round $round"
		$DMSETUP remove $d
	done
done
wb_report race_winners "$winners"
wb_report end yes
GUEST
guest_passed
if [ "$with_upstream" = 1 ]; then
	echo "upstream: a second device over a cache in use: $(vm_result upstream_second_cache)"
	[ "$(vm_result upstream_second_cache)" = refused ] || echo "  upstream's defect: two devices write one log"
fi
echo "dm-wbkit: second over the cache $(vm_result second_cache), over the backing $(vm_result second_backing), backing as cache $(vm_result backing_as_cache), cache as backing $(vm_result cache_as_backing); reload $(vm_result reload), data $(vm_result reload_data); creates at once, winners per round: $(vm_result race_winners)"
fail=0
wbkit_expect first created || fail=1
expect_all refused second_cache second_backing backing_as_cache cache_as_backing
wbkit_expect named 4 || fail=1
expect_all ok reload reload_data
wbkit_expect race_winners 11111 || fail=1
[ -z "$(vm_result race_data)" ] || { echo "race: data $(vm_result race_data)"; fail=1; }
wbkit_expect end yes || fail=1
exit $fail
