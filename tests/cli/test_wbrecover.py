"""wbrecover's contract: refusals, the diagnosis and the JSON report, the
kernel policy against --salvage on a damaged log, --output leaving the
backing device untouched, and exit 0 only when nothing was lost.
What every tool shares (help, usage errors, unusable input) is in
test_contract.py."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import DAMAGE, OK, OPERATIONAL, REFUSED, run, sha256, tool_path


def wbrecover(*args, **kwargs):
    return run([tool_path("wbrecover"), *args], **kwargs)


def test_same_device_and_output_onto_an_input_are_refused(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path)
    before = sha256(cache), sha256(backing)
    assert wbrecover("--cache", cache, "--backing", cache).returncode == REFUSED
    onto_backing = wbrecover("--cache", cache, "--backing", backing, "--output", backing)
    assert onto_backing.returncode == REFUSED and "same file" in onto_backing.stderr
    assert wbrecover("--cache", cache, "--backing", backing, "--output", cache).returncode == REFUSED
    assert (sha256(cache), sha256(backing)) == before


def test_too_small_backing_is_refused(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path, "--backing-mib", "16", "--writes", "400")
    small = tmp_path / "small.img"
    with open(backing, "rb") as src, open(small, "wb") as dst:
        dst.write(src.read(4 << 20))
    result = wbrecover("--cache", cache, "--backing", small)
    assert result.returncode == REFUSED and "past the end" in result.stderr
    forced = wbrecover("--cache", cache, "--backing", small, "--force", "-q", "--report", tmp_path / "r.json")
    assert forced.returncode == DAMAGE
    report = json.loads((tmp_path / "r.json").read_text())
    assert {r["reason"] for r in report["lost"]} == {"beyond-backing"}


def test_healthy_cache_in_place_recovers_everything(wbsynth, tmp_path):
    expected = tmp_path / "expected.img"
    cache, backing = wbsynth(tmp_path, "--backing-pattern", "--expected", expected, "--writes", "2000")
    cache_before = sha256(cache)
    report_path = tmp_path / "report.json"
    result = wbrecover("--cache", cache, "--backing", backing, "--report", report_path, "-q")
    assert result.returncode == OK, result.stdout + result.stderr
    assert "lost: nothing" in result.stdout
    assert sha256(backing) == sha256(expected)
    assert sha256(cache) == cache_before
    report = json.loads(report_path.read_text())
    assert report["nothing_lost"] is True and report["lost"] == []
    assert report["policy"] == "kernel" and report["single_point_in_time"] is True
    assert report["devices"]["cache"]["readable"] and report["devices"]["backing"]["readable"]
    assert report["recovered"]["sectors_from_cache"] > 0


def test_output_leaves_the_backing_device_untouched(wbsynth, tmp_path):
    expected = tmp_path / "expected.img"
    cache, backing = wbsynth(tmp_path, "--backing-pattern", "--expected", expected, "--writes", "1500",
                             "--partial-percent", "40")
    before = sha256(backing)
    dest = tmp_path / "out" / "recovered.img"
    dest.parent.mkdir()
    result = wbrecover("--cache", cache, "--backing", backing, "--output", dest, "-q")
    assert result.returncode == OK, result.stdout + result.stderr
    assert "the backing device was not modified" in result.stdout
    assert sha256(backing) == before
    assert sha256(dest) == sha256(expected)


def test_corrupt_middle_segment_kernel_policy_then_salvage(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path, "--backing-pattern", "--writes", "600", "--flush-every", "25",
                             "--partial-percent", "0", "--corrupt-id", "4")
    pristine = tmp_path / "pristine.img"
    shutil.copyfile(backing, pristine)

    kernel = wbrecover("--cache", cache, "--backing", backing, "--report", tmp_path / "k.json", "-q")
    assert kernel.returncode == DAMAGE
    assert "failing their checksum" in kernel.stdout
    assert "--salvage takes them" in kernel.stdout
    k = json.loads((tmp_path / "k.json").read_text())
    assert k["log"]["last_flushed_id"] == 3
    assert k["log"]["stop"]["reason"] == "checksum-mismatch"
    verdicts = {s["id"]: s for s in k["segments"]}
    assert verdicts[4]["reason"] == "checksum-mismatch" and not verdicts[4]["used"]
    assert verdicts[5]["reason"] == "after-stop-point" and verdicts[5]["left_behind_sectors"] > 0
    kernel_result = sha256(backing)

    shutil.copyfile(pristine, backing)
    salvage = wbrecover("--cache", cache, "--backing", backing, "--salvage", "--report", tmp_path / "s.json", "-q")
    assert salvage.returncode == DAMAGE  # segment 4's content is lost either way
    assert "NOT a single point in time" in salvage.stdout
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["policy"] == "salvage" and s["single_point_in_time"] is False
    assert {v["id"]: v["used"] for v in s["segments"]}[5] is True
    assert s["recovered"]["sectors_from_cache"] > k["recovered"]["sectors_from_cache"]
    assert sha256(backing) != kernel_result


def test_torn_newest_segment_loses_nothing(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path, "--writes", "300", "--flush-every", "30", "--tear-newest")
    result = wbrecover("--cache", cache, "--backing", backing, "--report", tmp_path / "r.json", "-q")
    assert result.returncode == OK, result.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert "torn-newest-segment" in {s["reason"] for s in report["segments"]}


def test_recovery_is_idempotent(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path, "--writes", "900", "--partial-percent", "30")
    assert wbrecover("--cache", cache, "--backing", backing, "-q").returncode == OK
    first = sha256(backing)
    assert wbrecover("--cache", cache, "--backing", backing, "-q").returncode == OK
    assert sha256(backing) == first


def test_report_path_that_cannot_be_written_fails_before_any_write(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path)
    before = sha256(backing)
    result = wbrecover("--cache", cache, "--backing", backing, "--report", tmp_path / "no" / "dir" / "r.json")
    assert result.returncode == OPERATIONAL
    assert sha256(backing) == before


def test_progress_lines_and_quiet(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path)
    loud = wbrecover("--cache", cache, "--backing", backing, "--progress")
    assert "wbrecover: reading backing:" in loud.stderr and "(done)" in loud.stderr
    quiet = wbrecover("--cache", cache, "--backing", backing, "-q")
    assert quiet.stderr == ""
    silent = wbrecover("--cache", cache, "--backing", backing)  # stderr is a pipe, not a terminal
    assert silent.stderr == ""


def test_loop_device_held_open_exclusively_is_refused(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path)
    if shutil.which("losetup") is None:
        pytest.skip("losetup is not installed")
    setup = subprocess.run(["losetup", "--find", "--show", str(cache)], capture_output=True, text=True)
    if setup.returncode != 0:
        pytest.skip(f"no loop device here: {setup.stderr.strip()}")
    loop = setup.stdout.strip()
    try:
        holder = os.open(loop, os.O_RDONLY | os.O_EXCL)
        try:
            result = wbrecover("--cache", loop, "--backing", backing)
            assert result.returncode == REFUSED and "in use" in result.stderr
        finally:
            os.close(holder)
        free = wbrecover("--cache", loop, "--backing", backing, "-q")
        assert free.returncode == OK, free.stdout + free.stderr
    finally:
        subprocess.run(["losetup", "-d", loop])
