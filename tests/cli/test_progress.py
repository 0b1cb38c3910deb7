"""Progress of the scan and the replay: nothing on stderr when it is not a
terminal unless --progress asks for plain lines, nothing with -q, and
`phase done total` lines for programs on --progress-fd N."""
import os
import subprocess

import pytest

from conftest import ROOT, fixture_images, run, tool_path


@pytest.fixture
def demo(tmp_path):
    fixture = ROOT / "fixtures" / "synthetic" / "demo"
    return fixture_images(fixture, tmp_path)


def commands(demo, tmp_path):
    cache, backing = demo
    return {
        "wbdump": [tool_path("wbdump"), "--cache", cache],
        "wbreplay": [tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--dry-run"],
        "wbrecover": [tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--output", tmp_path / "o.img"],
    }


def run_with_progress_fd(args):
    read_end, write_end = os.pipe()
    try:
        done = run([*args, "--progress-fd", str(write_end)], pass_fds=(write_end,))
    finally:
        os.close(write_end)
    with os.fdopen(read_end) as f:
        lines = f.read().splitlines()
    return done, lines


@pytest.mark.parametrize("tool", ["wbdump", "wbreplay", "wbrecover"])
def test_progress_fd_gets_phase_done_total_lines(demo, tmp_path, tool):
    done, lines = run_with_progress_fd([*commands(demo, tmp_path)[tool], "-q"])
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # -q silences stderr, not the fd that was asked for
    parsed = [line.split(" ") for line in lines]
    assert parsed and all(len(p) == 3 and p[1].isdigit() and p[2].isdigit() for p in parsed), lines
    scan = [(int(d), int(t)) for phase, d, t in parsed if phase == "scan"]
    assert scan, lines
    assert [d for d, _ in scan] == sorted(d for d, _ in scan)
    assert scan[-1][0] == scan[-1][1] == 6 * 512 * 1024  # every slot of the 6-segment cache


@pytest.mark.parametrize("tool", ["wbdump", "wbreplay", "wbrecover"])
def test_scan_progress_lines_on_stderr_with_progress_and_none_with_q(demo, tmp_path, tool):
    args = commands(demo, tmp_path)[tool]
    loud = run([*args, "--progress"])
    assert loud.returncode == 0, loud.stderr
    assert f"{tool}: scan: 100.0%" in loud.stderr and "(done)" in loud.stderr
    quiet = run([*args, "-q"])
    assert quiet.returncode == 0 and quiet.stderr == ""
    both = run([*args, "-q", "--progress"])
    assert both.returncode == 2 and "excludes" in both.stderr


@pytest.mark.parametrize("tool", ["wbdump", "wbreplay", "wbrecover"])
def test_no_progress_text_when_stderr_is_a_file_unless_asked(demo, tmp_path, tool):
    # As `wbdump c.img 2>err.txt`: a log or cron mail gets errors, not progress.
    args = commands(demo, tmp_path)[tool]
    err = tmp_path / "err.txt"
    for extra, expect_progress in (([], False), (["--progress"], True)):
        with open(err, "w") as f:
            done = subprocess.run([str(a) for a in [*args, *extra]], stdout=subprocess.DEVNULL, stderr=f, timeout=120)
        assert done.returncode == 0
        text = err.read_text()
        assert (f"{tool}: scan:" in text) == expect_progress, text
        if not expect_progress:
            assert text == "", text


def test_progress_fd_that_is_not_open_is_a_usage_error(demo):
    done = run([tool_path("wbdump"), demo[0], "--progress-fd", "97"])
    assert done.returncode == 2
    assert "wbdump: error: --progress-fd 97" in done.stderr


def test_wbdump_takes_the_cache_as_option_or_positional(demo):
    positional = run([tool_path("wbdump"), demo[0], "--json", "-q"])
    option = run([tool_path("wbdump"), "--cache", demo[0], "--json", "-q"])
    assert positional.returncode == option.returncode == 0
    assert positional.stdout == option.stdout
    both = run([tool_path("wbdump"), demo[0], "--cache", demo[0]])
    assert both.returncode == 2


def test_wbreplay_verifying_rescan_is_its_own_phase(tmp_path):
    # The headers of a log with a corrupt segment before good ones look
    # safe, so the replay starts while the checksums are verified (writing
    # what verified segments hold); the stop found there makes it scan
    # again, verifying, and replay what that scan says. A reader of the fd
    # sees the scan once, then the verifying scan and the replay, the bytes
    # of each run of a phase never going back.
    fixture = ROOT / "fixtures" / "synthetic" / "corrupt-middle"
    cache, backing = fixture_images(fixture, tmp_path)
    done, lines = run_with_progress_fd(
        [tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--force", "-q"])
    assert done.returncode == 1, done.stderr  # forced: the discarded segments are not replayed
    runs = []  # [phase, [done, ...], total] per run of lines of one phase
    for phase, d, t in (line.split(" ") for line in lines):
        if not runs or runs[-1][0] != phase:
            runs.append([phase, [], 0])
        runs[-1][1].append(int(d))
        runs[-1][2] = int(t)
    names = [r[0] for r in runs]
    assert names[0] == "scan" and names.count("scan") == 1 and names[-2:] == ["verify", "replay"], lines
    assert all(r[1] == sorted(r[1]) and r[1][-1] == r[2] for r in runs), lines
    assert runs[-2][2] == 6 * 512 * 1024  # the verifying scan read every slot of the 6-segment cache
