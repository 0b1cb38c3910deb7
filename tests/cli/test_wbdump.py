"""wbdump from the outside: exit codes, bad input, output content, and the
promise that it never writes.
What every tool shares (help, usage errors, unusable input) is in
test_contract.py."""
import json
import os
import subprocess

import pytest

from conftest import DAMAGE, OK, OPERATIONAL, USAGE, run, sha256, tool_path


def wbdump(*args):
    return run([tool_path("wbdump"), *args])


def dump_json(*args):
    result = wbdump("--json", *args)
    assert result.returncode in (OK, DAMAGE), result.stderr
    return result.returncode, json.loads(result.stdout)


def codes(doc):
    return {f["code"] for f in doc["findings"]}


@pytest.fixture
def good_cache(tmp_path, wbsynth):
    return wbsynth(tmp_path, "--cache-mib", "4", "--backing-mib", "8", "--writes", "600", "--seed", "11",
                   "--partial-percent", "30", "--flush-every", "50")


def test_unreadable_file(tmp_path):
    image = tmp_path / "secret.img"
    image.write_bytes(b"\0" * 4096)
    image.chmod(0o600)
    tmp_path.chmod(0o755)
    if os.geteuid() == 0:
        # root reads anything: drop to nobody for this one run
        args = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", tool_path("wbdump"), image]
    else:
        image.chmod(0)
        args = [tool_path("wbdump"), image]
    result = run(args)
    assert result.returncode == OPERATIONAL, result.stderr
    assert "Permission denied" in result.stderr


def test_tiny_file_is_too_small_for_a_cache(tmp_path):
    image = tmp_path / "tiny.img"
    image.write_bytes(b"\0" * 4096)
    before = sha256(image)
    code, doc = dump_json(image)
    assert code == DAMAGE
    assert "cache-too-small" in codes(doc)
    assert doc["geometry"]["nr_segments"] == 0
    assert sha256(image) == before


def test_empty_file(tmp_path):
    image = tmp_path / "empty.img"
    image.write_bytes(b"")
    code, doc = dump_json(image)
    assert code == DAMAGE
    assert "cache-too-small" in codes(doc)


def test_all_zero_image_is_unformatted(tmp_path):
    image = tmp_path / "zero.img"
    with open(image, "wb") as f:
        f.truncate(4 << 20)
    before = sha256(image)
    code, doc = dump_json(image)
    assert code == DAMAGE
    assert "bad-magic" in codes(doc)
    assert doc["superblock"]["magic_ok"] is False
    assert doc["log"]["max_id"] == 0
    assert sha256(image) == before


@pytest.mark.parametrize("seed", range(5))
def test_random_garbage_is_reported_not_crashed_on(tmp_path, seed):
    import random

    rng = random.Random(seed)
    image = tmp_path / "garbage.img"
    data = bytearray(rng.getrandbits(8) for _ in range(3 << 20))
    if seed % 2:
        data[0:4] = (0x57427374).to_bytes(4, "little")  # get past the magic
    image.write_bytes(bytes(data))
    before = sha256(image)
    result = wbdump("--json", "--metablocks", image)
    assert result.returncode == DAMAGE, result.stderr
    doc = json.loads(result.stdout)
    assert doc["findings"]
    assert sha256(image) == before


def test_good_cache_reports_log_and_no_damage(good_cache):
    cache, backing = good_cache
    before = sha256(cache)
    code, doc = dump_json(cache, "--backing", backing)
    assert code == OK
    assert doc["superblock"]["magic_ok"] is True
    assert doc["geometry"]["nr_segments"] == 6
    log = doc["log"]
    assert log["last_flushed_id"] == log["max_id"] > 6
    assert log["last_writeback_id"] == log["last_flushed_id"] - 6
    assert log["oldest_id"] == log["last_writeback_id"] + 1
    assert log["dirty_blocks"] > 0
    assert log["dirty_sectors"] * 512 == log["writeback_bytes"]
    assert log["stop"]["reason"] == "end-of-ring"
    assert doc["findings"] == []
    assert sha256(cache) == before


def test_text_summary_names_the_ids(good_cache):
    cache, _ = good_cache
    _, doc = dump_json(cache)
    result = wbdump(cache)
    assert result.returncode == OK
    assert f"last_flushed_id {doc['log']['last_flushed_id']}" in result.stdout
    assert f"{doc['log']['dirty_blocks']} block(s)" in result.stdout
    assert "findings    none" in result.stdout


def test_small_backing_device_is_a_finding(tmp_path, good_cache):
    cache, _ = good_cache
    small = tmp_path / "small-backing.img"
    with open(small, "wb") as f:
        f.truncate(1 << 20)
    code, doc = dump_json(cache, "--backing", small)
    assert code == DAMAGE
    beyond = [f for f in doc["findings"] if f["code"] == "metablock-sector-beyond-backing"]
    assert beyond
    assert all(f["place"]["backing_sector"] + 8 > 2048 for f in beyond)


def test_segment_and_slot_views_agree(good_cache):
    cache, _ = good_cache
    _, doc = dump_json(cache)
    newest = doc["log"]["last_flushed_id"]
    _, by_id = dump_json(cache, "--segment", newest)
    slot = by_id["segment"]["slot"]
    _, by_slot = dump_json(cache, "--slot", slot)
    assert by_id["segment"] == by_slot["segment"]
    seg = by_id["segment"]
    assert seg["id"] == newest
    assert seg["checksum_ok"] is True
    assert seg["checksum_stored"] == seg["checksum_computed"]
    assert len(seg["metablocks"]) == seg["length"]
    assert seg["in_log"] is True


def test_metablock_list_covers_the_log(good_cache):
    cache, _ = good_cache
    _, doc = dump_json(cache, "--metablocks")
    ids = [m["segment_id"] for m in doc["metablocks"]]
    assert ids == sorted(ids)
    assert ids[0] == doc["log"]["oldest_id"] and ids[-1] == doc["log"]["newest_id"]


def test_block_lookup_finds_the_newest_copy(good_cache):
    cache, _ = good_cache
    _, doc = dump_json(cache, "--metablocks")
    last = doc["metablocks"][-1]
    bits = last["dirty_bits"] or 0xFF
    sector = last["sector"] + (bits & -bits).bit_length() - 1  # a sector this entry decides
    _, found = dump_json(cache, "--block", sector)
    block = found["block"]
    assert block["in_cache"] is True
    assert block["segment_id"] == last["segment_id"]
    assert block["block_index"] == last["index"]
    text = wbdump(cache, "--block", sector).stdout
    assert f"backing sector {sector}: newest copy in segment {last['segment_id']}" in text
    assert "wbsynth seed=11" in text  # the hexdump shows the stamped data


def test_block_lookup_of_an_uncached_sector(good_cache):
    cache, _ = good_cache
    _, found = dump_json(cache, "--block", 10**12)
    assert found["block"]["in_cache"] is False


@pytest.mark.parametrize(
    "args",
    [["--slot", "0", "--segment", "1"], ["--slot", "999"], ["--segment", "0"], ["--segment", "999999"],
     ["--block", "minus-one"]],
)
def test_bad_selectors_are_usage_errors(good_cache, args):
    cache, _ = good_cache
    result = wbdump(cache, *args)
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.startswith("wbdump: error:")


def test_corrupt_middle_segment(tmp_path, wbsynth):
    cache, _ = wbsynth(tmp_path, "--cache-mib", "4", "--writes", "500", "--flush-every", "100", "--corrupt-id", "3")
    code, doc = dump_json(cache)
    assert code == DAMAGE
    assert {"checksum-mismatch", "valid-segments-discarded"} <= codes(doc)
    assert doc["log"]["last_flushed_id"] == 2
    assert doc["log"]["stop"]["reason"] == "checksum-mismatch"
    assert doc["log"]["discarded_segments"] >= 1


def test_headers_only_mode_does_not_know_the_stop_point(tmp_path, wbsynth):
    cache, _ = wbsynth(tmp_path, "--cache-mib", "4", "--writes", "500", "--flush-every", "100", "--corrupt-id", "3")
    code, doc = dump_json(cache, "--no-verify")
    assert doc["log"]["verified"] is False
    assert doc["log"]["stop"]["reason"] == "not-verified"
    assert "checksum-mismatch" not in codes(doc)


def test_block_device_through_a_loop_device(good_cache):
    cache, _ = good_cache
    attach = subprocess.run(["losetup", "--find", "--show", "--read-only", str(cache)], capture_output=True, text=True)
    if attach.returncode != 0:
        pytest.skip(f"loop devices unavailable here: {attach.stderr.strip()}")
    loop = attach.stdout.strip()
    try:
        _, from_file = dump_json(cache)
        code, from_device = dump_json(loop)
        assert code == OK
        assert from_device["geometry"] == from_file["geometry"]
        assert from_device["log"] == from_file["log"]
    finally:
        subprocess.run(["losetup", "-d", loop])
