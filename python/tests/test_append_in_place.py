"""An append in place cut between its two writes (docs/FORMAT.md, "Checksum"):
the module makes the library's decision, never its own, and shows it where
the scan and the segment view show a checksum."""

import struct

import pytest

import wbkit
import wbkit.testing
from conftest import make_image, pattern, wbdump_json


def appended(tmp_path, committed=4):
    """Segment 1: blocks 0..2; segment 2: ten blocks at backing block 32 on,
    cut back to `committed` by LogWriter.cut_append."""
    cache = make_image(tmp_path / "cache.img", wbkit.SUPERBLOCK_SIZE + 4 * wbkit.SEGMENT_SIZE)
    backing = make_image(tmp_path / "backing.img", 1 << 20)
    with wbkit.testing.LogWriter(cache, backing=backing) as w:
        w.write(0, pattern(3 * 4096, 1))
        w.flush()
        w.write(32 * 8, pattern(10 * 4096, 2))
        w.flush()
        w.cut_append(2, committed)
    return cache, backing


def segment_bytes(cache, slot):
    off = wbkit.SUPERBLOCK_SIZE + slot * wbkit.SEGMENT_SIZE
    return cache.read_bytes()[off:off + wbkit.SEGMENT_SIZE]


def test_check_segment_checksum_reads_both_ways(tmp_path):
    cache, _ = appended(tmp_path)
    seg = segment_bytes(cache, 1)
    header = wbkit.parse_segment_header(seg)
    assert header.length == 4 and header.unused_metablocks_nonzero
    v = wbkit.check_segment_checksum(seg)
    assert v.state is wbkit.SlotState.VALID
    assert v.tail_ignored and v.ignored_metablocks == 6
    assert v.computed == header.checksum
    # The CRC a writer stores is the first reading; here it does not match.
    assert wbkit.segment_checksum(seg, 4) != header.checksum
    assert "ignored_metablocks=6" in repr(v)

    whole = segment_bytes(cache, 0)
    v = wbkit.check_segment_checksum(whole)
    assert v.state is wbkit.SlotState.VALID and not v.tail_ignored and v.ignored_metablocks == 0

    damaged = bytearray(seg)
    damaged[4096] ^= 1
    v = wbkit.check_segment_checksum(damaged)
    assert v.state is wbkit.SlotState.CHECKSUM_MISMATCH and not v.tail_ignored
    inverted = bytearray(whole)
    inverted[8:12] = struct.pack("<I", ~wbkit.segment_checksum(whole, 3) & 0xFFFFFFFF)
    assert wbkit.check_segment_checksum(inverted).state is wbkit.SlotState.LEGACY_CHECKSUM


def test_check_segment_checksum_refuses_what_it_cannot_check():
    with pytest.raises(ValueError):
        wbkit.check_segment_checksum(b"\0" * 100)
    header = bytearray(4096)
    header[12] = 2  # two data blocks named, none given
    with pytest.raises(ValueError):
        wbkit.check_segment_checksum(header)
    header[12] = 200
    with pytest.raises(ValueError):
        wbkit.check_segment_checksum(bytes(header) + bytes(127 * 4096))


def test_scan_and_segment_view_say_the_tail_is_ignored(tmp_path):
    cache, backing = appended(tmp_path)
    with wbkit.open(cache, backing=backing) as c:
        scan = c.scan()
        assert [f.code for f in scan.findings] == [wbkit.FindingCode.APPEND_NOT_COMMITTED]
        assert scan.findings[0].severity is wbkit.Severity.INFO and not scan.damage
        slot = scan.slots[1]
        assert slot.state is wbkit.SlotState.VALID and slot.checksum_ok and slot.ignored_metablocks == 6
        assert slot.computed_checksum == slot.stored_checksum
        assert scan.slots[0].ignored_metablocks == 0
        assert [(s.id, s.length) for s in scan.log] == [(1, 3), (2, 4)]
        assert c.block(35 * 8).in_cache and c.block(35 * 8).segment_id == 2
        assert not c.block(36 * 8).in_cache  # the append past the length never committed
        seg = c.segment(id=2)
        assert seg.checksum_ok and seg.ignored_metablocks == 6 and len(seg.metablocks) == 4
        assert seg.to_json()["ignored_metablocks"] == 6
        plan = c.replay_plan()
        assert plan.summary.dirty_blocks == 7
    doc = wbdump_json(cache, "--segment", "2")
    assert doc["segment"]["ignored_metablocks"] == 6
    assert [f["code"] for f in doc["findings"]] == ["append-not-committed"]


def test_headers_only_scan_cannot_tell(tmp_path):
    cache, _ = appended(tmp_path)
    with wbkit.open(cache) as c:
        scan = c.scan(verify=False)
        assert scan.slots[1].state is wbkit.SlotState.UNVERIFIED and scan.slots[1].ignored_metablocks == 0
        assert [f.code for f in scan.findings] == [wbkit.FindingCode.UNUSED_METABLOCK_NONZERO]
