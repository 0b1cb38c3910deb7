"""Shared test helpers: the build's wbdump, the fixtures decompressed once per
session, and images written with the library's LogWriter."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import wbkit
import wbkit.testing

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"


def build_dir() -> pathlib.Path:
    build = os.environ.get("WBKIT_BUILD")
    if not build:
        pytest.exit("set WBKIT_BUILD to the CMake build directory (ctest does)", returncode=2)
    return pathlib.Path(build)


def wbdump_path() -> pathlib.Path:
    return build_dir() / "tools" / "wbdump" / "wbdump"


def wbdump_json(cache, *args, backing=None):
    """wbdump --json's document; wbdump exits 1 when it found damage, which is fine here."""
    cmd = [str(wbdump_path()), "--json", str(cache), *map(str, args)]
    if backing is not None:
        cmd += ["--backing", str(backing)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), f"{cmd}: exit {done.returncode}: {done.stderr}"
    return json.loads(done.stdout)


def compressed_fixtures():
    """Every compressed image under fixtures/, as (id, path)."""
    return sorted(FIXTURES.rglob("*.img.zst"))


def fixture_id(path: pathlib.Path) -> str:
    return str(path.relative_to(FIXTURES)).removesuffix(".img.zst")


class Images:
    """Decompresses fixtures on first use and keeps them for the session."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.done = {}

    def get(self, compressed: pathlib.Path) -> pathlib.Path:
        if compressed not in self.done:
            out = self.root / (fixture_id(compressed).replace("/", "__") + ".img")
            subprocess.run(["zstd", "-q", "-d", "-f", str(compressed), "-o", str(out)], check=True)
            out.chmod(0o444)  # the module only reads: a write would fail loudly
            self.done[compressed] = out
        return self.done[compressed]


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    if shutil.which("zstd") is None:
        pytest.skip("zstd is not installed")
    return Images(tmp_path_factory.mktemp("fixtures"))


def make_image(path: pathlib.Path, size: int) -> pathlib.Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def pattern(size: int, seed: int) -> bytes:
    return bytes((seed * 131 + i * 7 + (i >> 9)) & 0xFF for i in range(size))


@pytest.fixture
def written_cache(tmp_path):
    """A small cache written by the library's LogWriter: 4 segments, one of
    them with partial-block writes, a clean entry, then a torn newest segment."""
    cache = make_image(tmp_path / "cache.img", wbkit.SUPERBLOCK_SIZE + 8 * wbkit.SEGMENT_SIZE)
    backing = make_image(tmp_path / "backing.img", 64 << 20)
    with wbkit.testing.LogWriter(cache, backing) as w:
        for i in range(300):
            w.write(8 * (i * 3 % 1000), pattern(4096, i))
        w.flush()
        w.write(24 + 2, pattern(1024, 7))  # sectors 2..3 of block 24
        w.write_clean(4000, bytes(4096))
        w.flush()
        w.write(800, pattern(8192, 9))
        w.flush()
        newest = w.last_flushed_id
        w.tear_segment(newest)
    return cache, backing


def run_python(code: str, *args, timeout=300):
    """Runs code in a fresh interpreter, so a crash shows as a return code
    instead of taking the test run down."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))
