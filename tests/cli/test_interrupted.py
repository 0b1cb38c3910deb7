"""Recovery tools killed at random points and run again.

A replay writes absolute data: every extent is the newest copy of its
sectors, so a run cut short at any point (SIGKILL, a power cut) leaves the
backing device with some extents written and others not, and the next full
run must bring it to exactly the logical image, whatever the first run had
done. Each case kills the tool at a random moment of a run, sometimes kills
the rerun too, then lets a run finish and compares the result with the
logical image the log writer recorded."""
import filecmp
import random
import shutil
import signal
import subprocess
import time

import pytest

from conftest import OK, build_path, tool_path

ROUNDS = 4


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """A cache with many overlapping and partial writes over a backing image
    whose old content differs everywhere, and the logical image it stands for."""
    wbsynth = build_path() / "tests" / "support" / "wbsynth"
    if not wbsynth.exists():
        pytest.fail(f"no {wbsynth}: build first")
    work = tmp_path_factory.mktemp("interrupted")
    subprocess.run([wbsynth, "--cache", work / "cache.img", "--cache-mib", "64", "--backing", work / "backing.img",
                    "--backing-mib", "32", "--backing-pattern", "--seed", "11", "--writes", "10000",
                    "--partial-percent", "25", "--flush-every", "40", "--expected", work / "expected.img"],
                   check=True, capture_output=True, timeout=300)
    return work


def timed_run(args):
    start = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == OK, done.stdout + done.stderr
    return time.monotonic() - start


def kill_after(args, seconds):
    """Starts the tool, kills it with SIGKILL after `seconds` (if still running);
    returns whether it was killed before it finished."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=seconds)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def mid_write(target, workload):
    """Whether the target holds some of the replay's writes but not all: a
    kill that landed while the tool was writing, not before or after."""
    return not filecmp.cmp(target, workload / "backing.img", shallow=False) and \
        not filecmp.cmp(target, workload / "expected.img", shallow=False)


def interrupted_then_finished(workload, target, command, rng):
    """Runs `command` on a fresh copy of the backing image, killed once or
    twice at random points, then to the end; returns how many kills landed
    while it was writing."""
    shutil.copyfile(workload / "backing.img", target)
    full = timed_run(command)
    kills = 0
    # ROUNDS rounds, and more (a bounded number) until one kill landed mid-write.
    for round_ in range(4 * ROUNDS):
        if round_ >= ROUNDS and kills > 0:
            break
        shutil.copyfile(workload / "backing.img", target)
        for _ in range(rng.choice((1, 1, 2))):
            if kill_after(command, rng.uniform(0.0, full * 1.1)) and mid_write(target, workload):
                kills += 1
        timed_run(command)
        assert filecmp.cmp(target, workload / "expected.img", shallow=False), \
            f"{command[0].name}: the run after a kill differs from the logical image"
    return kills


def test_wbreplay_killed_and_rerun_gives_the_logical_image(workload, tmp_path):
    rng = random.Random(1)
    target = tmp_path / "backing.img"
    cache = tmp_path / "cache.img"
    shutil.copyfile(workload / "cache.img", cache)
    command = [tool_path("wbreplay"), "--cache", cache, "--backing", target, "-q"]
    kills = interrupted_then_finished(workload, target, command, rng)
    assert kills > 0, "no kill landed while the tool was writing: the workload is too small to test this"
    assert filecmp.cmp(cache, workload / "cache.img", shallow=False), "wbreplay without --mark-clean wrote the cache"


def test_wbreplay_mark_clean_killed_and_rerun(workload, tmp_path):
    """With --mark-clean the cache is written last (the superblock record,
    after the backing device is flushed): a kill before that leaves the log
    to be replayed again; after it, a rerun finds nothing to replay."""
    rng = random.Random(2)
    target = tmp_path / "backing.img"
    cache = tmp_path / "cache.img"
    for _ in range(ROUNDS):
        shutil.copyfile(workload / "cache.img", cache)
        shutil.copyfile(workload / "backing.img", target)
        command = [tool_path("wbreplay"), "--cache", cache, "--backing", target, "-q", "--mark-clean"]
        kill_after(command, rng.uniform(0.0, 1.5))
        timed_run(command)
        assert filecmp.cmp(target, workload / "expected.img", shallow=False)
        # Marked clean: a third run replays nothing and the image stays.
        done = subprocess.run([tool_path("wbreplay"), "--cache", cache, "--backing", target, "--dry-run", "--json"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == OK, done.stderr
        assert '"dirty_sectors": 0' in done.stdout


def test_wbrecover_in_place_killed_and_rerun_gives_the_logical_image(workload, tmp_path):
    rng = random.Random(3)
    target = tmp_path / "backing.img"
    command = [tool_path("wbrecover"), "--cache", workload / "cache.img", "--backing", target, "-q"]
    kills = interrupted_then_finished(workload, target, command, rng)
    assert kills > 0, "no kill landed while the tool was writing: the workload is too small to test this"


def test_wbrecover_output_killed_and_rerun_gives_the_logical_image(workload, tmp_path):
    """Onto a copy: a killed run leaves a partial output file behind; the
    rerun takes it as its output again and must still produce the image, and
    the backing image is never written."""
    rng = random.Random(4)
    output = tmp_path / "out.img"
    backing = tmp_path / "backing.img"
    shutil.copyfile(workload / "backing.img", backing)
    command = [tool_path("wbrecover"), "--cache", workload / "cache.img", "--backing", backing, "--output", output,
               "-q"]
    full = timed_run(command)
    kills = 0
    for _ in range(ROUNDS):
        output.unlink(missing_ok=True)
        kills += kill_after(command, rng.uniform(0.0, full * 1.1))
        timed_run(command)
        assert filecmp.cmp(output, workload / "expected.img", shallow=False)
        assert filecmp.cmp(backing, workload / "backing.img", shallow=False), "wbrecover --output wrote the backing"
    assert kills > 0
