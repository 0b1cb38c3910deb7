"""The replay plan: agrees with wbreplay, and applying its extents from Python
gives what the upstream target presented (logical.img) or what an independent
model of the replay rules (tests/cli/replay_model.py) says replay writes."""

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

import wbkit
import wbkit.testing
from conftest import build_dir, compressed_fixtures, fixture_id, make_image

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "cli"))
from replay_model import dirty_sources  # noqa: E402

CACHES = [p for p in compressed_fixtures() if p.name == "cache.img.zst" and (p.parent / "backing.img.zst").exists()]


def wbreplay(*args):
    # --force: a log the kernel refuses (corrupt-middle) is replayed as far
    # as the walk reads it, which is what the plan describes.
    cmd = [str(build_dir() / "tools" / "wbreplay" / "wbreplay"), "--force", *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), f"{cmd}: exit {done.returncode}: {done.stderr}"
    return done.stdout


def apply_plan(plan, cache_path, backing_copy):
    """Replays by hand, from the plan's extents: read each source on the cache,
    write it at its place in the extent."""
    written = 0
    with open(cache_path, "rb") as cache, open(backing_copy, "r+b") as backing:
        for extent in plan.extents():
            for s in extent.sources:
                cache.seek(s.cache_offset)
                data = cache.read(s.sectors * 512)
                assert len(data) == s.sectors * 512
                backing.seek((extent.backing_sector + s.extent_sector) * 512)
                backing.write(data)
                written += len(data)
    return written


def without_timings(doc):
    """Run times differ from run to run and a plan has none."""
    if isinstance(doc, dict):
        return {k: without_timings(v) for k, v in doc.items() if not k.endswith("seconds")}
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


def check_extents(plan, scan):
    previous_end = 0
    sectors = 0
    count = 0
    for extent in plan:
        count += 1
        assert extent.sectors > 0
        assert extent.bytes == extent.sectors * 512 <= plan.max_extent_bytes
        assert extent.backing_offset == extent.backing_sector * 512
        assert extent.backing_sector >= previous_end, "extents must be sorted and disjoint"
        previous_end = extent.backing_sector + extent.sectors
        covered = 0
        for s in extent.sources:
            assert s.extent_sector == covered, "sources cover the extent in order, without holes"
            covered += s.sectors
            # Every sector written is a dirty sector whose newest copy is this source.
            for k in range(s.sectors):
                sector = extent.backing_sector + s.extent_sector + k
                source = scan.find_sector(sector)
                assert source is not None and source.segment_id == s.segment_id
                bit = sector - source.block_sector
                assert source.dirty >> bit & 1
                assert s.cache_offset + 512 * k == source.cache_offset + 512 * bit
        assert covered == extent.sectors
        sectors += extent.sectors
    summary = plan.summary
    assert count == summary.extents
    assert sectors * 512 == summary.bytes
    assert sectors == summary.dirty_sectors - summary.skipped_sectors
    assert summary.dirty_sectors == scan.dirty_sectors
    assert summary.segments_in_log == len(scan.log)
    assert sum(plan.sectors_per_segment) == sectors


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_plan_agrees_with_wbreplay(images, compressed):
    cache, backing = images.get(compressed), images.get(compressed.parent / "backing.img.zst")
    with wbkit.open(cache, backing=backing) as c:
        plan = c.replay_plan()
        scan = c.scan()
    doc = json.loads(wbreplay("--cache", cache, "--backing", backing, "--dry-run", "--json"))
    # What --force overrode is the run's, not the plan's.
    doc.pop("forced")
    plan_doc = plan.to_json()
    assert plan_doc.pop("forced") == []
    assert without_timings(plan_doc) == without_timings(doc)
    s = plan.summary
    p = doc["plan"]
    assert (s.bytes, s.dirty_blocks, s.dirty_sectors, s.extents, s.segments_in_log, s.segments_contributing,
            s.segments_written_back, s.skipped_sectors) == (
        p["bytes"], p["dirty_blocks"], p["dirty_sectors"], p["extents"], p["segments_in_log"],
        p["segments_contributing"], p["segments_written_back"], p["skipped_sectors"])
    uses = plan.segment_uses()
    assert [(u.slot, u.id, u.reason, u.sectors_replayed, u.state.value) for u in uses] == [
        (j["slot"], j["id"], j["reason"], j["sectors_replayed"], j["state"]) for j in doc["segments"]]
    assert plan.shortfalls() == doc["not_replayed"]
    check_extents(plan, scan)


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_applying_the_plan_gives_the_logical_content(images, compressed, tmp_path):
    cache, backing = images.get(compressed), images.get(compressed.parent / "backing.img.zst")
    mine = tmp_path / "by-python.img"
    shutil.copyfile(backing, mine)
    mine.chmod(0o644)
    with wbkit.open(cache, backing=backing) as c:
        plan = c.replay_plan(max_extent_bytes=64 << 10)
        written = apply_plan(plan, cache, mine)
        assert written == plan.summary.bytes
    logical = compressed.parent / "logical.img.zst"
    if logical.exists():
        expected = images.get(logical)  # what the upstream target presented after its own replay
    else:
        # docs/FORMAT.md's rules over the image's bytes (tests/cli/replay_model.py),
        # not the library nor wbreplay: the dirty sectors' data onto the backing image.
        image = cache.read_bytes()
        content = bytearray(backing.read_bytes())
        for sector, at in dirty_sources(image).items():
            if (sector + 1) * 512 <= len(content):
                content[sector * 512:(sector + 1) * 512] = image[at:at + 512]
        expected = tmp_path / "by-model.img"
        expected.write_bytes(content)
    assert mine.read_bytes() == expected.read_bytes()
    if plan.summary.bytes:
        assert mine.read_bytes() != backing.read_bytes()


def test_plan_of_written_cache(written_cache):
    cache, backing = written_cache
    with wbkit.open(cache, backing=backing) as c:
        scan = c.scan()
        plan = c.replay_plan(max_extent_bytes=4096)
        check_extents(plan, scan)
        assert plan.summary.dirty_sectors > 0
        assert all(e.bytes <= 4096 for e in plan)

def test_merging_into_large_extents(tmp_path):
    cache = make_image(tmp_path / "c.img", wbkit.SUPERBLOCK_SIZE + 4 * wbkit.SEGMENT_SIZE)
    with wbkit.testing.LogWriter(cache) as w:
        w.write(800, bytes(range(256)) * 2 * 8 * 64)  # 64 contiguous blocks from sector 800
        w.flush()
    with wbkit.open(cache) as c:
        one_block = c.replay_plan(max_extent_bytes=4096)
        merged = c.replay_plan()
        assert one_block.summary.extents == 64
        assert [(e.backing_sector, e.sectors) for e in merged] == [(800, 512)]
        assert len(next(iter(merged)).sources) == 1  # one contiguous run on the cache too
        assert merged.summary.bytes == one_block.summary.bytes == 64 * 4096


def test_plan_skips_sectors_past_a_small_backing(tmp_path, written_cache):
    cache, _ = written_cache
    small = tmp_path / "small-backing.img"
    with open(small, "wb") as f:
        f.truncate(8 * 512 * 100)  # 100 blocks: most of the written data lies past it
    with wbkit.open(cache, backing=small) as c:
        plan = c.replay_plan()
        assert plan.backing_sectors == 800
        assert plan.summary.skipped_sectors > 0
        assert plan.summary.first_skipped_sector >= 800
        assert all(e.backing_sector + e.sectors <= 800 for e in plan)
        codes = {f.code for f in c.scan().findings}
        assert wbkit.FindingCode.METABLOCK_SECTOR_BEYOND_BACKING in codes


@pytest.mark.parametrize("bad", [0, 511, 4095, 4097, -4096])
def test_bad_extent_size_is_value_error(written_cache, bad):
    cache, _ = written_cache
    with wbkit.open(cache) as c:
        with pytest.raises(ValueError):
            c.replay_plan(max_extent_bytes=bad)
