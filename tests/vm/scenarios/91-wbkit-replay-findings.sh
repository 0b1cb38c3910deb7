#!/usr/bin/env bash
# shows: upstream first, then dm-wbkit: one flipped byte in an old dirty
#   segment of dm-wbkit's own wrapped log is refused (no device written; wbdump
#   says log-refused, wbreplay refuses) instead of read as a torn rewrite; a
#   superblock record beyond the log makes every copy distrusted (block reads
#   the backing device's data, upstream reads the stale copy); a torn rewrite
#   with nothing after it keeps the ids going (7, then 8 in its own slot; the
#   module before the shared decision restarted at 1). The module before this
#   change fails all three
#
# The three ways an outside review found the kernel's replay losing data,
# each on the state that shows it, upstream's module first (the reference,
# whose result is reported), then dm-wbkit, whose result is required. The
# decision is the one the tools make (wb_replay_decide, format/wbkit_format.h);
# tests/unit/test_replay_decision.cpp and test_torn_rewrite.cpp hold the same
# states in user space.
#
# 1. One corrupted byte in an old dirty segment of a wrapped log: a 9 MiB
#    cache (16 slots) takes 5,080 stamped 4 KiB writes and is removed; the
#    host flips byte 100 of the first data block of segment max_id - 12
#    (step 3 of the walk, where the id is one lap behind: the shape of a torn
#    rewrite). In a log dm-wbkit wrote (the trust record is there) no torn
#    rewrite can exist, so it is damage: construction must fail and write
#    neither device; wbdump reports log-refused; wbreplay refuses and writes
#    nothing. (Read as a rewrite, four dirty segments counted as written
#    back: 2 MB read back stale.) Upstream writes its own log the same way
#    and replays it: reported.
# 2. A superblock record naming a segment the cache does not hold (crafted:
#    segment 1 holds block 100 as 'A', the record says 2, the backing device
#    holds 'B', the trust record is there): no copy may serve reads as clean,
#    since the backing device may be newer; dm-wbkit must read 'B', and keep
#    reading 'B' (the trust record raised to 2, the record rewritten to 1).
# 3. A torn rewrite with nothing applied after it (crafted, no trust record:
#    4 slots holding ids 5..8, slots 2 and 3 fail their checksums): slot 2
#    is a torn rewrite, slot 3 the torn newest; last_flushed_id must be 7,
#    not 0, and the next segment must be 8 in slot 3, not 1 over slot 0.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
wbkit_need_tool wbdump
wbkit_need_tool wbreplay
VM_TIMEOUT=900
PY=/usr/bin/python3

make_devices f1-up-backing 32M f1-up-cache 9M f1-wb-backing 32M f1-wb-cache 9M

# --- finding 1, the log: each module writes its own -----------------------
W="--seed 91 --size 24M --ops 5080 --flush-every 127 --final-flush"
run_guest <<GUEST
wb_load_both_targets
write_log() { # <name> <backing> <cache> <target>
	wb_dm_create \$1 "0 \$(wb_sectors \$2) \$4 \$2 \$3"
	\$WBSTAMP write /dev/mapper/\$1 $W >/dev/null || wb_fail "\$1: wbstamp write failed"
	wb_report "\$1_status" "\$(wb_dm_status \$1)"
	\$DMSETUP remove \$1 || wb_fail "\$1: remove failed"
}
wb_on_both_targets write_log "up /dev/vda /dev/vdb" "wb /dev/vdc /dev/vdd"
GUEST
guest_passed

# Flips byte 100 of data block 0 of segment max_id - 12; prints its slot and id.
corrupt() {
	"$PY" - "$1" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(0, 2)
    nr = (f.tell() // 512 - 2048) // 1024
    ids = {}
    for k in range(nr):
        f.seek((2048 + 1024 * k) * 512)
        sid, = struct.unpack("<Q", f.read(8))
        if sid:
            ids[sid] = k
    bad = max(ids) - 12
    assert nr == 16 and max(ids) >= nr and bad in ids, (nr, sorted(ids))
    at = (2048 + 1024 * ids[bad] + 8) * 512 + 100
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0xff]))
    print(ids[bad], bad, max(ids))
PY
}
fail=0
read -r wb_slot wb_bad wb_max < <(corrupt "$work/f1-wb-cache.img")
echo "finding 1: dm-wbkit's log: ids up to $wb_max, one byte flipped in segment $wb_bad (slot $wb_slot)"
if [ "$with_upstream" = 1 ]; then
	read -r up_slot up_bad up_max < <(corrupt "$work/f1-up-cache.img")
	echo "finding 1: upstream's log: ids up to $up_max, one byte flipped in segment $up_bad (slot $up_slot)"
fi
cp --sparse=always "$work/f1-wb-cache.img" "$work/f1-wb-cache.before"
cp --sparse=always "$work/f1-wb-backing.img" "$work/f1-wb-backing.before"

# The host tools on dm-wbkit's damaged log.
"$wbdump" --json --backing "$work/f1-wb-backing.img" "$work/f1-wb-cache.img" >"$work/dump.json" || true
refused=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(str(f["place"]["slot"]) for f in d["findings"] if f["code"] == "log-refused"))' "$work/dump.json")
if [ "$refused" = "$wb_slot" ]; then
	echo "wbdump: log-refused at slot $wb_slot"
else
	echo "wbdump: want log-refused at slot $wb_slot, got '$refused'"
	fail=1
fi
wrc=0
"$wbreplay" --cache "$work/f1-wb-cache.img" --backing "$work/f1-wb-backing.img" -q 2>"$work/wbreplay.err" || wrc=$?
if [ "$wrc" = 4 ] && cmp -s "$work/f1-wb-backing.img" "$work/f1-wb-backing.before"; then
	echo "wbreplay: refused (exit 4), backing device unchanged: $(head -c 160 "$work/wbreplay.err")"
else
	echo "wbreplay: want exit 4 and no write, got exit $wrc: $(cat "$work/wbreplay.err")"
	fail=1
fi

# --- findings 2 and 3: crafted states --------------------------------------
# Sectors are 511 letters and a newline; the CRC-32C is tests/cli/craft.py's,
# not the library's (an independent writer of the format).
cat >"$work/gen.py" <<'PY'
import struct, sys
sys.path.insert(0, sys.argv[4])
from craft import crc32c
def block(letter):
    return (letter * 511 + b"\n") * 8
def segment(sid, mbs, bad=False):
    meta = b"".join(struct.pack("<QB7x", sec, 0xff) for sec, _ in mbs).ljust(4096 - 512, b"\0")
    body = meta + b"".join(block(l) for _, l in mbs)
    csum = crc32c(body) ^ (1 if bad else 0)
    return struct.pack("<QIB", sid, csum, len(mbs)).ljust(512, b"\0") + body
which, cache_path, backing_path = sys.argv[1:4]
assert crc32c(b"123456789") == 0xE3069283
with open(cache_path, "r+b") as c, open(backing_path, "r+b") as b:
    c.write(struct.pack("<I", 0x57427374))
    if which == "2":
        c.seek(8 * 512)
        c.write(struct.pack("<IIQ", 0x72544257, 0, 1))  # trust record, from id 1
        c.seek(2047 * 512)
        c.write(struct.pack("<Q", 2))                   # record: segment 2 written back
        c.seek(2048 * 512)
        c.write(segment(1, [(800, b"A")]))              # block 100 (sector 800): A
        b.seek(800 * 512)
        b.write(block(b"B"))                            # the backing device: B
    else:
        # 4 slots: ids 5..8 in slots 0..3; 7 (a torn rewrite) and 8 (the torn newest) bad.
        for sid in (5, 6, 7, 8):
            c.seek((2048 + 1024 * ((sid - 1) % 4)) * 512)
            c.write(segment(sid, [(8 * sid, b"CDEF"[sid - 5:sid - 4])], bad=sid >= 7))
PY
for who in up wb; do
	vm_image "$work/f2-$who-cache.img" 3M
	vm_image "$work/f2-$who-backing.img" 8M
	"$PY" "$work/gen.py" 2 "$work/f2-$who-cache.img" "$work/f2-$who-backing.img" "$WBKIT_ROOT/tests/cli"
	vm_image "$work/f3-$who-cache.img" 3M
	vm_image "$work/f3-$who-backing.img" 8M
	"$PY" "$work/gen.py" 3 "$work/f3-$who-cache.img" "$work/f3-$who-backing.img" "$WBKIT_ROOT/tests/cli"
done

run_guest "$work/f2-up-backing.img" "$work/f2-up-cache.img" "$work/f2-wb-backing.img" "$work/f2-wb-cache.img" \
	"$work/f3-up-backing.img" "$work/f3-up-cache.img" "$work/f3-wb-backing.img" "$work/f3-wb-cache.img" <<GUEST
wb_load_both_targets
digest() { \$DD if=\$1 bs=1M iflag=direct 2>/dev/null | wb_digest; }
letter() { \$DD if=\$1 bs=512 skip=\$2 count=1 iflag=direct 2>/dev/null | cut -c1 | head -n 1; }

# Finding 1.
if wb_has_upstream; then
	if \$DMSETUP create up --table "0 \$(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"; then
		\$DMSETUP mknodes up
		wb_report f1_up_status "\$(wb_dm_status up)"
		if \$WBSTAMP verify /dev/mapper/up $W --flushed 5080 >/tmp/v.out 2>&1; then
			wb_report f1_up kept
		else
			wb_report f1_up "lost:\$(grep -c . /tmp/v.out)_lines"
		fi
		\$DMSETUP remove up
	else
		wb_report f1_up refused
	fi
fi
before="\$(digest /dev/vdc) \$(digest /dev/vdd)"
if \$DMSETUP create wb --table "0 \$(wb_sectors /dev/vdc) wbkit /dev/vdc /dev/vdd" 2>/tmp/create.err; then
	wb_report f1_wb "constructed:\$(wb_dm_status wb | cut -d' ' -f5-7 | tr ' ' ,)"
	\$DMSETUP remove wb
else
	wb_report f1_wb refused
fi
after="\$(digest /dev/vdc) \$(digest /dev/vdd)"
[ "\$before" = "\$after" ] && wb_report f1_wb_devices unchanged || wb_report f1_wb_devices changed
dmesg | grep -q "Not replayed; see wbdump and wbrecover" && wb_report f1_wb_log names_the_tools
dmesg | grep "Not replayed" | tail -n 1

# Finding 2: upstream on /dev/vde+vdf, dm-wbkit on /dev/vdg+vdh.
check2() { # <name> <backing> <cache> <target>
	wb_dm_create \$1 "0 \$(wb_sectors \$2) \$4 \$2 \$3"
	wb_report "f2_\$1_status" "\$(wb_dm_status \$1 | cut -d' ' -f5-7 | tr ' ' ,)"
	wb_report "f2_\$1_read" "\$(letter /dev/mapper/\$1 800)"
	\$DMSETUP remove \$1 || wb_fail "\$1: remove failed"
	wb_dm_create \$1 "0 \$(wb_sectors \$2) \$4 \$2 \$3"
	wb_report "f2_\$1_read_again" "\$(letter /dev/mapper/\$1 800)"
	\$DMSETUP remove \$1 || wb_fail "\$1: remove failed"
}
wb_on_both_targets check2 "up /dev/vde /dev/vdf" "wb /dev/vdg /dev/vdh"

# Finding 3: upstream on /dev/vdi+vdj, dm-wbkit on /dev/vdk+vdl.
check3() { # <name> <backing> <cache> <target>
	if ! \$DMSETUP create \$1 --table "0 \$(wb_sectors \$2) \$4 \$2 \$3"; then
		wb_report "f3_\$1_status" refused
		return
	fi
	\$DMSETUP mknodes \$1
	wb_report "f3_\$1_status" "\$(wb_dm_status \$1 | cut -d' ' -f5-7 | tr ' ' ,)"
	\$DD if=/dev/zero of=/dev/mapper/\$1 bs=4k count=1 seek=100 oflag=direct conv=fsync 2>/dev/null ||
		wb_fail "\$1: write failed"
	wb_report "f3_\$1_after_write" "\$(wb_dm_status \$1 | cut -d' ' -f4-7 | tr ' ' ,)"
	\$DMSETUP remove \$1 || wb_fail "\$1: remove failed"
}
wb_on_both_targets check3 "up /dev/vdi /dev/vdj" "wb /dev/vdk /dev/vdl"
GUEST
[ "$rc" = 0 ] || exit 1

# Finding 1.
if [ "$with_upstream" = 1 ]; then
	echo "finding 1, upstream on its own damaged log: $(vm_result f1_up) (status $(vm_result f1_up_status))"
fi
[ "$(vm_result f1_wb)" = refused ] || { echo "finding 1: dm-wbkit must refuse, got $(vm_result f1_wb)"; fail=1; }
[ "$(vm_result f1_wb_devices)" = unchanged ] || { echo "finding 1: a refused construction wrote a device"; fail=1; }
[ "$(vm_result f1_wb_log)" = names_the_tools ] || { echo "finding 1: the refusal does not name wbdump and wbrecover"; fail=1; }
cmp -s "$work/f1-wb-cache.img" "$work/f1-wb-cache.before" || { echo "finding 1: the cache image changed"; fail=1; }
cmp -s "$work/f1-wb-backing.img" "$work/f1-wb-backing.before" || { echo "finding 1: the backing image changed"; fail=1; }

# Finding 2.
if [ "$with_upstream" = 1 ]; then
	echo "finding 2, upstream: block 100 reads '$(vm_result f2_up_read)', after a restart '$(vm_result f2_up_read_again)' (the backing device holds B; status $(vm_result f2_up_status))"
fi
for k in f2_wb_read f2_wb_read_again; do
	[ "$(vm_result $k)" = B ] || { echo "finding 2: $k: want B (the backing device), got '$(vm_result $k)'"; fail=1; }
done
[ "$(vm_result f2_wb_status)" = "1,1,0" ] || { echo "finding 2: want ids 1,1,0, got $(vm_result f2_wb_status)"; fail=1; }
read -r trust record < <("$PY" -c '
import struct, sys
with open(sys.argv[1], "rb") as f:
    f.seek(8 * 512); magic, _, trust = struct.unpack("<IIQ", f.read(16))
    f.seek(2047 * 512); record, = struct.unpack("<Q", f.read(8))
print(trust if magic == 0x72544257 else "none", record)' "$work/f2-wb-cache.img")
[ "$trust $record" = "2 1" ] || { echo "finding 2: want trust record 2 and record 1 on the cache, got $trust $record"; fail=1; }

# Finding 3.
if [ "$with_upstream" = 1 ]; then
	echo "finding 3, upstream: $(vm_result f3_up_status), after a write $(vm_result f3_up_after_write)"
fi
[ "$(vm_result f3_wb_status)" = "7,7,0" ] || { echo "finding 3: want ids 7,7,0, got $(vm_result f3_wb_status)"; fail=1; }
# current_id, last_flushed_id, last_writeback_id, dirty: the fsynced write
# is appended to the open segment 8 (durable, counted flushed once sealed:
# the remove below seals it into slot 3).
[ "$(vm_result f3_wb_after_write)" = "8,7,7,1" ] || { echo "finding 3: after a write want 8,7,7,1, got $(vm_result f3_wb_after_write)"; fail=1; }
slots=$("$PY" -c '
import struct, sys
with open(sys.argv[1], "rb") as f:
    ids = []
    for k in range(4):
        f.seek((2048 + 1024 * k) * 512); ids.append(struct.unpack("<Q", f.read(8))[0])
print(",".join(map(str, ids)))' "$work/f3-wb-cache.img")
echo "finding 3: dm-wbkit's slots after the write: $slots"
# Slot 0 holds 5, or nothing once its header was invalidated ahead of reuse
# (its segment is written back); never id 1, which the restart at 1 put there.
case $slots in
5,*,8 | 0,*,8) ;;
*) echo "finding 3: want id 5 (or an invalidated header) in slot 0 and 8 in slot 3, got $slots"; fail=1 ;;
esac
exit $fail
