"""Every committed fixture dumps to its recorded expectation, and for caches
written by the upstream kernel target, to what that target itself reported
after replaying the same images. The log facts of every fixture also equal
what an independent model of the replay rules (replay_model.py) computes
from the image's bytes: the recorded expectation is wbdump's own output, the
model is not."""
import json

import pytest

from conftest import FIXTURES, decompress, fixture_images, run, synthetic_fixtures, tool_path, upstream_fixtures
from replay_model import log_facts


def dump(cache, *extra):
    result = run([tool_path("wbdump"), "--json", *extra, cache])
    assert result.returncode in (0, 1), result.stderr
    doc = json.loads(result.stdout)
    doc.pop("cache")
    doc["exit_code"] = result.returncode
    return doc


@pytest.mark.parametrize("fixture", synthetic_fixtures(), ids=lambda p: p.name)
def test_synthetic_fixture_matches_expectation(tmp_path, fixture):
    cache, backing = fixture_images(fixture, tmp_path)
    expected = json.loads((fixture / "expected.json").read_text())
    assert dump(cache, "--backing", backing) == expected
    assert (fixture / "DESCRIPTION").read_text().strip()


def read_kv(path):
    pairs = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            pairs[key.strip()] = value.strip()
    return pairs


@pytest.mark.parametrize("fixture", upstream_fixtures(), ids=lambda p: p.name)
def test_upstream_fixture_agrees_with_the_kernel(tmp_path, fixture):
    cache = decompress(fixture / "cache.img.zst", tmp_path / "cache.img")
    status = read_kv(fixture / "status.kv")
    doc = dump(cache)
    log = doc["log"]
    assert log["last_flushed_id"] == int(status["last_flushed_id"])
    assert doc["geometry"]["nr_segments"] == int(status["nr_segments"])
    # Where the log has not wrapped, the target wrote nothing back while
    # constructing, so the write-back point and dirty count must agree too.
    if log["max_id"] <= doc["geometry"]["nr_segments"]:
        assert log["last_writeback_id"] == int(status["last_writeback_id"])
        assert log["dirty_blocks"] == int(status["nr_dirty_cache_blocks"])


def every_cache_fixture():
    return sorted(p.parent for p in FIXTURES.glob("*/*/cache.img.zst"))


@pytest.mark.parametrize("fixture", every_cache_fixture(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_log_facts_agree_with_the_rules_model(tmp_path, fixture):
    cache = decompress(fixture / "cache.img.zst", tmp_path / "cache.img")
    facts = log_facts(cache.read_bytes())
    log = dump(cache)["log"]
    assert {k: log[k] for k in facts} == facts


def test_there_are_fixtures():
    assert len(synthetic_fixtures()) >= 5
