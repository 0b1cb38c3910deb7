"""The contract every tool keeps: help, usage errors, and bad input that
ends in a clear error and a documented exit code, never a crash, a hang or
a write. A check that differs between tools only in its arguments lives
here, once, for every tool; each tool's own file tests what only it does."""
import os

import pytest

from conftest import (OPERATIONAL, REFUSED, TOOLS, USAGE, WRITING_TOOLS, device_args, existing_tools, run, sha256,
                      tool_path)

# What each tool's --help must mention besides usage and exit codes.
HELP_WORDS = {
    "wbdump": ("--backing", "--json", "--no-verify"),
    "wbreplay": ("--mark-clean", "--dry-run", "--force", "O_EXCL", "Exit codes", "4 refused"),
    "wbrecover": ("--salvage", "--output", "--report", "single point", "Exit codes", "0 nothing was lost"),
    "wbstat": ("--json", "--prometheus-file", "--interval", "dead_cause", "error_counts", "never writes",
               "Exit codes", "1 a dm-wbkit target is dead"),
    "wbctl": ("create", "status", "flush", "detach", "attach", "replace-cache", "mode", "Exit codes", "4 refused"),
}


@pytest.mark.parametrize("tool", existing_tools(TOOLS))
def test_help_exits_zero_and_documents_exit_codes(tool):
    result = run([tool_path(tool), "--help"])
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout or "usage" in result.stdout.lower()
    assert "exit" in result.stdout.lower()
    for word in HELP_WORDS[tool]:
        assert word in result.stdout, word


@pytest.mark.parametrize("tool", existing_tools(TOOLS))
def test_unknown_option_is_a_usage_error(tool):
    result = run([tool_path(tool), "--no-such-option"])
    assert result.returncode == USAGE
    assert result.stderr.startswith(f"{tool}: error:")


@pytest.mark.parametrize("tool", existing_tools())
def test_no_arguments_is_a_usage_error(tool):
    result = run([tool_path(tool)])
    assert result.returncode == USAGE
    assert result.stderr.startswith(f"{tool}: error:")


@pytest.mark.parametrize("given", ["--cache", "--backing"])
@pytest.mark.parametrize("tool", existing_tools(WRITING_TOOLS))
def test_one_device_alone_is_a_usage_error(tool, given, tmp_path):
    result = run([tool_path(tool), given, tmp_path / "x"])
    assert result.returncode == USAGE
    assert result.stderr.startswith(f"{tool}: error:")


@pytest.mark.parametrize("tool", existing_tools())
def test_missing_cache_file_is_operational(tool, wbsynth, tmp_path):
    _, backing = wbsynth(tmp_path)
    result = run([tool_path(tool), *device_args(tool, tmp_path / "absent.img", backing)])
    assert result.returncode == OPERATIONAL
    assert result.stderr.startswith(f"{tool}: error:")
    assert "absent.img" in result.stderr


@pytest.mark.parametrize("tool", existing_tools())
def test_directory_as_cache_is_operational(tool, wbsynth, tmp_path):
    _, backing = wbsynth(tmp_path)
    result = run([tool_path(tool), *device_args(tool, tmp_path, backing)])
    assert result.returncode == OPERATIONAL
    assert "directory" in result.stderr


def write_bad_cache(path, kind):
    if kind == "tiny":
        path.write_bytes(b"\0" * 4096)
    elif kind == "odd-sized":
        path.write_bytes(b"\1" * 1000)
    elif kind == "zero":
        with open(path, "wb") as f:
            f.truncate(4 << 20)
    else:
        path.write_bytes(os.urandom(3 << 20))


@pytest.mark.parametrize("kind", ["tiny", "odd-sized", "zero", "garbage"])
@pytest.mark.parametrize("tool", existing_tools(WRITING_TOOLS))
def test_bad_cache_images_are_refused_without_writing(tool, kind, wbsynth, tmp_path):
    _, backing = wbsynth(tmp_path)
    bad = tmp_path / f"{kind}.img"
    write_bad_cache(bad, kind)
    before = sha256(backing), sha256(bad)
    result = run([tool_path(tool), *device_args(tool, bad, backing)])
    assert result.returncode == REFUSED, result.stderr
    assert result.stderr.startswith(f"{tool}: error:")
    small = kind in ("tiny", "odd-sized")
    assert ("not a writeboost cache" if small else "no writeboost magic") in result.stderr
    assert (sha256(backing), sha256(bad)) == before


@pytest.mark.parametrize("path", ["same path", "hard link"])
@pytest.mark.parametrize("tool", existing_tools(WRITING_TOOLS))
def test_cache_and_backing_on_the_same_file_are_refused(tool, path, wbsynth, tmp_path):
    cache, _ = wbsynth(tmp_path)
    other = cache
    if path == "hard link":
        other = tmp_path / "link.img"
        os.link(cache, other)
    before = sha256(cache)
    result = run([tool_path(tool), *device_args(tool, cache, other)])
    assert result.returncode == REFUSED
    assert "same file" in result.stderr
    assert sha256(cache) == before
