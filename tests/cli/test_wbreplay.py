"""wbreplay's contract: refusals before any write, dry runs that write
nothing, a replay that matches the workload's logical image, the cache left
alone without --mark-clean, idempotence, and a run killed halfway.
What every tool shares (help, usage errors, unusable input) is in
test_contract.py."""
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import DAMAGE, OK, REFUSED, cannot_run, run, sha256, tool_path


def wbreplay(*args, **kwargs):
    return run([tool_path("wbreplay"), *args], **kwargs)


@pytest.fixture
def synth(wbsynth, tmp_path):
    """A flushed synthetic cache, its backing image and the expected logical image."""

    def make(*extra, name="cache", damaged=False):
        expected = tmp_path / f"{name}-expected.img"
        wants = () if damaged else ("--expected", expected)
        cache, backing = wbsynth(tmp_path, "--backing-pattern", *wants, *extra, name=name)
        return cache, backing, None if damaged else expected

    return make


def test_too_small_backing_is_refused_and_force_replays_the_rest(synth, tmp_path):
    cache, backing, expected = synth("--backing-mib", "16", "--writes", "400")
    small = tmp_path / "small.img"
    with open(backing, "rb") as src, open(small, "wb") as dst:
        dst.write(src.read(8 << 20))
    before = sha256(small)
    result = wbreplay("--cache", cache, "--backing", small)
    assert result.returncode == REFUSED
    assert "past the end of the backing device" in result.stderr
    assert sha256(small) == before

    forced = wbreplay("--cache", cache, "--backing", small, "--json", "-q", "--force")
    assert forced.returncode == DAMAGE, forced.stderr
    report = json.loads(forced.stdout)
    assert report["plan"]["skipped_sectors"] > 0
    assert report["forced"] and report["not_replayed"]
    assert "--force: overriding" in forced.stderr
    with open(expected, "rb") as f:
        assert small.read_bytes() == f.read(8 << 20)


def test_unformatted_cache_with_force_replays_nothing(synth, tmp_path):
    _, backing, _ = synth()
    blank = tmp_path / "blank.img"
    with open(blank, "wb") as f:
        f.truncate(4 << 20)
    before = sha256(backing)
    result = wbreplay("--cache", blank, "--backing", backing, "--force", "--json")
    assert result.returncode == OK, result.stderr
    assert json.loads(result.stdout)["plan"]["extents"] == 0
    assert sha256(backing) == before


def test_dry_run_writes_nothing_and_prints_the_plan(synth):
    cache, backing, _ = synth()
    before = sha256(cache), sha256(backing)
    result = wbreplay("--cache", cache, "--backing", backing, "--dry-run")
    assert result.returncode == OK, result.stderr
    assert "dry run: nothing was written" in result.stdout
    assert "write extent(s)" in result.stdout and "dirty sector(s)" in result.stdout
    as_json = wbreplay("--cache", cache, "--backing", backing, "--dry-run", "--json", "--mark-clean")
    report = json.loads(as_json.stdout)
    assert report["dry_run"] is True and report["written"] is None
    assert report["plan"]["extents"] > 0 and report["plan"]["bytes"] == report["plan"]["dirty_sectors"] * 512
    assert report["marked_clean"] is False
    assert (sha256(cache), sha256(backing)) == before


def test_replay_matches_the_logical_image_and_leaves_the_cache_alone(synth):
    cache, backing, expected = synth("--writes", "3000", "--partial-percent", "30", "--flush-every", "40")
    cache_before = sha256(cache)
    result = wbreplay("--cache", cache, "--backing", backing, "--json")
    assert result.returncode == OK, result.stderr
    report = json.loads(result.stdout)
    assert report["written"]["bytes"] == report["plan"]["bytes"]
    assert report["written"]["backing_flushed"] is True
    assert report["not_replayed"] == []
    assert {s["reason"] for s in report["segments"]} <= {"replayed", "superseded", "already-written-back"}
    assert sha256(backing) == sha256(expected)
    assert sha256(cache) == cache_before


def test_second_run_leaves_the_same_bytes(synth):
    cache, backing, expected = synth("--writes", "1500", "--no-merge", "--partial-percent", "50")
    assert wbreplay("--cache", cache, "--backing", backing, "-q").returncode == OK
    first = sha256(backing)
    assert first == sha256(expected)
    assert wbreplay("--cache", cache, "--backing", backing, "-q").returncode == OK
    assert sha256(backing) == first


def test_mark_clean_writes_only_the_records_after_the_replay(synth, build_dir):
    cache, backing, expected = synth("--writes", "800")
    original = cache.read_bytes()
    result = wbreplay("--cache", cache, "--backing", backing, "--mark-clean", "--json", "-q")
    assert result.returncode == OK, result.stderr
    report = json.loads(result.stdout)
    assert report["marked_clean"] is True
    assert sha256(backing) == sha256(expected)
    after = cache.read_bytes()
    record = 2047 * 512
    trust = 8 * 512  # the clean-copy trust record (docs/FORMAT.md)
    assert after[:trust] == original[:trust]
    assert after[trust + 512:record] == original[trust + 512:record] and after[record + 8:] == original[record + 8:]
    assert int.from_bytes(after[record:record + 8], "little") == report["log"]["last_flushed_id"]
    # "WBTr", then none: no copy logged before the repair may serve reads
    assert after[trust:trust + 16] == bytes.fromhex("5742547200000000") + b"\xff" * 8
    dump = run([build_dir / "tools" / "wbdump" / "wbdump", "--json", cache])
    superblock = json.loads(dump.stdout)["superblock"]
    assert superblock["trust_record"] is True and superblock["clean_copies_trusted_from"] is None
    assert json.loads(dump.stdout)["log"]["dirty_blocks"] == 0
    again = json.loads(wbreplay("--cache", cache, "--backing", backing, "--dry-run", "--json").stdout)
    assert again["plan"]["extents"] == 0


def test_damage_is_replayed_as_the_kernel_would_and_reported(synth):
    # 30 slots, ids 1..30: id 12 lies at step 11, past the first 8 steps where
    # a bad checksum reads as a torn rewrite (docs/FORMAT.md, replay step 2).
    cache, backing, _ = synth("--writes", "600", "--flush-every", "20", "--corrupt-id", "12", damaged=True)
    backing_before = sha256(backing)
    # The kernel refuses this log (a damaged segment before the newest): so
    # does wbreplay, before it writes anything, and it names the way out.
    refused = wbreplay("--cache", cache, "--backing", backing, "--json", "--mark-clean", "-q")
    assert refused.returncode == REFUSED, refused.stderr
    assert refused.stdout == ""
    assert "the kernel refuses to replay this log: slot 11, segment 12" in refused.stderr
    assert "wbrecover --salvage" in refused.stderr and "--force" in refused.stderr
    assert sha256(backing) == backing_before
    # Forced, it replays what the walk reads, as a tool ignoring the damage would.
    result = wbreplay("--cache", cache, "--backing", backing, "--json", "--force", "-q")
    assert result.returncode == DAMAGE
    report = json.loads(result.stdout)
    assert report["log"]["last_flushed_id"] == 11
    reasons = {s["id"]: s["reason"] for s in report["segments"]}
    assert reasons[12] == "checksum-mismatch" and reasons[13] == "after-stop-point"
    assert any("not replayed" in line for line in report["not_replayed"])
    assert any("the kernel refuses to replay this log" in line for line in report["forced"]), report["forced"]
    assert report["marked_clean"] is False


def test_torn_newest_segment_is_not_a_failure(synth):
    cache, backing, _ = synth("--writes", "300", "--flush-every", "30", "--tear-newest", damaged=True)
    result = wbreplay("--cache", cache, "--backing", backing, "--json", "-q")
    assert result.returncode == OK, result.stderr
    report = json.loads(result.stdout)
    assert "torn-newest-segment" in {s["reason"] for s in report["segments"]}


def test_mark_clean_after_a_stop_zeroes_the_headers_from_the_stop_point_on(synth, build_dir):
    # Forced past a damaged segment: the good segments after it must not stay
    # in the ring for the target's next segments to run into.
    cache, backing, _ = synth("--writes", "600", "--flush-every", "20", "--corrupt-id", "12", damaged=True)
    before = json.loads(run([build_dir / "tools" / "wbdump" / "wbdump", "--json", cache]).stdout)["log"]
    assert before["stop"]["segment_id"] == 12 and before["discarded_segments"] >= 2
    result = wbreplay("--cache", cache, "--backing", backing, "--json", "--mark-clean", "--force", "-q")
    assert result.returncode == DAMAGE, result.stderr
    report = json.loads(result.stdout)
    assert report["marked_clean"] is True
    assert report["headers_zeroed"] == 1 + before["discarded_segments"]
    dump = run([build_dir / "tools" / "wbdump" / "wbdump", "--json", cache])
    assert dump.returncode == OK, dump.stdout
    after = json.loads(dump.stdout)
    assert after["log"]["max_id"] == 11 and after["log"]["dirty_blocks"] == 0
    assert not [f for f in after["findings"] if f["code"] == "valid-segments-discarded"]


def test_mark_clean_after_a_torn_newest_segment_zeroes_its_header_only(synth):
    cache, backing, _ = synth("--writes", "300", "--flush-every", "30", "--tear-newest", damaged=True)
    result = wbreplay("--cache", cache, "--backing", backing, "--json", "--mark-clean", "-q")
    assert result.returncode == OK, result.stderr
    report = json.loads(result.stdout)
    assert report["marked_clean"] is True and report["headers_zeroed"] == 1
    text = wbreplay("--cache", cache, "--backing", backing, "--mark-clean", "-q")
    assert text.returncode == OK and "zeroed" not in text.stdout


def test_progress_lines_with_progress_and_silence_without_it_or_with_q(synth):
    cache, backing, _ = synth()
    silent = wbreplay("--cache", cache, "--backing", backing)  # stderr is a pipe, not a terminal
    assert silent.stderr == ""
    loud = wbreplay("--cache", cache, "--backing", backing, "--progress")
    assert "wbreplay: replay:" in loud.stderr and "100.0%" in loud.stderr and "(done)" in loud.stderr
    quiet = wbreplay("--cache", cache, "--backing", backing, "-q")
    assert quiet.stderr == ""


def test_killed_halfway_then_rerun_ends_in_the_same_bytes(synth):
    # Many scattered blocks make a replay of many small writes: long enough to kill.
    cache, backing, expected = synth("--cache-mib", "160", "--backing-mib", "256", "--writes", "30000",
                                     "--flush-every", "0", "--partial-percent", "0")
    pristine = backing.with_suffix(".pristine")
    shutil.copyfile(backing, pristine)
    # The kill must land while wbreplay writes: some of its writes on the
    # backing image, not all (not before it started, not after it finished).
    killed = False
    ends = (sha256(pristine), sha256(expected))
    for delay in (0.5, 0.25, 0.1, 0.03, 0.4, 0.2, 0.15, 0.05, 0.3, 0.08):
        shutil.copyfile(pristine, backing)
        proc = subprocess.Popen([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        if proc.wait() == -signal.SIGKILL and sha256(backing) not in ends:
            killed = True
            break
    if not killed:
        cannot_run("no kill landed while the replay was writing on this machine")
    assert wbreplay("--cache", cache, "--backing", backing, "-q").returncode == OK
    assert sha256(backing) == sha256(expected)


def test_block_device_held_open_exclusively_is_refused(synth, tmp_path):
    cache, backing, _ = synth()
    if shutil.which("losetup") is None:
        cannot_run("losetup is not installed")
    setup = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True)
    if setup.returncode != 0:
        cannot_run(f"no loop device here: {setup.stderr.strip()}")
    loop = setup.stdout.strip()
    try:
        # O_EXCL on a block device claims it, as a mounted file system or a target does.
        holder = os.open(loop, os.O_RDONLY | os.O_EXCL)
        try:
            result = wbreplay("--cache", cache, "--backing", loop)
            assert result.returncode == REFUSED, result.stderr
            assert "in use" in result.stderr
            forced = wbreplay("--cache", cache, "--backing", loop, "--force")
            assert forced.returncode == REFUSED
        finally:
            os.close(holder)
        free = wbreplay("--cache", cache, "--backing", loop, "--dry-run")
        assert free.returncode == OK, free.stderr
    finally:
        subprocess.run(["losetup", "-d", loop])


def test_replay_onto_a_loop_block_device(synth):
    # The block-device path: size from BLKGETSIZE64, O_EXCL, O_DIRECT writes.
    cache, backing, expected = synth("--writes", "1500", "--partial-percent", "40")
    if shutil.which("losetup") is None:
        cannot_run("losetup is not installed")
    setup = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True)
    if setup.returncode != 0:
        cannot_run(f"no loop device here: {setup.stderr.strip()}")
    loop = setup.stdout.strip()
    try:
        result = wbreplay("--cache", cache, "--backing", loop, "--json", "-q")
        assert result.returncode == OK, result.stderr
        assert json.loads(result.stdout)["written"]["backing_flushed"] is True
    finally:
        subprocess.run(["losetup", "-d", loop])
    assert sha256(backing) == sha256(expected)
