"""Shared fixtures for the command-line tests of every wbkit tool.

The build directory comes from WBKIT_BUILD (ctest sets it)."""
import hashlib
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
# The tools that read a cache device or image (the contract tests' devices).
CACHE_TOOLS = ("wbdump", "wbreplay", "wbrecover")
# Every tool: those, wbstat, which reads the kernel's targets through dmsetup,
# and wbctl, which changes them through dmsetup.
TOOLS = CACHE_TOOLS + ("wbstat", "wbctl")
# The tools that write: both take the devices as --cache CACHE --backing BACKING.
WRITING_TOOLS = ("wbreplay", "wbrecover")
# The exit codes every tool documents.
OK, DAMAGE, USAGE, OPERATIONAL, REFUSED = 0, 1, 2, 3, 4


def build_path() -> pathlib.Path:
    env = os.environ.get("WBKIT_BUILD")
    return pathlib.Path(env) if env else ROOT / "build"


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    path = build_path()
    if not (path / "tools" / "wbdump" / "wbdump").exists():
        pytest.fail(f"no wbdump under {path}: build first, or set WBKIT_BUILD")
    return path


def tool_path(name: str) -> pathlib.Path:
    return build_path() / "tools" / name / name


def existing_tools(names=CACHE_TOOLS):
    return [name for name in names if tool_path(name).exists()]


def device_args(tool, cache, backing):
    """The arguments that name the devices: wbdump reads the cache alone."""
    return [cache] if tool == "wbdump" else ["--cache", cache, "--backing", backing]


def run(args, **kwargs) -> subprocess.CompletedProcess:
    """Runs a tool with a time limit: a hang is a failure, not a stuck CI."""
    kwargs.setdefault("timeout", 120)
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)


def sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def decompress(src: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    subprocess.run(["zstd", "-q", "-d", "-f", str(src), "-o", str(dest)], check=True)
    return dest


def fixture_images(fixture: pathlib.Path, tmp: pathlib.Path):
    """A fixture's cache and backing images, decompressed into tmp."""
    return (decompress(fixture / "cache.img.zst", tmp / "cache.img"),
            decompress(fixture / "backing.img.zst", tmp / "backing.img"))


def synthetic_fixtures():
    return sorted(p for p in (FIXTURES / "synthetic").iterdir() if (p / "cache.img.zst").exists())


def upstream_fixtures():
    base = FIXTURES / "upstream"
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (p / "cache.img.zst").exists())


@pytest.fixture
def wbsynth(build_dir):
    """Makes a synthetic cache (and backing) image; returns their paths."""

    def make(tmp: pathlib.Path, *extra, name="cache"):
        cache = tmp / f"{name}.img"
        backing = tmp / f"{name}-backing.img"
        result = run([build_dir / "tests" / "support" / "wbsynth", "--cache", cache, "--backing", backing, *extra])
        assert result.returncode == 0, result.stderr
        return cache, backing

    return make


def cannot_run(reason):
    """A test that cannot run on this machine: a skip, or a failure where every
    test must run (WBKIT_REQUIRE_ALL_TESTS=1, which make test sets): a check of
    a safety guard that did not run must not read as one that passed."""
    if os.environ.get("WBKIT_REQUIRE_ALL_TESTS") == "1":
        pytest.fail(f"{reason} (WBKIT_REQUIRE_ALL_TESTS=1: every test must run)")
    pytest.skip(reason)
