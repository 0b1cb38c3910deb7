"""A segment lost in flight (docs/FORMAT.md, replay step 2) on the crash
state fixtures/crash-findings/upstream-lost-in-flight: upstream's module had
two segment writes in flight, the later one landed and the earlier one did
not, so its slot still holds the segment one lap older. The shared replay
decision refused such states before the rule (ids-not-rising, issue 57);
now wbreplay replays them and keeps every acknowledged write (wbstamp
verify, as the DESCRIPTION says), wbdump names the slot, and after
wbreplay --mark-clean (which writes the trust record) the log still reads
without a refusal: the lost slot was zeroed first."""
import json
import re
import shutil
import subprocess

import pytest

from conftest import DAMAGE, FIXTURES, OK, ROOT, fixture_images, run, sha256, tool_path

STATE = FIXTURES / "crash-findings" / "upstream-lost-in-flight"


@pytest.fixture(scope="module")
def wbstamp(tmp_path_factory):
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler for tests/vm/wbstamp.c")
    exe = tmp_path_factory.mktemp("wbstamp") / "wbstamp"
    subprocess.run([cc, "-O2", "-o", str(exe), str(ROOT / "tests" / "vm" / "wbstamp.c")], check=True)
    return exe


def verify(wbstamp, device):
    found = re.search(r"wbstamp verify BACKING (.*?)\.?\s*$", (STATE / "DESCRIPTION").read_text())
    assert found
    done = run([wbstamp, "verify", device, *found.group(1).split()])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verify_mismatches=0" in done.stdout, done.stdout


def dump(cache, backing):
    done = run([tool_path("wbdump"), "--json", "--backing", backing, cache])
    assert done.returncode in (OK, DAMAGE), done.stdout + done.stderr
    return json.loads(done.stdout)


def codes(doc, code):
    return [f for f in doc["findings"] if f["code"] == code]


def test_wbdump_names_the_lost_slot_and_does_not_refuse(tmp_path):
    cache, backing = fixture_images(STATE, tmp_path)
    doc = dump(cache, backing)
    lost = codes(doc, "lost-in-flight-skipped")
    assert len(lost) >= 1
    assert lost[0]["severity"] == "warning"
    assert "lost in flight" in lost[0]["message"]
    assert lost[0]["place"]["slot"] is not None
    assert not codes(doc, "log-refused")
    assert not codes(doc, "id-repeat")


def test_wbreplay_keeps_every_flushed_write(tmp_path, wbstamp):
    cache, backing = fixture_images(STATE, tmp_path)
    cache_before = sha256(cache)
    done = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--json", "-q"])
    assert done.returncode == OK, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["not_replayed"] == []
    assert "lost-in-flight" in {s["reason"] for s in report["segments"]}
    assert sha256(cache) == cache_before
    verify(wbstamp, backing)


def test_mark_clean_leaves_a_log_that_reads_the_same_with_the_trust_record(tmp_path, wbstamp):
    cache, backing = fixture_images(STATE, tmp_path)
    lost_slots = {f["place"]["slot"] for f in codes(dump(cache, backing), "lost-in-flight-skipped")}
    done = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--mark-clean", "-q"])
    assert done.returncode == OK, done.stdout + done.stderr
    verify(wbstamp, backing)
    # The trust record is there now (dm-wbkit's reading: the rule is off),
    # and the lost slot was zeroed before it: no refusal, nothing dirty.
    doc = dump(cache, backing)
    assert not codes(doc, "log-refused")
    assert not codes(doc, "lost-in-flight-skipped")
    slots = {s["slot"]: s for s in doc.get("slots", [])}
    for slot in lost_slots:
        if slot in slots:
            assert slots[slot]["state"] == "empty"
    again = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--json", "-q"])
    assert again.returncode == OK, again.stdout + again.stderr
    assert json.loads(again.stdout)["plan"]["dirty_sectors"] == 0
