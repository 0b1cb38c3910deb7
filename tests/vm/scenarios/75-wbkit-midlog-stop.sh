#!/usr/bin/env bash
# shows: a wrapped upstream log with a superblock record and a damaged middle
#   segment: construction refuses it and writes neither device; after `wbreplay
#   --mark-clean --force`, writes, a power cut and replay again every flushed
#   write is there, wbdump finds nothing, and wbreplay agrees byte for byte
#
# A log that stops in the middle (one damaged segment, valid ones after it)
# is refused by dm-wbkit's construction, which then writes nothing: replaying
# the part before the damage would drop acknowledged segments after it. The
# operator recovers offline, then the target takes the cache again and keeps
# every flushed write from then on.
#
# 1. upstream dm-writeboost writes a wrapped log with a superblock record
#    (drop_caches, record updated, then a few more segments);
# 2. the host corrupts a segment two ids below the newest, beyond the first
#    8 slots of the walk (there a bad checksum reads as a torn rewrite,
#    docs/FORMAT.md replay step 2);
# 3. dm-wbkit refuses to construct on it (the log names wbdump and
#    wbrecover), and neither device changes;
# Without upstream's module (scripts/test-vm-kernel.sh on 6.12, where it does
# not build) dm-wbkit writes the log of step 1: same format, same record.
# 4. wbreplay --mark-clean --force replays the log up to the damage, zeroes
#    the headers from the stop point on and records the replayed ids as
#    written back;
# 5. dm-wbkit takes the cache, a stamped workload with flushes, power cut;
#    wbdump finds nothing wrong with the cache; wbreplay replays copies;
# 6. dm-wbkit replays again: every flushed write is there, and the logical
#    device equals wbreplay's result byte for byte.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_need_tool wbreplay
wbkit_need_tool wbdump
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=600
PY=/usr/bin/python3

make_devices backing 16M cache 8M
vm_image "$work/logical.img" 16M

# --- 1. upstream (else dm-wbkit) writes the log ---------------------------
U="--seed 71 --size 4M --flush-every 20 --final-flush"
run_guest <<GUEST
wb_load_target $ref
wb_start 2 update_sb_record_interval 1
\$WBSTAMP write /dev/mapper/wb $U --ops 400 >/dev/null || wb_fail "phase 1 failed"
\$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
sleep 3
\$WBSTAMP write /dev/mapper/wb $U --first 401 --ops 440 >/dev/null || wb_fail "phase 2 failed"
wb_report upstream_status "\$(wb_dm_status wb)"
GUEST
guest_passed
echo "$ref at the cut: $(vm_result upstream_status)"

# --- 2. corrupt a segment below the record --------------------------------
# Prints "record max_id corrupted_id" after flipping one byte of metablock 0
# of segment max_id - 2 (its dirty bits): covered by the checksum in both
# readings, where a byte past the segment's length would read as an append
# cut between its two writes (docs/FORMAT.md, "Checksum").
read -r record max_id bad < <("$PY" - "$work/cache.img" <<'PY'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    f.seek(0, 2)
    nr = (f.tell() // 512 - 2048) // 1024
    slots = {}
    for k in range(nr):
        f.seek((2048 + k * 1024) * 512)
        sid, = struct.unpack("<Q", f.read(8))
        if sid:
            slots[sid] = k
    f.seek(2047 * 512)
    record, = struct.unpack("<Q", f.read(8))
    max_id = max(slots)
    bad = max_id - 2
    if bad not in slots or bad - (max_id + 1 - nr) < 8:
        sys.exit("no segment to corrupt beyond the torn-rewrite window: record %d, ids %s" % (record, sorted(slots)))
    off = (2048 + slots[bad] * 1024) * 512 + 512 + 8
    f.seek(off)
    b = f.read(1)
    f.seek(off)
    f.write(bytes([b[0] ^ 0xFF]))
    print(record, max_id, bad)
PY
)
[ -n "${bad:-}" ] || { echo "could not pick a segment to corrupt"; exit 1; }
echo "record $record, max id $max_id, corrupted segment $bad"

# --- 3. dm-wbkit refuses the damaged log, writing nothing -----------------
keep_digests cache backing
run_guest <<'GUEST'
wb_load_target wbkit
wb_try_create damaged wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
wb_log_says damaged_message 'see wbdump and wbrecover'
GUEST
guest_passed
fail=0
wbkit_expect damaged refused || fail=1
wbkit_expect damaged_message ok || fail=1
expect_unchanged cache backing

# --- 4. offline recovery ----------------------------------------------------
replay_rc=0
"$wbreplay" --cache "$work/cache.img" --backing "$work/backing.img" --mark-clean --force -q || replay_rc=$?
# exit 1: segments after the damage were not replayed (forced), as intended
[ "$replay_rc" -le 1 ] || { echo "wbreplay --mark-clean --force failed ($replay_rc)"; exit 1; }

# --- 5. dm-wbkit takes the cache, takes writes, power cut -------------------
W="--seed 72 --size 4M --ops 300 --flush-every 50"
run_guest <<GUEST
wb_load_target wbkit
wb_start
wb_report replayed "\$(wb_dm_status wb)"
\$WBSTAMP write /dev/mapper/wb $W --final-flush | sed 's/^/WB: /'
wb_report at_cut "\$(wb_dm_status wb)"
GUEST
guest_passed
echo "dm-wbkit after the offline recovery: $(vm_result replayed)"
echo "at the cut: $(vm_result at_cut)"
[ "$(vm_result last_flushed)" = 300 ] || { echo "workload did not complete: $(vm_result last_flushed)"; exit 1; }

dump_rc=0
# shellcheck disable=SC2154 # wbdump: set by wbkit_need_tool
"$wbdump" "$work/cache.img" >"$work/wbdump.txt" 2>&1 || dump_rc=$?
if [ "$dump_rc" != 0 ]; then
	echo "wbdump reports findings on the cache dm-wbkit left (exit $dump_rc):"
	grep -iE "finding|error|warn|bad|stale" "$work/wbdump.txt" | head -10
	fail=1
fi

replay_offline || fail=1

# --- 6. dm-wbkit replays again ---------------------------------------------
run_guest "$work/logical.img" <<GUEST
wb_load_target wbkit
wb_start
wb_report replayed2 "\$(wb_dm_status wb)"
\$WBSTAMP verify /dev/mapper/wb $W --flushed 300 --base-any >/tmp/v.out 2>&1 && wb_report verify ok || wb_report verify failed
sed 's/^/WB: /' /tmp/v.out | head -20
\$DD if=/dev/mapper/wb of=/dev/vdc bs=1M iflag=direct oflag=direct status=none || wb_fail "dd failed"
GUEST
guest_passed
echo "dm-wbkit after the second replay: $(vm_result replayed2)"
if [ "$(vm_result verify)" != ok ]; then
	echo "flushed writes lost after the second replay:"
	vm_results | grep -E "^verify_|^mismatch|sector" | head -20
	fail=1
fi
images_equal "$work/logical.img" "$work/offline.img" "dm-wbkit and wbreplay disagree on the logical device" || fail=1
[ "$fail" = 0 ] && echo "mid-log stop: every flushed write kept, wbreplay agrees"
exit $fail
