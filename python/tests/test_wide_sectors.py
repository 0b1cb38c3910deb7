"""Byte offsets of sectors near the top of the 64-bit range are Python
integers, never wrapped: a metablock at sector 2**55 is at byte 2**64."""
import struct

import wbkit


def image_with_blocks(tmp_path, sectors):
    data = bytearray(wbkit.SUPERBLOCK_SIZE + 2 * wbkit.SEGMENT_SIZE)
    data[0:4] = struct.pack("<I", wbkit.MAGIC)
    off = wbkit.SUPERBLOCK_SIZE
    for i, s in enumerate(sectors):
        data[off + 512 + 16 * i:off + 512 + 16 * i + 9] = struct.pack("<QB", s, 0xFF)
        data[off + 4096 * (i + 1):off + 4096 * (i + 2)] = bytes([i + 1]) * 4096
    seg = bytes(data[off:off + 4096 * (len(sectors) + 1)])
    data[off:off + 13] = struct.pack("<QIB", 1, wbkit.segment_checksum(seg, len(sectors)), len(sectors))
    path = tmp_path / "wide.img"
    path.write_bytes(bytes(data))
    return path


def test_backing_offset_of_sectors_past_2_55_does_not_wrap(tmp_path):
    sectors = [2**55, 2**61, 2**64 - 8, 8]
    with wbkit.open(image_with_blocks(tmp_path, sectors)) as cache:
        extents = list(cache.replay_plan())
    assert sorted(e.backing_sector for e in extents) == sorted(sectors)
    for e in extents:
        assert e.backing_offset == e.backing_sector * 512
        assert e.bytes == e.sectors * 512
