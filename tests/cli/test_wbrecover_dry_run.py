"""wbrecover --dry-run: the same report (text and JSON) and exit status as a
real run with the same options, on every fixture and both policies, in place
and with --output; and nothing written: the cache, the backing device and an
existing output are byte-identical before and after, no output file is
created, and no device is even opened for writing. --report FILE is still
written (it is the plan, not a device)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import (DAMAGE, FIXTURES, OK, OPERATIONAL, REFUSED, ROOT, cannot_run, fixture_images, run, sha256,
                      synthetic_fixtures, tool_path, upstream_fixtures)
from test_json_schemas import validate


def wbrecover(*args, **kwargs):
    return run([tool_path("wbrecover"), *args], **kwargs)


def crash_finding_fixtures():
    base = FIXTURES / "crash-findings"
    return sorted(p for p in base.iterdir() if (p / "cache.img.zst").exists()) if base.is_dir() else []


FIXTURE_DIRS = synthetic_fixtures() + upstream_fixtures() + crash_finding_fixtures()
CASES = [(f, salvage, output) for f in FIXTURE_DIRS for salvage in (False, True) for output in (False, True)]


def case_id(case):
    fixture, salvage, output = case
    return f"{fixture.parent.name}/{fixture.name}-{'salvage' if salvage else 'kernel'}-{'output' if output else 'in-place'}"


def as_real(doc):
    """A dry run's document as the real run's: only the flag differs."""
    assert doc["dry_run"] is True
    return {**doc, "dry_run": False}


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_dry_run_reports_what_the_real_run_does_and_writes_nothing(case, tmp_path):
    fixture, salvage, to_output = case
    cache, backing = fixture_images(fixture, tmp_path)
    out = tmp_path / "out.img"
    args = ["--cache", cache, "--backing", backing, "-q", *(["--salvage"] if salvage else []),
            *(["--output", out] if to_output else [])]
    before = sha256(cache), sha256(backing)

    dry = wbrecover(*args, "--dry-run", "--json")
    assert dry.returncode in (OK, DAMAGE), dry.stderr
    assert (sha256(cache), sha256(backing)) == before
    assert not out.exists()
    dry_doc = json.loads(dry.stdout)
    validate(dry_doc, "wbrecover")

    real = wbrecover(*args, "--json")
    assert real.returncode == dry.returncode, real.stderr
    real_doc = json.loads(real.stdout)
    assert real_doc["dry_run"] is False
    assert as_real(dry_doc) == real_doc
    if to_output:
        assert out.exists() and sha256(backing) == before[1]


def test_dry_run_of_a_damaged_cache_exits_1_and_says_what_it_would_lose(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path, "--backing-pattern", "--writes", "600", "--flush-every", "25",
                             "--partial-percent", "0", "--corrupt-id", "4")
    before = sha256(cache), sha256(backing)
    dry = wbrecover("--cache", cache, "--backing", backing, "--dry-run", "-q")
    assert dry.returncode == DAMAGE, dry.stderr
    assert (sha256(cache), sha256(backing)) == before
    assert dry.stdout.startswith("dry run: nothing was written")
    assert "\nwould recover: " in dry.stdout and "\nrecovered:" not in dry.stdout
    assert "--salvage takes them" in dry.stdout

    real = wbrecover("--cache", cache, "--backing", backing, "-q")
    assert real.returncode == DAMAGE
    assert sha256(backing) != before[1], "the real run writes the prefix the dry run announced"
    # The same text below the first line, up to the tense.
    dry_body = dry.stdout.split("\n", 2)[2]
    assert dry_body.replace("would recover:", "recovered:").replace("would lose:", "lost:") == real.stdout


def test_dry_run_leaves_an_existing_output_alone_and_reports_to_a_file(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path, "--writes", "900", "--partial-percent", "30")
    out = tmp_path / "out.img"
    # Larger than the backing device: a real run cuts it to size, a dry run must not.
    out_size = backing.stat().st_size + (1 << 20)
    out.write_bytes(b"\xa5" * out_size)
    before = sha256(cache), sha256(backing), sha256(out)
    report = tmp_path / "plan.json"
    dry = wbrecover("--cache", cache, "--backing", backing, "--output", out, "--dry-run", "--report", report, "-q")
    assert dry.returncode == OK, dry.stderr
    assert (sha256(cache), sha256(backing), sha256(out)) == before
    assert out.stat().st_size == out_size
    assert "would be written to" in dry.stdout and "would lose: nothing" in dry.stdout
    plan = json.loads(report.read_text())
    validate(plan, "wbrecover")
    assert plan["dry_run"] is True and plan["devices"]["output"] == str(out)
    assert plan["recovered"]["bytes_written"] > 0

    real_report = tmp_path / "real.json"
    real = wbrecover("--cache", cache, "--backing", backing, "--output", out, "--report", real_report, "-q")
    assert real.returncode == OK, real.stderr
    assert out.stat().st_size == backing.stat().st_size
    assert as_real(plan) == json.loads(real_report.read_text())


def test_dry_run_refuses_and_fails_where_a_real_run_would(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path)
    before = sha256(cache), sha256(backing)
    onto_backing = wbrecover("--cache", cache, "--backing", backing, "--output", backing, "--dry-run")
    assert onto_backing.returncode == REFUSED and "same file" in onto_backing.stderr
    same = wbrecover("--cache", cache, "--backing", cache, "--dry-run")
    assert same.returncode == REFUSED
    nowhere = tmp_path / "no" / "dir" / "out.img"
    real, dry = (wbrecover("--cache", cache, "--backing", backing, "--output", nowhere, "-q", *extra)
                 for extra in ([], ["--dry-run"]))
    assert real.returncode == dry.returncode == OPERATIONAL, dry.stderr
    assert str(nowhere) in dry.stderr and dry.stderr == real.stderr
    blank = tmp_path / "blank.img"
    blank.write_bytes(bytes(cache.stat().st_size))
    unformatted = wbrecover("--cache", blank, "--backing", backing, "--dry-run", "-q")
    assert unformatted.returncode == REFUSED and "no writeboost magic" in unformatted.stderr
    assert (sha256(cache), sha256(backing)) == before
    assert not (tmp_path / "no").exists()


WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")


def test_dry_run_opens_no_device_for_writing(wbsynth, tmp_path):
    if shutil.which("strace") is None:
        cannot_run("strace is not installed")
    cache, backing = wbsynth(tmp_path, "--writes", "300")
    out = tmp_path / "out.img"
    trace = tmp_path / "trace"
    probe = subprocess.run(["strace", "-o", str(trace), "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        cannot_run(f"strace cannot trace here: {probe.stderr.strip()}")

    def opens(*extra):
        done = run(["strace", "-f", "-e", "trace=open,openat,openat2,creat,truncate,ftruncate", "-o", trace,
                    tool_path("wbrecover"), "--cache", cache, "--backing", backing, "-q", *extra])
        assert done.returncode == OK, done.stderr
        calls = {}
        for line in trace.read_text().splitlines():
            for path in (cache, backing, out):
                if f'"{path}"' in line:
                    calls.setdefault(path, []).append(line)
        return calls

    dry_in_place = opens("--dry-run")
    dry_output = opens("--dry-run", "--output", out)
    assert not out.exists()
    for calls in (dry_in_place, dry_output):
        assert set(calls) >= {cache, backing}
        for path, lines in calls.items():
            for line in lines:
                assert not any(flag in line for flag in WRITE_FLAGS) and "truncate" not in line, line
    # The check itself can fail: a real run does open for writing.
    real = opens("--output", out)
    assert any(re.search(r"O_RDWR|O_WRONLY", line) for line in real[out])


def test_bash_completion_offers_dry_run(tmp_path):
    completion = "/usr/share/bash-completion/bash_completion"
    if not os.path.exists(completion):
        cannot_run("bash-completion not installed")
    script = (f". {completion}; . {ROOT}/packaging/bash-completion; PATH={tool_path('wbrecover').parent}:$PATH; "
              "COMP_WORDS=(wbrecover --dr); COMP_CWORD=1; COMP_LINE='wbrecover --dr'; COMP_POINT=${#COMP_LINE}; "
              "_wbkit_tool wbrecover --dr wbrecover; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = run(["bash", "-c", script])
    assert done.stdout.split() == ["--dry-run"], done.stdout + done.stderr
