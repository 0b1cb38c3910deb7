"""Library errors arrive as Python's own exception types."""

import errno
import os

import pytest

import wbkit
import wbkit.testing
from conftest import make_image


def test_missing_file_is_file_not_found(tmp_path):
    path = tmp_path / "absent.img"
    with pytest.raises(FileNotFoundError) as info:
        wbkit.open(path)
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == str(path)
    assert "cannot open" in str(info.value)


def test_missing_backing_is_file_not_found(written_cache, tmp_path):
    cache, _ = written_cache
    with pytest.raises(FileNotFoundError) as info:
        wbkit.open(cache, backing=tmp_path / "no-backing")
    assert info.value.filename == str(tmp_path / "no-backing")


def test_directory_is_os_error(tmp_path):
    with pytest.raises(OSError) as info:
        wbkit.open(tmp_path)
    assert info.value.filename == str(tmp_path)
    assert "directory" in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_permission_error(tmp_path):
    path = make_image(tmp_path / "locked.img", 4 << 20)
    path.chmod(0)
    with pytest.raises(PermissionError) as info:
        wbkit.open(path)
    assert info.value.errno == errno.EACCES


def test_read_error_after_the_file_shrank_is_eio(written_cache):
    """The device's size is fixed at open; reads past the new end fail with EIO."""
    cache, _ = written_cache
    with wbkit.open(cache) as c:
        c.scan()
        # Slots 0 and 1 stay whole, slot 2 keeps its header only, slots 3.. are gone.
        os.truncate(cache, wbkit.SUPERBLOCK_SIZE + 2 * wbkit.SEGMENT_SIZE + 4096)
        with pytest.raises(OSError) as info:
            list(c.metablocks())
        assert info.value.errno == errno.EIO
        assert info.value.filename == str(cache)
        # Damage, not an exception, from the scan: unreadable slots are findings.
        scan = c.scan()
        codes = {f.code for f in scan.findings}
        assert {wbkit.FindingCode.HEADER_UNREADABLE, wbkit.FindingCode.DATA_UNREADABLE} <= codes
        assert scan.stop_reason is wbkit.StopReason.UNREADABLE
        # max_id is now 3, so the walk starts at slot 3 (the oldest), which is unreadable.
        assert scan.stop_slot == 3 and len(scan.log) == 0
        assert scan.slots[2].state is wbkit.SlotState.DATA_UNREADABLE
        seg = c.slot(3)
        assert seg.state is wbkit.SlotState.HEADER_UNREADABLE and not seg.header_readable and seg.error


@pytest.mark.parametrize("call", [
    lambda c: c.slot(-1),
    lambda c: c.slot(10**6),
    lambda c: c.slot(2**64),
    lambda c: c.segment(0),
    lambda c: c.segment(id=10**9),
    lambda c: c.segment(-5),
    lambda c: c.block(-1),
    lambda c: c.block(2**64),
    lambda c: c.geometry.slot_offset(c.geometry.nr_segments),
    lambda c: c.geometry.data_block_offset(0, 127),
    lambda c: c.geometry.slot_of_id(0),
    lambda c: c.scan().find_sector(-8),
], ids=["slot-negative", "slot-past-end", "slot-huge", "segment-0", "segment-absent", "segment-negative",
        "block-negative", "block-huge", "slot-offset-past-end", "block-index-127", "slot-of-id-0", "find-negative"])
def test_bad_arguments_are_value_errors(written_cache, call):
    cache, _ = written_cache
    with wbkit.open(cache) as c:
        with pytest.raises(ValueError):
            call(c)


def test_closed_cache_raises_value_error(written_cache):
    cache, _ = written_cache
    c = wbkit.open(cache)
    scan = c.scan()
    segments = c.segments()
    c.close()
    assert c.closed
    c.close()  # twice is harmless
    for call in (c.scan, lambda: c.slot(0), lambda: c.block(0), lambda: next(segments), c.metablocks,
                 lambda: c.superblock, c.replay_plan):
        with pytest.raises(ValueError, match="closed"):
            call()
    # A scan made before stays usable: it does not need the device.
    assert len(scan.log) > 0 and scan.index[0].segment_id > 0


def test_context_manager_closes(written_cache):
    cache, _ = written_cache
    with wbkit.open(cache) as c:
        assert not c.closed
    assert c.closed
    with pytest.raises(ValueError):
        c.scan()


@pytest.mark.parametrize("call", [
    lambda: wbkit.parse_segment_header(b"\0" * 4095),
    lambda: wbkit.parse_superblock_header(b"\0" * 100),
    lambda: wbkit.parse_superblock_record(b"\0" * 7),
    lambda: wbkit.segment_checksum(b"\0" * 4096, 1),
    lambda: wbkit.segment_checksum(b"\0" * (128 * 4096), 128),
    lambda: wbkit.Geometry.for_cache_bytes(-1),
], ids=["header-short", "sb-short", "record-short", "checksum-short", "checksum-length", "geometry-negative"])
def test_short_buffers_are_value_errors(call):
    with pytest.raises(ValueError):
        call()


def test_wrong_types_are_type_errors(written_cache):
    cache, _ = written_cache
    with pytest.raises(TypeError):
        wbkit.crc32c("text is not bytes")
    with wbkit.open(cache) as c:
        with pytest.raises(TypeError):
            c.slot("0")


def test_log_writer_errors(tmp_path):
    cache = make_image(tmp_path / "c.img", wbkit.SUPERBLOCK_SIZE + 2 * wbkit.SEGMENT_SIZE)
    with wbkit.testing.LogWriter(cache) as w:
        with pytest.raises(ValueError):  # the library's UsageError
            w.write(0, b"x" * 100)
        with pytest.raises(ValueError):
            w.write_clean(3, bytes(4096))
        with pytest.raises(ValueError):
            w.tear_segment(99)
        # Wrapping over dirty data without a backing device: the library's Error.
        with pytest.raises(wbkit.Error) as info:
            for i in range(3 * 127):
                w.write(8 * i, bytes(4096))
            w.flush()
        assert isinstance(info.value, RuntimeError)
    with pytest.raises(ValueError):
        w.flush()
    tiny = make_image(tmp_path / "tiny.img", 4096)
    with pytest.raises(wbkit.Error):
        wbkit.testing.LogWriter(tiny)


def test_exception_hierarchy():
    assert issubclass(wbkit.Error, RuntimeError)
    assert issubclass(wbkit.RefusedError, wbkit.Error)
