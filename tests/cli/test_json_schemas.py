"""Every tool's JSON validates against its schema (docs/schemas/), stdout holds
that one document and nothing else, and the same fact has the same shape in
every document: the log (log.stop.reason) and the geometry."""
import json
import os
import pathlib

import jsonschema
import pytest

from conftest import ROOT, fixture_images, run, synthetic_fixtures, tool_path, upstream_fixtures

SCHEMAS = ROOT / "docs" / "schemas"


def load_schemas():
    store = {}
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        store[schema["$id"]] = schema
    return store


STORE = load_schemas()


def validate(doc, tool):
    schema = STORE[f"https://wbkit.invalid/schemas/{tool}-1.schema.json"]
    resolver = jsonschema.RefResolver.from_schema(schema, store=STORE)
    jsonschema.Draft202012Validator(schema, resolver=resolver).validate(doc)
    assert doc["schema"] == f"{tool}/1"


def one_document(done):
    """stdout must be exactly one JSON document: no text before or after it."""
    return json.loads(done.stdout)


FIXTURES = synthetic_fixtures() + upstream_fixtures()


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f"{p.parent.name}/{p.name}" for p in FIXTURES])
def test_all_three_tools_validate_and_agree_on_the_log(fixture, tmp_path):
    cache, backing = fixture_images(fixture, tmp_path)

    dump = run([tool_path("wbdump"), "--cache", cache, "--backing", backing, "--json", "--metablocks", "--block", "0",
                "--slot", "0", "-q"])
    assert dump.returncode in (0, 1), dump.stderr
    dump_doc = one_document(dump)
    validate(dump_doc, "wbdump")

    # --force: wbreplay refuses a log the kernel refuses (corrupt-middle);
    # forced, its document still says where the walk stops, as the others do.
    replay = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--dry-run", "--json", "--force",
                  "-q"])
    assert replay.returncode in (0, 1), replay.stderr
    replay_doc = one_document(replay)
    validate(replay_doc, "wbreplay")

    recover = run([tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--output", tmp_path / "out.img",
                   "--json", "-q"])
    assert recover.returncode in (0, 1), recover.stderr
    recover_doc = one_document(recover)
    validate(recover_doc, "wbrecover")

    # One fact, one shape: where replay stops, the ids, the dirty data.
    assert dump_doc["log"] == replay_doc["log"] == recover_doc["log"]
    assert dump_doc["geometry"] == replay_doc["geometry"] == recover_doc["geometry"]
    assert dump_doc["findings"] == recover_doc["diagnosis"]["findings"]

    # A replay that writes validates too (the "written" part).
    wrote = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--json", "--force", "-q"])
    assert wrote.returncode in (0, 1), wrote.stderr
    validate(one_document(wrote), "wbreplay")


def test_report_dash_is_stdout_and_creates_no_file(tmp_path):
    fixture = ROOT / "fixtures" / "synthetic" / "demo"
    cache, backing = fixture_images(fixture, tmp_path)
    done = run([tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--output", tmp_path / "out.img",
                "--report", "-", "-q"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    validate(one_document(done), "wbrecover")
    assert not (tmp_path / "-").exists()
    # --report FILE still writes the same document to the file, and text to stdout.
    report = tmp_path / "report.json"
    done = run([tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--output", tmp_path / "out2.img",
                "--report", report, "-q"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("diagnosis")
    validate(json.loads(report.read_text()), "wbrecover")

