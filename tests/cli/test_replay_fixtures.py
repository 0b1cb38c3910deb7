"""Replay against real targets: for every fixture the upstream module wrote
in the VM, wbreplay onto a copy of the backing image must give exactly the
device the target itself presented after its own replay (logical.sha256,
read through the target in the guest). wbrecover --output must agree."""
import json

import pytest

from conftest import fixture_images, run, sha256, tool_path, upstream_fixtures

FIXTURES = upstream_fixtures()


def expected_digest(fixture):
    return (fixture / "logical.sha256").read_text().split()[0]


def test_upstream_fixtures_exist_or_skip():
    if not FIXTURES:
        pytest.skip("no fixtures under fixtures/upstream yet")
    assert all((f / "logical.sha256").exists() for f in FIXTURES)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
def test_wbreplay_gives_what_the_target_presented(tmp_path, fixture):
    cache, backing = fixture_images(fixture, tmp_path)
    cache_before = sha256(cache)
    result = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "--json", "-q"])
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["written"]["bytes"] == report["plan"]["bytes"]
    assert sha256(backing) == expected_digest(fixture)
    assert sha256(cache) == cache_before


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
def test_wbrecover_output_gives_what_the_target_presented(tmp_path, fixture):
    cache, backing = fixture_images(fixture, tmp_path)
    backing_before = sha256(backing)
    out = tmp_path / "recovered.img"
    result = run([tool_path("wbrecover"), "--cache", cache, "--backing", backing, "--output", out, "-q"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert sha256(out) == expected_digest(fixture)
    assert sha256(backing) == backing_before
