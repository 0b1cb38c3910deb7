"""docs/FORMAT.md's replay rules written out plainly over a cache image's
bytes, without the library: what test_fixtures holds wbdump's log facts
against, so that the expectation is not wbdump's own output. Steps 1-4 of
"Replay", the trust record's gate on the torn-rewrite and lost-in-flight
rules, and the newest entry per sector; nothing of the scan's reading or
the index."""
import struct

from craft import BLOCK, MAGIC, METABLOCK_AREA, METABLOCK_SIZE, RECORD_OFFSET, SECTOR, SEGMENT_SIZE, \
    SUPERBLOCK_SIZE, crc32c

TRUST_OFFSET = 8 * SECTOR
TRUST_MAGIC = 0x72544257
REWRITE_WINDOW = 8


def log_facts(image: bytes) -> dict:
    """The facts of wbdump's "log" object that the rules decide."""
    return _replay(image)[0]


def dirty_sources(image: bytes) -> dict:
    """Backing sector -> byte offset on the cache of the data replay writes there."""
    return _replay(image)[1]


def checksum_holds(segment: bytes, length: int, checksum: int) -> bool:
    """The CRC over [512, 4096 * (length + 1)) as the bytes are, or with the
    header's bytes from metablock `length` on read as zero: an append in
    place whose header (id, checksum, length) did not land."""
    if crc32c(segment[METABLOCK_AREA:]) == checksum:
        return True
    tail = METABLOCK_AREA + METABLOCK_SIZE * length
    return any(segment[tail:BLOCK]) and crc32c(segment[METABLOCK_AREA:tail] + bytes(BLOCK - tail) + segment[BLOCK:]) == checksum


def _replay(image: bytes):
    nr = (len(image) - SUPERBLOCK_SIZE) // SEGMENT_SIZE
    assert nr >= 1 and struct.unpack_from("<I", image, 0)[0] == MAGIC
    record = struct.unpack_from("<Q", image, RECORD_OFFSET)[0]
    trust_record = struct.unpack_from("<I", image, TRUST_OFFSET)[0] == TRUST_MAGIC

    def slot(k):
        off = SUPERBLOCK_SIZE + k * SEGMENT_SIZE
        seg_id, checksum, length = struct.unpack_from("<QIB", image, off)
        return off, seg_id, length, length <= 127 and checksum_holds(image[off:off + BLOCK * (length + 1)], length,
                                                                     checksum)

    slots = [slot(k) for k in range(nr)]
    max_id = max(s[1] for s in slots)
    facts = {"max_id": max_id, "segments": 0, "oldest_id": 0, "newest_id": 0, "last_flushed_id": 0,
             "last_writeback_id": 0, "discarded_segments": 0, "dirty_sectors": 0,
             "stop": {"reason": "empty-log", "slot": None, "segment_id": None}}
    if max_id == 0:
        return facts, {}

    applied, rewritten, stop = [], 0, None
    for step in range(nr):
        k = (max_id % nr + step) % nr
        off, seg_id, length, good = slots[k]
        if seg_id == 0:
            continue
        if stop is not None:
            facts["discarded_segments"] += good
            continue
        # A segment write lost in flight, on a log another writer left only:
        # among the newest positions behind the newest id (not the last
        # step, at most 7 before it), the id one lap older than the one
        # expected there, good or not: skipped like an empty slot.
        if (not trust_record and step + 1 < nr and step + REWRITE_WINDOW >= nr
                and max_id - seg_id == 2 * nr - 1 - step):
            continue
        if good:
            applied.append((off, seg_id, length))
            continue
        # A torn rewrite, on a log another writer left only: the id one lap
        # behind what a writer puts at this step, early in a filled ring.
        if (not trust_record and max_id >= nr and step < REWRITE_WINDOW and step + 1 < nr
                and max_id - seg_id == nr - 1 - step):
            applied, rewritten = [], seg_id
            continue
        stop = (k, seg_id)

    lf = max(applied[-1][1] if applied else 0, rewritten)
    lw = max(lf - nr if lf > nr else 0, min(record, lf), rewritten)
    newest = {}  # backing sector -> (segment id, dirty, cache offset of its data)
    for off, seg_id, length in applied:
        for i in range(length):
            sector, bits = struct.unpack_from("<QB", image, off + METABLOCK_AREA + METABLOCK_SIZE * i)
            for j in range(8):
                if bits and not (bits >> j) & 1:
                    continue  # a partial entry leaves this sector to older ones
                newest[sector + j] = (seg_id, bits != 0, off + BLOCK * (i + 1) + SECTOR * j)
    facts.update({
        "segments": len(applied),
        "oldest_id": applied[0][1] if applied else 0,
        "newest_id": applied[-1][1] if applied else 0,
        "last_flushed_id": lf,
        "last_writeback_id": lw,
        "dirty_sectors": sum(1 for seg_id, dirty, _ in newest.values() if dirty and seg_id > lw),
        "stop": {"reason": "checksum-mismatch" if stop else "end-of-ring",
                 "slot": stop[0] if stop else None, "segment_id": stop[1] if stop else None},
    })
    return facts, {sector: at for sector, (seg_id, dirty, at) in newest.items() if dirty and seg_id > lw}
