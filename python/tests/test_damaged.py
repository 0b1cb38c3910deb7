"""A damaged, garbage or truncated image never crashes the interpreter: each
case runs every reader of the module in a child interpreter, which must exit
normally and report what it found."""

import os
import random
import struct
import subprocess

import pytest

import wbkit
from conftest import compressed_fixtures, make_image, run_python

# Touches everything that reads the image or the scan.
EXERCISE = r"""
import sys, wbkit
path = sys.argv[1]
with wbkit.open(path) as c:
    repr(c); repr(c.geometry); repr(c.superblock)
    for verify in (True, False):
        scan = c.scan(verify=verify)
        repr(scan); scan.summary(); scan.to_json()
        for f in scan.findings: repr(f); str(f); repr(f.place)
        for s in scan.slots: repr(s)
        for s in scan.log: repr(s)
        for e in scan.index: repr(e)
    segments = 0
    for seg in c.segments():
        repr(seg); seg.to_json(); segments += 1
        for m in seg.metablocks: repr(m)
    assert segments == c.geometry.nr_segments
    for k in range(min(3, c.geometry.nr_segments)):
        c.slot(k)
    scan = c.scan()
    for m in c.metablocks(): repr(m)
    for sector in [0, 7, 8, 2**40, 2**64 - 1] + [e.block_sector for e in scan.index[:50]]:
        b = c.block(sector); repr(b); b.to_json()
    plan = c.replay_plan() if sys.argv[2:] != ["noplan"] else None
    for e in plan or []:
        repr(e)
        for s in e.sources: repr(s)
    if plan: plan.segment_uses(); plan.shortfalls(); plan.to_json()
    print("OK", len(scan.findings), " ".join(sorted({f.name for f in scan.findings})))
"""


def exercise(path, *flags, timeout=120):
    done = run_python(EXERCISE, path, *flags, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr[-3000:]}"
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("OK ")
    return set(last.split()[2:])


@pytest.mark.parametrize("size", [0, 1, 511, 512, 4096, wbkit.SUPERBLOCK_SIZE - 1, wbkit.SUPERBLOCK_SIZE,
                                  wbkit.SUPERBLOCK_SIZE + wbkit.SEGMENT_SIZE - 1])
def test_too_small(tmp_path, size):
    path = tmp_path / "small.img"
    path.write_bytes(bytes(size))
    assert "cache-too-small" in exercise(path)


@pytest.mark.parametrize("seed", range(4))
def test_random_garbage(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "garbage.img"
    path.write_bytes(rng.randbytes(wbkit.SUPERBLOCK_SIZE + rng.randint(1, 6) * wbkit.SEGMENT_SIZE + rng.randint(0, 4095)))
    names = exercise(path)
    assert "bad-magic" in names


def formatted_garbage(path, rng, slots=6):
    """A valid magic over random segment headers: the parser sees ids, lengths
    up to 255 and sectors up to 2**64 - 1."""
    data = bytearray(rng.randbytes(wbkit.SUPERBLOCK_SIZE + slots * wbkit.SEGMENT_SIZE))
    data[0:512] = struct.pack("<I", wbkit.MAGIC) + bytes(508)
    for k in range(slots):
        off = wbkit.SUPERBLOCK_SIZE + k * wbkit.SEGMENT_SIZE
        data[off:off + 8] = struct.pack("<Q", rng.choice([k + 1, rng.getrandbits(64), 2**64 - 1, 1]))
        data[off + 12] = rng.choice([0, 1, 127, 128, 255])
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("seed", range(4))
def test_formatted_garbage(tmp_path, seed):
    path = tmp_path / "formatted.img"
    formatted_garbage(path, random.Random(seed))
    names = exercise(path)
    assert "bad-magic" not in names
    assert names & {"checksum-mismatch", "torn-newest-segment", "length-too-large", "slot-mismatch",
                    "header-padding-nonzero"}


def wild_image(tmp_path):
    """Segments that pass their checksum but name absurd sectors, up to 2**64 - 1."""
    slots = 4
    data = bytearray(wbkit.SUPERBLOCK_SIZE + slots * wbkit.SEGMENT_SIZE)
    data[0:4] = struct.pack("<I", wbkit.MAGIC)
    sectors = [2**64 - 8, 2**64 - 1, 3, 0, 2**63, 8]
    for k in range(slots):
        off = wbkit.SUPERBLOCK_SIZE + k * wbkit.SEGMENT_SIZE
        length = len(sectors)
        for i, s in enumerate(sectors):
            data[off + 512 + 16 * i:off + 512 + 16 * i + 9] = struct.pack("<QB", s, 0xFF if i % 2 else 0x0F)
        for i in range(length):
            data[off + 4096 * (i + 1):off + 4096 * (i + 2)] = bytes([k * 16 + i]) * 4096
        seg = bytes(data[off:off + 4096 * (length + 1)])
        data[off:off + 13] = struct.pack("<QIB", k + 1, wbkit.segment_checksum(seg, length), length)
    path = tmp_path / "wild.img"
    path.write_bytes(bytes(data))
    return path


def test_valid_checksums_over_wild_metablocks(tmp_path):
    slots = 4
    path = wild_image(tmp_path)
    names = exercise(path, "noplan")
    assert "metablock-sector-unaligned" in names
    with wbkit.open(path) as c:
        scan = c.scan()
        assert scan.stop_reason is wbkit.StopReason.END_OF_RING
        assert len(scan.log) == slots
        top = c.block(2**64 - 1)
        assert top.in_cache and top.segment_id == slots


def test_replay_plan_of_wild_metablocks_terminates(tmp_path):
    """Metablocks near 2**64 once made the plan's block count wrap and never end."""
    names = exercise(wild_image(tmp_path), timeout=20)
    assert "metablock-sector-unaligned" in names


@pytest.mark.parametrize("compressed", [p for p in compressed_fixtures() if p.name == "cache.img.zst"][:4],
                         ids=lambda p: p.parent.name)
def test_truncated_and_flipped_fixtures(images, tmp_path, compressed):
    original = images.get(compressed).read_bytes()
    rng = random.Random(len(original))
    cut = tmp_path / "cut.img"
    cut.write_bytes(original[: wbkit.SUPERBLOCK_SIZE + 2 * wbkit.SEGMENT_SIZE + 12345])
    exercise(cut)
    flipped = bytearray(original)
    for _ in range(200):  # headers and metablocks, where parsing decisions are made
        slot = rng.randrange(wbkit.Geometry.for_cache_bytes(len(original)).nr_segments)
        flipped[wbkit.SUPERBLOCK_SIZE + slot * wbkit.SEGMENT_SIZE + rng.randrange(4096)] ^= 1 << rng.randrange(8)
    path = tmp_path / "flipped.img"
    path.write_bytes(bytes(flipped))
    exercise(path)


def test_block_device_style_errors_do_not_crash(tmp_path):
    """A special file that is neither a regular file nor a block device."""
    done = run_python("import wbkit\ntry:\n    wbkit.open('/dev/null')\nexcept OSError as e:\n    print('OSError', e.filename)")
    assert done.returncode == 0, done.stderr
    assert "OSError /dev/null" in done.stdout
