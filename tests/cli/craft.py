"""Crafted cache images for the command-line tests: raw segments with any
id, metablock sector and dirty bits (unaligned ones, sectors near 2**64),
which the log writer never makes. Layout from format/wbkit_format.h."""
import struct

SECTOR = 512
BLOCK = 4096
SUPERBLOCK_SIZE = 1 << 20
SEGMENT_SIZE = 512 << 10
MAGIC = 0x57427374
RECORD_OFFSET = 2047 * SECTOR
METABLOCK_AREA = 512
METABLOCK_SIZE = 16


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def block_data(tag: int, sector: int) -> bytes:
    """A 4 KiB block whose every sector says which write it came from and where."""
    out = bytearray()
    for s in range(8):
        stamp = f"tag={tag} sector={sector + s}\n".encode()
        out += (stamp * (SECTOR // len(stamp) + 1))[:SECTOR]
    return bytes(out)


def make_cache(path, nr_slots, segments, record=0, magic=True):
    """segments: list of (id, [(sector, dirty_bits, data)]); segment id N goes
    to slot (N - 1) % nr_slots unless given as (id, metablocks, slot)."""
    image = bytearray(SUPERBLOCK_SIZE + nr_slots * SEGMENT_SIZE)
    if magic:
        image[0:4] = struct.pack("<I", MAGIC)
    image[RECORD_OFFSET:RECORD_OFFSET + 8] = struct.pack("<Q", record)
    for entry in segments:
        seg_id, metablocks = entry[0], entry[1]
        slot = entry[2] if len(entry) > 2 else (seg_id - 1) % nr_slots
        off = SUPERBLOCK_SIZE + slot * SEGMENT_SIZE
        for i, (sector, dirty, data) in enumerate(metablocks):
            mb = off + METABLOCK_AREA + METABLOCK_SIZE * i
            image[mb:mb + 9] = struct.pack("<QB", sector, dirty)
            image[off + BLOCK * (i + 1):off + BLOCK * (i + 2)] = data
        length = len(metablocks)
        checksum = crc32c(bytes(image[off + METABLOCK_AREA:off + BLOCK * (length + 1)]))
        image[off:off + 13] = struct.pack("<QIB", seg_id, checksum, length)
    with open(path, "wb") as f:
        f.write(image)
    return path


def cut_append(path, nr_slots, seg_id, committed):
    """An append in place cut between its two writes (docs/FORMAT.md,
    "Checksum"): segment seg_id, written whole by make_cache, gets back the
    first header sector the commit at length `committed` wrote: that length,
    and the checksum of that prefix with the metablock area zero past it.
    Its metablock area and data blocks still name and hold the rest."""
    with open(path, "r+b") as f:
        off = SUPERBLOCK_SIZE + ((seg_id - 1) % nr_slots) * SEGMENT_SIZE
        f.seek(off)
        segment = f.read(BLOCK * (committed + 1))
        tail = METABLOCK_AREA + METABLOCK_SIZE * committed
        checksum = crc32c(segment[METABLOCK_AREA:tail] + bytes(BLOCK - tail) + segment[BLOCK:])
        f.seek(off)
        f.write(struct.pack("<QIB", seg_id, checksum, committed))
    return path
