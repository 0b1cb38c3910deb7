"""The torn-rewrite rule (docs/FORMAT.md, replay step 2) on the crash states
in fixtures/crash-findings/*-torn-stale-header: a segment write into one of
the oldest slots torn with the old header in place. Upstream's replay stops
there and loses acknowledged writes; wbreplay, and wbrecover onto a copy,
keep every one (checked with wbstamp verify, as each DESCRIPTION says), and
the tools name the skipped slot."""
import json
import re
import shutil
import subprocess

import pytest

from conftest import DAMAGE, FIXTURES, OK, ROOT, fixture_images, run, sha256, tool_path

STATES = [FIXTURES / "crash-findings" / name for name in ("upstream-torn-stale-header", "wbkit-torn-stale-header")]


@pytest.fixture(scope="module")
def wbstamp(tmp_path_factory):
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler for tests/vm/wbstamp.c")
    exe = tmp_path_factory.mktemp("wbstamp") / "wbstamp"
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "tests" / "vm" / "wbstamp.c")], check=True)
    return exe


def verify_args(fixture):
    """The wbstamp verify options the fixture's DESCRIPTION gives."""
    text = (fixture / "DESCRIPTION").read_text()
    found = re.search(r"wbstamp verify BACKING (.*?)\.?\s*$", text)
    assert found, text
    return found.group(1).split()


def verify(wbstamp, device, fixture):
    done = run([wbstamp, "verify", device, *verify_args(fixture)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify_mismatches=0" in done.stdout, done.stdout


@pytest.mark.parametrize("fixture", STATES, ids=[s.name for s in STATES])
def test_wbreplay_keeps_every_flushed_write(fixture, tmp_path, wbstamp):
    cache, backing = fixture_images(fixture, tmp_path)
    cache_before = sha256(cache)
    done = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--json", "-q"])
    assert done.returncode == OK, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["not_replayed"] == []
    assert "torn-rewrite" in {s["reason"] for s in report["segments"]}
    assert sha256(cache) == cache_before
    verify(wbstamp, backing, fixture)


@pytest.mark.parametrize("fixture", STATES, ids=[s.name for s in STATES])
def test_wbdump_names_the_skipped_slot(fixture, tmp_path):
    cache, backing = fixture_images(fixture, tmp_path)
    done = run([tool_path("wbdump"), "--json", "--backing", backing, cache])
    # A warning: media damage there would read the same (docs/FORMAT.md, replay step 2).
    assert done.returncode == DAMAGE, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    skipped = [f for f in doc["findings"] if f["code"] == "torn-rewrite-skipped"]
    assert len(skipped) == 1
    assert skipped[0]["severity"] == "warning"
    assert "read as damage, the log would stop at it" in skipped[0]["message"]
    assert "wbrecover --no-torn-rewrite" in skipped[0]["message"]
    assert not [f for f in doc["findings"] if f["code"] == "log-refused"]
    slot = skipped[0]["place"]["slot"]
    assert slot is not None and skipped[0]["place"]["segment_id"] is not None
    assert "count as written back" in skipped[0]["message"]
    assert doc["log"]["stop"]["reason"] == "end-of-ring"
    assert doc["log"]["last_writeback_id"] >= skipped[0]["place"]["segment_id"]


@pytest.mark.parametrize("fixture", STATES, ids=[s.name for s in STATES])
def test_wbrecover_reports_what_upstream_would_have_lost(fixture, tmp_path, wbstamp):
    cache, backing = fixture_images(fixture, tmp_path)
    out = tmp_path / "recovered.img"
    done = run([tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--output", out, "--json", "-q"])
    assert done.returncode == OK, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    torn = doc["torn_rewrite"]
    assert torn is not None
    assert torn["upstream_dropped_segments"] == doc["log"]["segments"] > 0
    assert torn["upstream_lost_sectors"] == doc["log"]["dirty_sectors"] > 0
    assert doc["nothing_lost"] is True
    assert any("Upstream's replay stops at the first checksum that fails" in n for n in doc["notes"])
    verify(wbstamp, out, fixture)

    text = run([tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--output", tmp_path / "again.img"])
    assert text.returncode == OK, text.stdout + text.stderr
    assert "torn-rewrite-skipped" in text.stdout


@pytest.mark.parametrize("fixture", STATES, ids=[s.name for s in STATES])
def test_wbrecover_takes_the_other_reading_when_asked(fixture, tmp_path):
    cache, backing = fixture_images(fixture, tmp_path)
    cache_before = sha256(cache)
    done = run([tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--no-torn-rewrite", "--dry-run",
                "--json", "-q"])
    assert done.returncode in (OK, DAMAGE), done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["torn_rewrite"] is None
    assert doc["log"]["stop"]["reason"] == "checksum-mismatch"
    refused = [n for n in doc["notes"] if "log-refused" in n]
    assert len(refused) == 1 and "torn rewrite" in refused[0], doc["notes"]
    assert sha256(cache) == cache_before
