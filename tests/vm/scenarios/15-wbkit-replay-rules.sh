#!/usr/bin/env bash
# shows: a crafted cache: newest entry wins, partial newer keeps older
#   sectors, clean entry obsoletes, stop at a bad checksum, superblock record;
#   agrees with `wbreplay`
#
# dm-wbkit replay rules (docs/FORMAT.md, "Replay") on a crafted cache: the newest
# entry wins per block; a newer partial entry keeps the older one's other
# dirty sectors; a newer clean entry makes older dirty data obsolete; replay
# stops at the torn newest segment (a bad checksum) and leaves it out; the
# superblock record raises last_writeback_id. (A bad checksum before the
# newest segment makes construction refuse the log: scenarios 75 and 87.)
# Then drop_caches: the backing device alone must hold the same content.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=300
command -v python3 >/dev/null || { echo "python3 needed to craft the cache"; exit 77; }

# Two cases, each a backing device and a crafted cache (gen.py below).
make_devices backing1 8M cache1 4M backing2 8M cache2 4M
# Sectors are 511 letters and a newline, so `cut -c1` reads one letter each.
cat >"$work/gen.py" <<'PY'
import struct, sys
def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t
T = crc32c_table()
def crc32c(data, crc=0xffffffff):
    for b in data:
        crc = T[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc ^ 0xffffffff
assert crc32c(b"123456789") == 0xE3069283
def block(letter):
    return (letter * 511 + b"\n") * 8
def segment(sid, mbs, corrupt=False):
    meta = b"".join(struct.pack("<QB7x", sec, bits) for sec, bits, _ in mbs)
    meta = meta.ljust(4096 - 512, b"\0")
    data = b"".join(block(l) for _, _, l in mbs)
    body = meta + data
    csum = crc32c(body)
    if corrupt:
        csum ^= 1
    hdr = struct.pack("<QIB", sid, csum, len(mbs)).ljust(512, b"\0")
    return hdr + body
cache_path, backing_path, record = sys.argv[1], sys.argv[2], int(sys.argv[3])
segs = {
    1: [(0, 0x0f, b"A"), (8, 0xff, b"C")],
    2: [(0, 0xf0, b"B"), (8, 0x00, b"X")],
    3: [(16, 0x01, b"E")],
    4: ([(24, 0xff, b"D")], True),
}
with open(cache_path, "r+b") as f:
    f.write(struct.pack("<I", 0x57427374))
    f.seek(2047 * 512)
    f.write(struct.pack("<Q", record))
    for sid, v in segs.items():
        mbs, bad = v if isinstance(v, tuple) else (v, False)
        f.seek((2048 + 1024 * (sid - 1)) * 512)
        f.write(segment(sid, mbs, bad))
with open(backing_path, "r+b") as f:
    f.write((b"Z" * 511 + b"\n") * 2048)
PY
# Slots: 1 {block 0: 0x0f A, block 8: dirty C}  2 {block 0: 0xf0 B, block 8: clean}
#        3 {block 16: 0x01 E}  4 {block 24: D, bad checksum: the torn newest}
python3 "$work/gen.py" "$work/cache1.img" "$work/backing1.img" 0
python3 "$work/gen.py" "$work/cache2.img" "$work/backing2.img" 2

run_guest <<'GUEST'
wb_load_target wbkit
letters() { $DD if=$1 of=/tmp/got bs=512 count=40 iflag=direct 2>/dev/null; cut -c1 /tmp/got | tr -d '\n'; }
for v in 1 2; do
	if [ $v = 1 ]; then b=/dev/vda c=/dev/vdb; else b=/dev/vdc c=/dev/vdd; fi
	wb_dm_create wb$v "0 $(wb_sectors $b) writeboost $b $c"
	wb_report "status$v" "$(wb_dm_status wb$v)"
	wb_report "live$v" "$(letters /dev/mapper/wb$v)"
	$DMSETUP message wb$v 0 drop_caches || wb_fail "drop_caches failed"
	$DMSETUP remove wb$v || wb_fail "remove failed"
	wb_report "backing$v" "$(letters $b)"
done
GUEST
guest_passed
fail=0
# Status fields 5..7: last_flushed_id last_writeback_id nr_dirty_cache_blocks.
ids() { vm_result "status$1" | cut -d' ' -f5-7; }
echo "record 0: $(vm_result status1)"
echo "record 2: $(vm_result status2)"
[ "$(ids 1)" = "3 0 2" ] || { echo "record 0: want ids 3 0 2, got $(ids 1)"; fail=1; }
[ "$(ids 2)" = "3 2 1" ] || { echo "record 2: want ids 3 2 1, got $(ids 2)"; fail=1; }
Z8=ZZZZZZZZ
want1="AAAABBBB${Z8}EZZZZZZZ${Z8}${Z8}"
expect_all "$want1" live1 backing1
# Record 2 says segments 1 and 2 are on the backing device (the crafted one
# is not): replay writes nothing of them, not even the sectors segment 1
# keeps under segment 2's partial entry (docs/FORMAT.md, step 4: writing
# them could roll newer written-back data back), so blocks 0 and 8 read the
# backing device's Z.
want2="${Z8}${Z8}EZZZZZZZ${Z8}${Z8}"
expect_all "$want2" live2 backing2

# The host tool, when built, must reach the same backing content offline.
if wbreplay=$(wbkit_tool wbreplay) && [ -n "$wbreplay" ]; then
	vm_image "$work/offline.img" 8M
	vm_image "$work/cache3.img" 4M
	python3 "$work/gen.py" "$work/cache3.img" "$work/offline.img" 0
	# A torn newest segment is what a power cut leaves: nothing lost, exit 0.
	wrc=0
	"$wbreplay" --cache "$work/cache3.img" --backing "$work/offline.img" -q || wrc=$?
	[ "$wrc" = 0 ] || { echo "wbreplay exited $wrc on a log with only a torn newest segment"; fail=1; }
	if cmp -s "$work/offline.img" "$work/backing1.img"; then
		echo "wbreplay agrees with the target"
	else
		echo "wbreplay and the target disagree on the replayed backing device"
		fail=1
	fi
else
	echo "(wbreplay not built: offline comparison not run)"
fi
exit $fail
