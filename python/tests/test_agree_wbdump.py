"""Every value the module reports agrees with wbdump --json, on every fixture."""

import pathlib

import pytest

import wbkit
from conftest import FIXTURES, compressed_fixtures, fixture_id, wbdump_json

ALL = compressed_fixtures()
# Cache images proper; the other images (backing, logical) are read as caches
# too: mostly garbage to the parser, which is a test of its own.
CACHES = [p for p in ALL if p.name == "cache.img.zst"]


def backing_of(compressed: pathlib.Path):
    b = compressed.parent / "backing.img.zst"
    return b if compressed.name == "cache.img.zst" and b.exists() else None


def check_findings(findings, docs):
    assert len(findings) == len(docs)
    for f, j in zip(findings, docs):
        assert f.code is wbkit.FindingCode(j["code"])
        assert f.name == j["code"]
        assert f.severity.name.lower() == j["severity"]
        assert f.message == j["message"]
        for key in ("slot", "segment_id", "metablock", "backing_sector", "cache_offset"):
            assert getattr(f.place, key) == j["place"][key], key


def check_scan(scan, doc):
    g = doc["geometry"]
    assert scan.geometry.cache_bytes == g["cache_bytes"]
    assert scan.geometry.nr_segments == g["nr_segments"]
    assert scan.geometry.blocks_per_segment == g["blocks_per_segment"]
    assert scan.geometry.segment_bytes == g["segment_bytes"]
    assert scan.geometry.block_bytes == g["block_bytes"]
    sb = doc["superblock"]
    assert scan.superblock.readable == sb["readable"]
    assert scan.superblock.magic == sb["magic"]
    assert scan.superblock.magic_ok == sb["magic_ok"]
    assert scan.superblock.record == sb["record"]
    log = doc["log"]
    assert scan.verified == log["verified"]
    assert scan.max_id == log["max_id"]
    assert scan.oldest_id == log["oldest_id"]
    assert scan.newest_id == log["newest_id"]
    assert len(scan.log) == log["segments"]
    assert scan.discarded_segments == log["discarded_segments"]
    assert scan.stop_reason is wbkit.StopReason(log["stop"]["reason"])
    assert scan.stop_slot == log["stop"]["slot"]
    assert scan.stop_segment_id == log["stop"]["segment_id"]
    assert scan.last_flushed_id == log["last_flushed_id"]
    assert scan.last_writeback_id == log["last_writeback_id"]
    assert scan.dirty_blocks == log["dirty_blocks"]
    assert scan.dirty_sectors == log["dirty_sectors"]
    assert scan.writeback_bytes == log["writeback_bytes"]
    assert scan.damage == doc["damage"]
    check_findings(scan.findings, doc["findings"])
    # The index decides the same dirty totals the summary states.
    dirty_by_block = {}
    for e in scan.index:
        dirty_by_block[e.block_sector] = dirty_by_block.get(e.block_sector, 0) | e.dirty
    assert sum(bin(m).count("1") for m in dirty_by_block.values()) == scan.dirty_sectors
    assert sum(1 for m in dirty_by_block.values() if m) == scan.dirty_blocks


@pytest.mark.parametrize("compressed", ALL, ids=fixture_id)
def test_scan_agrees(images, compressed):
    cache = images.get(compressed)
    with wbkit.open(cache) as c:
        scan = c.scan()
        doc = wbdump_json(cache)
        check_scan(scan, doc)
        assert scan.to_json() == doc
        sb = c.superblock
        assert (sb.magic, sb.magic_ok, sb.record) == (
            doc["superblock"]["magic"], doc["superblock"]["magic_ok"], doc["superblock"]["record"])
        assert len(scan.slots) == c.geometry.nr_segments == doc["geometry"]["nr_segments"]


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_headers_only_scan_agrees(images, compressed):
    cache = images.get(compressed)
    with wbkit.open(cache) as c:
        scan = c.scan(verify=False)
        check_scan(scan, wbdump_json(cache, "--no-verify"))
        assert not scan.verified


@pytest.mark.parametrize("compressed", [p for p in CACHES if backing_of(p)], ids=fixture_id)
def test_scan_with_backing_agrees(images, compressed):
    cache, backing = images.get(compressed), images.get(backing_of(compressed))
    with wbkit.open(cache, backing=backing) as c:
        assert c.backing_size == backing.stat().st_size
        check_scan(c.scan(), wbdump_json(cache, backing=backing))


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_every_slot_agrees(images, compressed):
    cache = images.get(compressed)
    with wbkit.open(cache) as c:
        scan = c.scan()
        segments = list(c.segments())
        assert [s.slot for s in segments] == list(range(c.geometry.nr_segments))
        for seg in segments:
            j = wbdump_json(cache, "--slot", seg.slot)["segment"]
            assert seg.cache_offset == j["cache_offset"] == c.geometry.slot_offset(seg.slot)
            assert seg.state is wbkit.SlotState(j["state"])
            assert seg.error == j["error"]
            assert seg.id == j["id"]
            assert seg.length == j["length"]
            assert seg.stored_checksum == j["checksum_stored"]
            assert seg.computed_checksum == j["checksum_computed"]
            assert seg.checksum_ok == j["checksum_ok"]
            assert [(m.sector, m.dirty_bits, m.padding_nonzero) for m in seg.metablocks] == [
                (m["sector"], m["dirty_bits"], m["padding_nonzero"]) for m in j["metablocks"]]
            assert [m.is_dirty for m in seg.metablocks] == [m["dirty_bits"] != 0 for m in j["metablocks"]]
            info = scan.slots[seg.slot]
            assert info.in_log == j["in_log"]
            assert (info.id, info.length, info.stored_checksum) == (seg.id, seg.length, seg.stored_checksum)
            if info.state is not wbkit.SlotState.EMPTY:
                assert info.state is seg.state
            expected = {k: v for k, v in j.items() if k != "in_log"}
            assert seg.to_json() == expected
            again = c.slot(seg.slot)
            assert (again.id, again.stored_checksum) == (seg.id, seg.stored_checksum)


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_segment_by_id_agrees(images, compressed):
    cache = images.get(compressed)
    with wbkit.open(cache) as c:
        scan = c.scan()
        for entry in scan.log:
            seg = c.segment(id=entry.id)
            j = wbdump_json(cache, "--segment", entry.id)["segment"]
            assert seg.slot == entry.slot == j["slot"]
            assert seg.id == entry.id == j["id"]
            assert seg.length == entry.length == j["length"]
            assert seg.checksum_ok and j["checksum_ok"]


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_metablocks_agree(images, compressed):
    cache = images.get(compressed)
    with wbkit.open(cache) as c:
        c.scan()
        mine = [(m.segment_id, m.slot, m.index, m.sector, m.dirty_bits) for m in c.metablocks()]
    theirs = [(m["segment_id"], m["slot"], m["index"], m["sector"], m["dirty_bits"])
              for m in wbdump_json(cache, "--metablocks")["metablocks"]]
    assert mine == theirs


def sample_sectors(scan, count=12):
    """Sectors worth asking about: cached ones (first and last decided sector
    of spread-out index entries) and ones next to them that the cache lacks."""
    out = set()
    n = len(scan.index)
    for k in range(0, n, max(1, n // count)):
        e = scan.index[k]
        bits = [b for b in range(8) if e.sectors >> b & 1]
        out.update({e.block_sector + bits[0], e.block_sector + bits[-1]})
    if n:
        out.add(scan.index[-1].block_sector + 8 * 1000)
    out.update({0, 7})
    return sorted(out)


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_block_agrees(images, compressed):
    cache = images.get(compressed)
    backing = backing_of(compressed)
    backing = images.get(backing) if backing else None
    raw = cache.read_bytes()
    raw_backing = backing.read_bytes() if backing else None
    with wbkit.open(cache, backing=backing) as c:
        scan = c.scan()
        asked_in_cache = 0
        for sector in sample_sectors(scan):
            b = c.block(sector)
            j = wbdump_json(cache, "--block", sector)["block"]
            assert b.to_json() == j
            assert b.backing_sector == sector
            assert b.in_cache == j["in_cache"]
            if b.in_cache:
                asked_in_cache += 1
                assert (b.segment_id, b.slot, b.block_index, b.block_sector, b.dirty, b.cache_offset) == (
                    j["segment_id"], j["slot"], j["block_index"], j["block_sector"], j["dirty"], j["cache_offset"])
                assert b.data == raw[b.cache_offset:b.cache_offset + 512]
                assert not b.from_backing
                source = scan.find_sector(sector)
                assert source is not None and source.segment_id == b.segment_id
            else:
                assert scan.find_sector(sector) is None
                assert b.segment_id is None and b.cache_offset is None
                if raw_backing is not None and (sector + 1) * 512 <= len(raw_backing):
                    assert b.from_backing
                    assert b.data == raw_backing[sector * 512:(sector + 1) * 512]
        assert asked_in_cache > 0 or scan.dirty_sectors == 0


@pytest.mark.parametrize("compressed", [p for p in CACHES if (p.parent / "status.kv").exists()], ids=fixture_id)
def test_upstream_status_agrees(images, compressed):
    """The upstream target's own view of the log (status.kv's log.* lines)."""
    kv = dict(line.split("=", 1) for line in (compressed.parent / "status.kv").read_text().split() if "=" in line)
    with wbkit.open(images.get(compressed)) as c:
        scan = c.scan()
        assert scan.last_flushed_id == int(kv["log.last_flushed_id"])
        assert scan.last_writeback_id == int(kv["log.last_writeback_id"])
        if "log.dirty_blocks" in kv:
            assert scan.dirty_blocks == int(kv["log.dirty_blocks"])
        assert scan.superblock.record == int(kv["sb_record"])
        assert scan.geometry.nr_segments == int(kv["nr_segments"])


def test_fixtures_exist():
    """The agreement tests above are only as good as the fixtures they run on."""
    assert CACHES, f"no cache.img.zst under {FIXTURES}"
