#!/usr/bin/env bash
# shows: a partial overwrite written back and recorded survives a restart
#   (upstream rolls it back: reported); one read-cache cell
#   (`nr_read_cache_cells 1`) takes read misses; a wrapped log on a grown cache
#   device is refused untouched
#
# Defects an outside review found, each reproduced before its fix:
#
# 1. A restart must not roll data back. Write 4 KiB of A to block 0, then
#    2 KiB of B at sector 0, then 2 KiB of C at sector 4, each written back
#    (drop_caches) and recorded (update_sb_record_interval 1). The device
#    reads BBBBCCCC; after remove and create it must still. Replay used to
#    write the sectors A kept (4-7) to the backing device for segment 2 even
#    though segment 3 had put C there already: BBBBAAAA. Run on upstream's
#    dm-writeboost first, which has the same defect: the scenario reports
#    upstream's result and requires the right one from dm-wbkit only.
# 2. The table line "4 read_cache_threshold 1 nr_read_cache_cells 1" is
#    legal (upstream accepts 1..2048 cells) and read misses on it must work:
#    one cell made a hash of 0 bits and the first read miss oopsed.
# 3. A log that does not sit in the ring in id order is refused, with a
#    message naming wbdump and wbrecover, and nothing is written: a cache
#    device grown after a wrapped log was written (every id now names
#    another slot).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=600

make_devices backing-up 16M cache-up 4M backing-wb 16M cache-wb 4M backing-ring 16M cache-ring 4M

run_guest <<'GUEST'
wb_load_both_targets
fill() { head -c "$2" /dev/zero | tr '\0' "$1"; }
fill A 4096 >/tmp/A
fill B 2048 >/tmp/B
fill C 2048 >/tmp/C
fill B 2048 >/tmp/expect
fill C 2048 >>/tmp/expect
# first block of a device as letters, one per sector: BBBBCCCC
letters() {
	$DD if="$1" bs=4096 count=1 iflag=direct status=none | tr '\000' 0 |
		awk '{ for (i = 0; i < 8; i++) printf "%s", substr($0, i * 512 + 1, 1); print "" }'
}
# rollback <backing> <cache> <target>: the reproducer; reports
# <target>_before, <target>_after (device) and <target>_backing
rollback() {
	table="0 $(wb_sectors "$1") $3 $1 $2 2 update_sb_record_interval 1"
	wb_dm_create wb "$table"
	$DD if=/tmp/A of=/dev/mapper/wb bs=4096 seek=0 oflag=direct conv=fsync status=none || wb_fail "write A"
	timeout 120 $DMSETUP message wb 0 drop_caches || wb_fail "drop_caches on $3 failed or hung"
	$DD if=/tmp/B of=/dev/mapper/wb bs=512 seek=0 oflag=direct conv=fsync status=none || wb_fail "write B"
	timeout 120 $DMSETUP message wb 0 drop_caches || wb_fail "drop_caches on $3 failed or hung"
	$DD if=/tmp/C of=/dev/mapper/wb bs=512 seek=4 oflag=direct conv=fsync status=none || wb_fail "write C"
	timeout 120 $DMSETUP message wb 0 drop_caches || wb_fail "drop_caches on $3 failed or hung"
	sleep 4	# the record names the last segment
	wb_report "${3}_before" "$(letters /dev/mapper/wb)"
	$DMSETUP remove wb || wb_fail "remove"
	wb_dm_create wb "$table"
	wb_report "${3}_after" "$(letters /dev/mapper/wb)"
	$DMSETUP remove wb || wb_fail "remove"
	wb_report "${3}_backing" "$(letters "$1")"
}
wb_on_both_targets rollback "/dev/vda /dev/vdb" "/dev/vdc /dev/vdd"

# 2. One read cache cell: read misses, then the same blocks read again.
$DD if=/dev/zero of=/dev/vdc bs=1M count=1 oflag=direct status=none
wb_zero_cache /dev/vdd
wb_dm_create one "0 $(wb_sectors /dev/vdc) wbkit /dev/vdc /dev/vdd 4 read_cache_threshold 1 nr_read_cache_cells 1"
$WBSTAMP write /dev/mapper/one --seed 87 --size 1M --ops 64 --flush-every 8 --final-flush >/dev/null ||
	wb_fail "wbstamp write on one cell"
for pass in 1 2 3; do
	for b in 300 301 310 400 401 402 500; do
		$DD if=/dev/mapper/one of=/dev/null bs=4k skip=$b count=1 iflag=direct status=none ||
			wb_fail "read miss of block $b failed"
	done
done
$WBSTAMP verify /dev/mapper/one --seed 87 --size 1M --ops 64 --flush-every 8 --flushed 64 >/tmp/v.out 2>&1 &&
	wb_report one_cell ok || { tail -5 /tmp/v.out; wb_report one_cell failed; }
$DMSETUP remove one || wb_fail "remove one"

# 3. A wrapped log on a 6-slot cache (written back, then more), removed.
wb_dm_create ring "0 $(wb_sectors /dev/vde) wbkit /dev/vde /dev/vdf"
$WBSTAMP write /dev/mapper/ring --seed 88 --size 8M --ops 1500 --flush-every 100 --final-flush >/dev/null ||
	wb_fail "wbstamp write on the ring"
wb_report ring_status "$(wb_dm_status ring)"
$DMSETUP remove ring || wb_fail "remove ring"
GUEST
[ "$rc" = 0 ] || exit 1
fail=0
[ "$with_upstream" = 0 ] || echo "upstream: before restart $(vm_result writeboost_before), after $(vm_result writeboost_after), backing $(vm_result writeboost_backing)"
if [ "$with_upstream" = 1 ] && [ "$(vm_result writeboost_after)" != BBBBCCCC ]; then
	echo "upstream's defect, reproduced: its replay rolled sectors back (dm-wbkit must not)"
fi
expect_all BBBBCCCC wbkit_before wbkit_after wbkit_backing
expect_all ok one_cell
echo "ring before growing: $(vm_result ring_status)"

# The host grows the cache of the wrapped log; the target must refuse it.
truncate -s 8M "$work/cache-ring.img"
keep_digests cache-ring backing-ring
use_devices backing-ring cache-ring
run_guest <<'GUEST'
wb_load_target wbkit
wb_try_create grown ring "$(wb_table)"
wb_log_says grown_message 'see wbdump and wbrecover'
GUEST
[ "$rc" = 0 ] || exit 1
expect_all refused grown
expect_all ok grown_message
expect_unchanged cache-ring backing-ring
[ "$fail" = 0 ] && echo "no rollback on restart, one read cache cell works, a grown ring is refused untouched"
exit $fail
