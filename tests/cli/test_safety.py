"""The destructive tools can never destroy what they recover: every path a
tool is given (cache, backing, --output, --report) is checked against every
other one, aliases through loop devices included, before anything is opened
for writing; a report is complete or absent; a file size limit or a full disk
is an operational error with the path, not a silent death."""
import os
import pathlib
import resource
import shutil
import subprocess

import pytest

from conftest import FIXTURES, cannot_run, decompress, run, sha256, tool_path

OK, DAMAGE, USAGE, OPERATIONAL, REFUSED = 0, 1, 2, 3, 4


def tool(name, *args, **kwargs):
    return run([tool_path(name), *args], **kwargs)


@pytest.fixture
def demo(tmp_path):
    cache = decompress(FIXTURES / "synthetic" / "demo" / "cache.img.zst", tmp_path / "cache.img")
    backing = decompress(FIXTURES / "synthetic" / "demo" / "backing.img.zst", tmp_path / "backing.img")
    return cache, backing


@pytest.fixture
def loops():
    """Attaches real loop devices; detaches them afterwards."""
    if shutil.which("losetup") is None:
        cannot_run("losetup is not installed: the loop-device aliasing tests need it")
    made = []

    def attach(path, *extra):
        result = subprocess.run(["losetup", "--find", "--show", *extra, str(path)], capture_output=True, text=True)
        if result.returncode != 0:
            cannot_run(f"loop devices are not available here: {result.stderr.strip()}")
        made.append(result.stdout.strip())
        return made[-1]

    yield attach
    for loop in reversed(made):
        subprocess.run(["losetup", "-d", loop], capture_output=True)


def limit_file_size(limit):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def leftovers(directory: pathlib.Path, name: str):
    """Temporary files of a report that was never completed."""
    return [p.name for p in directory.iterdir() if p.name.startswith(f".{name}.")]


# --- the report never lands on one of the other paths -------------------------------------------

@pytest.mark.parametrize("victim", ["cache", "backing", "output", "output-new"])
def test_report_naming_another_path_is_refused_before_anything_is_touched(demo, tmp_path, victim):
    cache, backing = demo
    output = tmp_path / "out.img"
    if victim != "output-new":
        output.write_bytes(b"previous output\n")
    target = {"cache": cache, "backing": backing, "output": output, "output-new": output}[victim]
    before = {p: sha256(p) for p in (cache, backing, output) if p.exists()}
    result = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", output, "--report", target, "-q")
    assert result.returncode == REFUSED, result.stderr
    assert result.stderr.startswith("wbrecover: error:") and "the report" in result.stderr
    assert {p: sha256(p) for p in (cache, backing, output) if p.exists()} == before
    assert output.exists() == (victim != "output-new")
    assert leftovers(tmp_path, target.name) == []


def test_report_onto_the_loop_device_of_the_cache_is_refused(demo, tmp_path, loops):
    cache, backing = demo
    before = sha256(cache)
    loop = loops(cache)
    for cache_arg in (loop, cache):
        result = tool("wbrecover", "--cache", cache_arg, "--backing", backing, "--output", tmp_path / "out.img",
                      "--report", loop, "-q")
        assert result.returncode == REFUSED, result.stderr
        assert "the report" in result.stderr and "same storage" in result.stderr
    assert sha256(cache) == before
    assert tool("wbdump", loop).returncode == OK  # the magic and the log are intact


def test_report_is_never_written_onto_a_block_device(demo, tmp_path, loops):
    cache, backing = demo
    bystander = tmp_path / "bystander.img"
    bystander.write_bytes(os.urandom(1 << 20))
    before = sha256(bystander)
    loop = loops(bystander)
    result = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", tmp_path / "out.img",
                  "--report", loop, "-q")
    assert result.returncode == REFUSED, result.stderr
    assert "regular file" in result.stderr
    assert sha256(bystander) == before


def test_an_existing_report_is_replaced_only_by_a_complete_one(demo, tmp_path):
    cache, backing = demo
    report = tmp_path / "report.json"
    report.write_text("the previous report\n")
    refused = tool("wbrecover", "--cache", cache, "--backing", cache, "--report", report, "-q")
    assert refused.returncode == REFUSED
    assert report.read_text() == "the previous report\n"
    done = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", tmp_path / "out.img",
                "--report", report, "-q")
    assert done.returncode == OK, done.stderr
    assert report.read_text().rstrip().endswith("}") and '"nothing_lost": true' in report.read_text()
    assert leftovers(tmp_path, "report.json") == []


# --- aliases of one storage through loop devices ------------------------------------------------

def test_two_loop_devices_over_one_file_are_one_device(demo, loops):
    cache, _ = demo
    before = sha256(cache)
    first, second = loops(cache), loops(cache)
    result = tool("wbreplay", "--cache", first, "--backing", second, "-q")
    assert result.returncode == REFUSED, result.stderr
    assert "same storage" in result.stderr and "loop devices over the same file" in result.stderr
    assert sha256(cache) == before


def test_a_file_and_the_loop_device_over_it_are_one_device(demo, loops):
    cache, _ = demo
    before = sha256(cache)
    loop = loops(cache)
    for args in (("--cache", cache, "--backing", loop), ("--cache", loop, "--backing", cache)):
        result = tool("wbreplay", *args, "-q")
        assert result.returncode == REFUSED, result.stderr
        assert "a loop device and the file behind it" in result.stderr
        recover = tool("wbrecover", *args, "-q")
        assert recover.returncode == REFUSED, recover.stderr
    assert sha256(cache) == before


def test_recover_output_onto_a_loop_device_over_the_cache_is_refused(demo, loops):
    cache, backing = demo
    # A backing device no larger than the cache, so the output (a loop over the
    # cache's file) is big enough and only the aliasing can refuse the run.
    with open(backing, "r+b") as f:
        f.truncate(2 << 20)
    before = sha256(cache), sha256(backing)
    first, second = loops(cache), loops(cache)
    result = tool("wbrecover", "--cache", first, "--backing", backing, "--output", second, "--force", "-q")
    assert result.returncode == REFUSED, result.stderr
    assert "the output" in result.stderr
    assert (sha256(cache), sha256(backing)) == before


def test_distinct_loop_devices_still_replay(demo, tmp_path, loops):
    cache, backing = demo
    expected = tmp_path / "expected.img"
    shutil.copy(backing, expected)
    assert tool("wbreplay", "--cache", cache, "--backing", expected, "-q").returncode == OK
    result = tool("wbreplay", "--cache", loops(cache), "--backing", loops(backing), "-q")
    assert result.returncode == OK, result.stderr
    assert sha256(backing) == sha256(expected)


# --- a file size limit or a full disk is an operational error with the path ---------------------

def test_file_size_limit_on_the_output_is_an_error_and_leaves_no_report(demo, tmp_path):
    cache, backing = demo
    output, report = tmp_path / "out.img", tmp_path / "report.json"
    result = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", output, "--report", report, "-q",
                  preexec_fn=limit_file_size(1 << 20))
    assert result.returncode == OPERATIONAL, (result.returncode, result.stderr)
    assert result.stderr.startswith("wbrecover: error:")
    assert str(output) in result.stderr and "File too large" in result.stderr
    assert not report.exists() and leftovers(tmp_path, "report.json") == []


def test_file_size_limit_on_the_backing_file_is_an_error_for_wbreplay(demo):
    cache, backing = demo
    result = tool("wbreplay", "--cache", cache, "--backing", backing, "-q", preexec_fn=limit_file_size(1 << 20))
    assert result.returncode == OPERATIONAL, (result.returncode, result.stderr)
    assert result.stderr.startswith("wbreplay: error:")
    assert str(backing) in result.stderr and "File too large" in result.stderr


def test_report_on_a_full_file_system_is_an_error_and_absent(demo, tmp_path):
    cache, backing = demo
    mount = tmp_path / "tiny"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True)
    if made.returncode != 0:
        cannot_run(f"cannot mount a small tmpfs here: {made.stderr.strip()}")
    try:
        filler = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)  # takes every free block
        try:
            while os.write(filler, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(filler)
        report = mount / "report.json"
        result = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", tmp_path / "out.img",
                      "--report", report, "-q")
        assert result.returncode == OPERATIONAL, (result.returncode, result.stderr)
        assert str(report) in result.stderr and "No space left" in result.stderr
        assert not report.exists() and leftovers(mount, "report.json") == []
    finally:
        subprocess.run(["umount", str(mount)])
