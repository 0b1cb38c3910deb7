"""The examples run on the fixtures and write what they promise."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import wbkit
from conftest import compressed_fixtures, fixture_id

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
CACHES = [p for p in compressed_fixtures() if p.name == "cache.img.zst"]


def run(script, *args):
    return subprocess.run([sys.executable, str(EXAMPLES / script), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, MPLBACKEND="Agg"))


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    return width, height


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_dirty_map_writes_a_png(images, tmp_path, compressed):
    cache = images.get(compressed)
    args = [cache, "-o", tmp_path / "map.png"]
    backing = compressed.parent / "backing.img.zst"
    if backing.exists():
        args += ["--backing", images.get(backing)]
    done = run("dirty_map.py", *args)
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'map.png'}" in done.stdout
    width, height = png_size(tmp_path / "map.png")
    assert width > 600 and height > 400
    assert (tmp_path / "map.png").stat().st_size > 10_000


def test_dirty_map_bins_many_segment_ids(images, tmp_path):
    compressed = next(p for p in CACHES if "wrapped" in str(p))
    done = run("dirty_map.py", images.get(compressed), "-o", tmp_path / "m.png", "--rows", "3", "--columns", "17")
    assert done.returncode == 0, done.stderr
    png_size(tmp_path / "m.png")


def test_dirty_map_on_a_missing_cache(tmp_path):
    done = run("dirty_map.py", tmp_path / "absent.img", "-o", tmp_path / "m.png")
    assert done.returncode == 3
    assert "No such file" in done.stderr
    assert not (tmp_path / "m.png").exists()


@pytest.mark.parametrize("compressed", CACHES, ids=fixture_id)
def test_dirtiest_regions_adds_up(images, compressed):
    cache = images.get(compressed)
    done = run("dirtiest_regions.py", cache, "--region-size", "256K", "--top", "100000")
    assert done.returncode == 0, done.stderr
    with wbkit.open(cache) as c:
        scan = c.scan()
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\.\.\d+", line)]
    assert f"{scan.dirty_sectors} dirty sectors" in done.stdout
    if scan.dirty_sectors == 0:
        assert not rows
        return
    sizes = {"B": 1, "KiB": 1024, "MiB": 1 << 20}
    total = sum(float(r[2]) * sizes[r[3]] for r in rows)
    assert abs(total - scan.dirty_sectors * 512) < len(rows) * 52  # one decimal of KiB per row
    dirt = [float(r[2]) * sizes[r[3]] for r in rows]
    assert dirt == sorted(dirt, reverse=True)
    for r in rows:
        start, end = map(int, r[1].split(".."))
        assert end - start == 256 << 10 and start % (256 << 10) == 0
        oldest, newest = map(int, r[5].split(".."))
        assert scan.oldest_id <= oldest <= newest <= scan.newest_id


def test_dirtiest_regions_top(images):
    compressed = next(p for p in CACHES if "demo" in str(p))
    done = run("dirtiest_regions.py", images.get(compressed), "--top", "3")
    assert done.returncode == 0, done.stderr
    assert len([l for l in done.stdout.splitlines() if re.match(r"\s+\d+\s+\d+\.\.", l)]) == 3
    bad = run("dirtiest_regions.py", images.get(compressed), "--region-size", "100")
    assert bad.returncode == 2


def test_dirty_map_colour_bar_has_ticks_across_its_range():
    """A narrow range (one decade or less) still gets ticks at both ends and between."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("dirty_map", EXAMPLES / "dirty_map.py")
    module = importlib.util.module_from_spec(spec)
    os.environ.setdefault("MPLBACKEND", "Agg")
    spec.loader.exec_module(module)
    for low, high in [(0.5, 4.0), (4.0, 508.0), (12.0, 13.0), (0.5, 2000.0)]:
        ticks = module.colour_ticks(low, high)
        assert ticks[0] == low and ticks[-1] == high, ticks
        assert len(ticks) >= 3 and ticks == sorted(set(ticks)), ticks
    assert module.colour_ticks(3.0, 3.0) == [3.0]
