"""The module's own surface: enums, checksums, reprs, stubs, streaming."""

import ast
import enum
import inspect
import pathlib
import re
import time

import pytest

import wbkit
import wbkit.testing
from wbkit import _wbkit
from conftest import make_image, pattern

PACKAGE = pathlib.Path(wbkit.__file__).parent


def test_severity_is_an_ordered_enum():
    assert issubclass(wbkit.Severity, enum.IntEnum)
    assert wbkit.Severity.INFO < wbkit.Severity.WARNING < wbkit.Severity.ERROR
    assert [s.name for s in wbkit.Severity] == ["INFO", "WARNING", "ERROR"]


def test_finding_codes_are_the_library_table():
    assert issubclass(wbkit.FindingCode, enum.Enum)
    table = wbkit.all_findings()
    assert len(table) == len(wbkit.FindingCode) >= 20
    for info in table:
        assert info.code is wbkit.FindingCode(info.name)
        assert info.code.name == info.name.upper().replace("-", "_")
        assert isinstance(info.severity, wbkit.Severity)
        assert info.summary
        assert wbkit.finding_info(info.code).name == info.name
    assert wbkit.finding_info(wbkit.FindingCode.TORN_NEWEST_SEGMENT).severity is wbkit.Severity.INFO
    assert wbkit.finding_info(wbkit.FindingCode.CHECKSUM_MISMATCH).severity is wbkit.Severity.ERROR


def test_slot_states_and_stop_reasons_are_enums():
    assert wbkit.SlotState("checksum-mismatch") is wbkit.SlotState.CHECKSUM_MISMATCH
    assert {r.value for r in wbkit.StopReason} == {"end-of-ring", "empty-log", "checksum-mismatch", "unreadable",
                                                   "not-verified"}
    with pytest.raises(TypeError):
        wbkit.finding_info("checksum-mismatch")  # a plain string is not a FindingCode


def test_crc32c_vectors():
    assert wbkit.crc32c(b"123456789") == 0xE3069283
    assert wbkit.crc32c(bytearray(b"123456789")) == 0xE3069283
    assert wbkit.crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283
    assert wbkit.crc32c(b"") == 0
    assert wbkit.segment_checksum(bytes(4096), 0) == 0x0890BE15 == 143703573
    c = wbkit.Crc32c()
    c.update(b"1234")
    c.update(b"56789")
    assert c.finish() == 0xE3069283
    c.update(b"123456789")
    assert c.finish() == 0xE3069283  # finish() starts again from empty


def test_crc32c_of_numpy_array():
    np = pytest.importorskip("numpy")
    a = np.frombuffer(b"123456789", dtype=np.uint8)
    assert wbkit.crc32c(a) == 0xE3069283
    with pytest.raises(ValueError):
        wbkit.crc32c(np.zeros((4, 4), dtype=np.uint8)[:, ::2])


def test_parsers_round_trip(written_cache):
    cache, _ = written_cache
    raw = cache.read_bytes()
    sb = wbkit.parse_superblock_header(raw[:512])
    assert sb.magic == wbkit.MAGIC and sb.magic_ok and not sb.rest_nonzero
    assert wbkit.parse_superblock_record(raw[wbkit.SB_RECORD_OFFSET:]) == 0
    h = wbkit.parse_segment_header(raw[wbkit.SUPERBLOCK_SIZE:wbkit.SUPERBLOCK_SIZE + 4096])
    assert h.id == 1 and h.length == 127 and h.length_valid and h.usable_length == 127
    assert len(h.metablocks) == 127 and h.written_bytes == 128 * 4096
    seg = raw[wbkit.SUPERBLOCK_SIZE:wbkit.SUPERBLOCK_SIZE + wbkit.SEGMENT_SIZE]
    assert wbkit.segment_checksum(seg, h.length) == h.checksum
    g = wbkit.Geometry.for_cache_bytes(len(raw))
    assert g.nr_segments == 8
    assert g.slot_offset(3) == wbkit.SUPERBLOCK_SIZE + 3 * wbkit.SEGMENT_SIZE
    assert g.data_block_offset(1, 0) == wbkit.SUPERBLOCK_SIZE + wbkit.SEGMENT_SIZE + 4096
    assert g.slot_of_id(9) == 0 and g.slot_of_id(8) == 7
    assert g == wbkit.Geometry.for_cache_bytes(len(raw)) and hash(g) == hash(wbkit.Geometry.for_cache_bytes(len(raw)))


def test_written_cache_reads_back(written_cache):
    """What the LogWriter wrote is what the module reports."""
    cache, backing = written_cache
    with wbkit.open(cache, backing=backing) as c:
        scan = c.scan()
        assert scan.max_id == 5
        assert scan.stop_reason is wbkit.StopReason.CHECKSUM_MISMATCH
        assert [f.code for f in scan.findings] == [wbkit.FindingCode.TORN_NEWEST_SEGMENT]
        assert not scan.damage
        assert [s.id for s in scan.log] == [1, 2, 3, 4]
        # A partial write over block 24 (first written by segment 1): the
        # writer merges the older dirty sectors into the new copy, as the target does.
        assert c.block(26).segment_id == 4 and c.block(27).segment_id == 4
        assert c.block(24).segment_id == 4 and c.block(31).segment_id == 4
        assert c.block(26).data == pattern(1024, 7)[:512]
        assert c.block(24).data == pattern(4096, 1)[:512]
        assert c.block(16).in_cache is False and c.block(16).from_backing
        # The clean entry makes the backing device hold block 4000.
        assert c.block(4000).in_cache is False or c.block(4000).dirty is False
        newest = c.segment(id=5)
        assert newest.state is wbkit.SlotState.CHECKSUM_MISMATCH and not newest.checksum_ok
        assert newest.computed_checksum != newest.stored_checksum


def every_object(written_cache):
    cache, backing = written_cache
    c = wbkit.open(cache, backing=backing)
    scan = c.scan()
    plan = c.replay_plan()
    extent = next(iter(plan))
    seg = c.slot(0)
    return [c, c.geometry, c.superblock, scan, scan.findings, scan.findings[0], scan.findings[0].place, scan.slots,
            scan.slots[0], scan.log, scan.log[0], scan.index, scan.index[0], iter(scan.index), iter(scan.log),
            iter(scan.slots), iter(scan.findings), seg, seg.header, seg.metablocks[0], c.segments(), c.metablocks(),
            next(c.metablocks()), c.block(16), c.block(10**6), plan, plan.summary, extent, extent.sources[0],
            plan.segment_uses()[0], plan.extents(), wbkit.all_findings()[0], wbkit.Crc32c(),
            wbkit.check_segment_checksum(bytes(4096)), wbkit.parse_superblock_header(bytes(512)), wbkit.testing.LogWriter(make_image(cache.parent / "w.img", 4 << 20))]


def test_every_object_has_a_repr(written_cache):
    objects = every_object(written_cache)
    for obj in objects:
        text = repr(obj)
        assert not re.search(r"object at 0x", text), text
        assert type(obj).__name__.split("Iterator")[0][:4] in text or "wbkit" in text, text
    names = {type(o).__name__ for o in objects}
    public_classes = {n for n, v in vars(_wbkit).items() if inspect.isclass(v) and not issubclass(v, (BaseException, enum.Enum))}
    missing = public_classes - names - {"Geometry"}
    assert not missing, f"add these classes to every_object(): {missing}"


def stub_names(path):
    tree = ast.parse(path.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            members[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | {
                n.target.id for n in node.body if isinstance(n, ast.AnnAssign)} | {
                t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets}
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            top.add(node.target.id)
    return top, members


def public(names):
    return {n for n in names if not n.startswith("_")}


def test_stubs_match_the_module():
    top, members = stub_names(PACKAGE / "_wbkit.pyi")
    assert public(dir(_wbkit)) == public(top)
    for name, stubbed in members.items():
        if name.startswith("_"):
            continue  # a generic base of the stub (_View, _Iterator), not a class of the module
        cls = getattr(_wbkit, name)
        if issubclass(cls, enum.Enum):
            assert {m.name for m in cls} == stubbed, name
            continue
        if issubclass(cls, BaseException):
            continue
        actual = public(n for n in vars(cls))
        assert actual == public(stubbed), f"{name}: stub lacks {actual - stubbed}, has extra {stubbed - actual}"
    top, members = stub_names(PACKAGE / "testing.pyi")
    assert public(vars(wbkit.testing.LogWriter)) == public(members["LogWriter"])


def test_package_reexports_everything():
    assert set(wbkit.__all__) <= set(dir(wbkit))
    assert public(dir(_wbkit)) - set(wbkit.__all__) <= {"testing", "FindingListIterator", "SlotListIterator",
                                                        "LogSegmentListIterator", "SectorIndexIterator"}
    assert (PACKAGE / "py.typed").exists()


def test_docstrings():
    for name in ("open", "crc32c", "Cache", "LogScan", "Segment", "Block", "ReplayPlan", "Finding", "FindingCode",
                 "Severity"):
        assert (getattr(wbkit, name).__doc__ or "").strip(), name
    for name in ("scan", "segments", "slot", "segment", "block", "metablocks", "replay_plan"):
        assert len(getattr(wbkit.Cache, name).__doc__ or "") > 40, name
    assert "open" in (wbkit.__doc__ or "")


def test_views_are_sequences_not_copies(written_cache):
    cache, _ = written_cache
    with wbkit.open(cache) as c:
        scan = c.scan()
    index = scan.index
    assert not isinstance(index, list)
    assert len(index) > 300
    assert index[-1].block_sector == list(index)[-1].block_sector
    assert [e.block_sector for e in index[2:5]] == [index[i].block_sector for i in range(2, 5)]
    with pytest.raises(IndexError):
        index[len(index)]
    assert sorted(e.block_sector for e in index) == [e.block_sector for e in index]


def test_iteration_streams_on_a_large_sparse_cache(tmp_path):
    """16 GiB sparse cache, 32767 slots: the first segments arrive at once,
    without the module reading every slot first."""
    path = make_image(tmp_path / "big.img", 16 << 30)
    with wbkit.open(path) as c:
        assert c.geometry.nr_segments == 32766
        start = time.monotonic()
        it = c.segments()
        first = [next(it) for _ in range(3)]
        assert time.monotonic() - start < 2.0
        assert [s.slot for s in first] == [0, 1, 2]
        assert all(s.state is wbkit.SlotState.EMPTY for s in first)
        assert repr(it) == "<wbkit.SegmentIterator at slot 3 of 32766>"


def test_metablock_iteration_is_lazy(written_cache):
    cache, _ = written_cache
    with wbkit.open(cache) as c:
        it = c.metablocks()
        first = next(it)
        assert (first.segment_id, first.index) == (1, 0)
        assert "log segment 0 of 4" in repr(it)
        rest = list(it)
        assert len(rest) + 1 == sum(s.length for s in c.scan().log)
