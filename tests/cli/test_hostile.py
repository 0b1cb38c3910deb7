"""Hostile and odd images and operator mistakes: overlapping unaligned
metablocks, sectors at the top of the 64-bit range, a corrupt superblock
record, numbers out of range, a refused run that must leave nothing behind,
and the memory of `wbdump --metablocks --json` on a large log."""
import json
import os
import pathlib
import subprocess

import pytest

import craft
from conftest import FIXTURES, decompress, run, sha256, tool_path

OK, DAMAGE, USAGE, OPERATIONAL, REFUSED = 0, 1, 2, 3, 4
TOP = 2**64


def tool(name, *args, **kwargs):
    return run([tool_path(name), *args], **kwargs)


def zeros(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


@pytest.fixture
def demo(tmp_path):
    cache = decompress(FIXTURES / "synthetic" / "demo" / "cache.img.zst", tmp_path / "cache.img")
    backing = decompress(FIXTURES / "synthetic" / "demo" / "backing.img.zst", tmp_path / "backing.img")
    return cache, backing


def sectors(path, first, count):
    with open(path, "rb") as f:
        f.seek(first * 512)
        return f.read(count * 512)


# --- overlapping unaligned metablocks: newest wins per sector, everywhere -----------------------

def overlap_cache(tmp_path):
    """Segment 1 holds a block at sector 9, segment 2 (newer) one at sector 8."""
    older, newer = craft.block_data(1, 9), craft.block_data(2, 8)
    cache = craft.make_cache(tmp_path / "overlap.img", 4, [(1, [(9, 0xFF, older)]), (2, [(8, 0xFF, newer)])])
    return cache, older, newer


def test_overlapping_unaligned_metablocks_replay_newest_per_sector(tmp_path):
    cache, older, newer = overlap_cache(tmp_path)
    backing = zeros(tmp_path / "backing.img", 1 << 20)
    result = tool("wbreplay", "--cache", cache, "--backing", backing, "-q")
    assert result.returncode in (OK, DAMAGE), result.stderr
    assert sectors(backing, 8, 8) == newer  # 8..15: segment 2, the newest copy of each
    assert sectors(backing, 16, 1) == older[7 * 512:]  # 16: only segment 1 holds it
    block = json.loads(tool("wbdump", cache, "--block", "12", "--json").stdout)["block"]
    assert block["segment_id"] == 2
    dump = json.loads(tool("wbdump", cache, "--json").stdout)
    assert dump["log"]["dirty_sectors"] == 9
    codes = {f["code"]: f["severity"] for f in dump["findings"]}
    assert codes.get("metablock-sector-unaligned") == "error"


def test_overlapping_unaligned_metablocks_recover_like_replay(tmp_path):
    cache, _, newer = overlap_cache(tmp_path)
    backing = zeros(tmp_path / "backing.img", 1 << 20)
    replayed = tmp_path / "replayed.img"
    replayed.write_bytes(backing.read_bytes())
    assert tool("wbreplay", "--cache", cache, "--backing", replayed, "-q").returncode in (OK, DAMAGE)
    out = tmp_path / "out.img"
    for extra in ((), ("--salvage",)):
        result = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", out, "-q", *extra)
        assert result.returncode in (OK, DAMAGE), result.stderr
        assert sha256(out) == sha256(replayed)
    assert sectors(out, 8, 8) == newer


# --- 64-bit edges -------------------------------------------------------------------------------

def test_lost_ranges_at_the_top_of_the_sector_range_add_up(tmp_path):
    blocks = [(TOP - 24, 0xFF, craft.block_data(1, 0)), (TOP - 16, 0xFF, craft.block_data(2, 0)),
              (TOP - 8, 0xFF, craft.block_data(3, 0)), (64, 0xFF, craft.block_data(4, 64))]
    cache = craft.make_cache(tmp_path / "top.img", 4, [(1, blocks)])
    backing = zeros(tmp_path / "backing.img", 1 << 20)
    report_path = tmp_path / "report.json"
    result = tool("wbrecover", "--cache", cache, "--backing", backing, "--force", "--report", report_path, "-q")
    assert result.returncode == DAMAGE, result.stderr
    report = json.loads(report_path.read_text())
    beyond = [r for r in report["lost"] if r["reason"] == "beyond-backing"]
    assert beyond == [{"sector": TOP - 24, "sectors": 24, "bytes": 24 * 512, "reason": "beyond-backing"}]
    assert report["lost_sectors"] == 24
    assert any("24 dirty sector(s) lie past the end" in note for note in report["notes"])
    assert f"sectors {TOP - 24}..{TOP - 1} (24 sector(s)): beyond-backing" in result.stdout


# --- a corrupt superblock record ----------------------------------------------------------------

def test_record_past_the_newest_segment_is_reported_and_salvage_replays_the_ring(wbsynth, tmp_path):
    cache, backing = wbsynth(tmp_path, "--record", str(TOP - 1), "--writes", "300", "--backing-pattern")
    expected = tmp_path / "expected.img"
    wbsynth(tmp_path, "--writes", "300", "--backing-pattern", "--expected", expected,
                                         name="same")
    before = sha256(backing)

    dry = tool("wbreplay", "--cache", cache, "--backing", backing, "--dry-run")
    assert dry.returncode == DAMAGE, dry.stdout + dry.stderr
    assert "sb-record-out-of-range" in dry.stdout and "wbrecover --salvage" in dry.stdout
    replay = tool("wbreplay", "--cache", cache, "--backing", backing, "-q")
    assert replay.returncode == DAMAGE
    assert sha256(backing) == before  # the kernel's rule: nothing after the record is replayed

    out = tmp_path / "out.img"
    kernel = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", out, "-q")
    assert kernel.returncode == DAMAGE, kernel.stdout + kernel.stderr
    assert "--salvage replays them" in kernel.stdout

    report_path = tmp_path / "report.json"
    salvage = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", out, "--salvage",
                   "--report", report_path, "-q")
    assert salvage.returncode == OK, salvage.stdout + salvage.stderr
    assert sha256(out) == sha256(expected)
    report = json.loads(report_path.read_text())
    assert "sb-record-out-of-range" in {f["code"] for f in report["diagnosis"]["findings"]}
    assert any("ignores it" in note and "safe" in note for note in report["notes"])


# --- options and refusals -----------------------------------------------------------------------

@pytest.mark.parametrize("option,value", [("--slot", "-1"), ("--slot", str(TOP)), ("--segment", "-3"),
                                          ("--block", str(TOP + 5)), ("--slot", "1x")])
def test_numbers_out_of_range_are_usage_errors_before_any_output(demo, option, value):
    cache, _ = demo
    result = tool("wbdump", cache, option, value)
    assert result.returncode == USAGE, result.stdout
    assert result.stdout == "" and result.stderr.startswith("wbdump: error:")


def test_slot_past_the_end_is_a_usage_error_before_any_output(demo):
    cache, _ = demo
    for args in (("--slot", "6"), ("--slot", "6", "--json")):
        result = tool("wbdump", cache, *args)
        assert result.returncode == USAGE
        assert result.stdout == "" and "past the last slot" in result.stderr


def test_segment_option_finds_a_misplaced_segment(tmp_path):
    # Segment 3 belongs in slot 2 of 4, but sits in slot 0.
    cache = craft.make_cache(tmp_path / "misplaced.img", 4,
                             [(3, [(0, 0xFF, craft.block_data(3, 0))], 0)])
    result = tool("wbdump", cache, "--segment", "3", "--json")
    assert result.returncode == DAMAGE, result.stderr
    doc = json.loads(result.stdout)
    assert doc["segment"]["id"] == 3 and doc["segment"]["slot"] == 0
    assert "slot-mismatch" in {f["code"] for f in doc["findings"]}


def test_refused_recovery_leaves_no_output_file(tmp_path, demo):
    _, backing = demo
    tiny = tmp_path / "tiny.img"
    tiny.write_bytes(b"\1" * 1000)
    out = tmp_path / "new-output.img"
    result = tool("wbrecover", "--cache", tiny, "--backing", backing, "--output", out, "-q")
    assert result.returncode == REFUSED
    assert not out.exists()


def test_mark_clean_with_dry_run_is_not_a_failure(demo):
    cache, backing = demo
    before = sha256(cache), sha256(backing)
    result = tool("wbreplay", "--cache", cache, "--backing", backing, "--dry-run", "--mark-clean")
    assert result.returncode == OK, result.stdout + result.stderr
    assert (sha256(cache), sha256(backing)) == before


def test_an_output_larger_than_the_backing_keeps_no_stale_tail(demo, tmp_path):
    cache, backing = demo
    replayed = tmp_path / "replayed.img"
    replayed.write_bytes(backing.read_bytes())
    assert tool("wbreplay", "--cache", cache, "--backing", replayed, "-q").returncode == OK
    out = tmp_path / "out.img"
    out.write_bytes(b"\xab" * (2 * os.path.getsize(backing)))
    result = tool("wbrecover", "--cache", cache, "--backing", backing, "--output", out, "-q")
    assert result.returncode == OK, result.stderr
    assert os.path.getsize(out) == os.path.getsize(backing)
    assert sha256(out) == sha256(replayed)


def test_an_empty_cache_is_too_small_not_an_io_error(demo, tmp_path):
    _, backing = demo
    empty = tmp_path / "empty.img"
    empty.write_bytes(b"")
    for name, args, code in (("wbdump", (empty,), DAMAGE),
                             ("wbreplay", ("--cache", empty, "--backing", backing), REFUSED),
                             ("wbrecover", ("--cache", empty, "--backing", backing), REFUSED)):
        result = tool(name, *args)
        assert result.returncode == code, (name, result.stdout, result.stderr)
        text = result.stdout + result.stderr
        assert "Input/output error" not in text, (name, text)
        assert "smaller than" in text or "cache-too-small" in text, (name, text)


# --- memory: --metablocks --json streams -------------------------------------------------------

def peak_rss_kib(tmp_path, args):
    """Peak RSS of the tool alone. /usr/bin/time, not a fork of this interpreter:
    a child's maxrss counts the memory of the process it was forked from."""
    out = tmp_path / "maxrss"
    result = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(out), *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return result.returncode, int(out.read_text().split()[-1])


def test_metablocks_json_memory_stays_near_text_mode(wbsynth, tmp_path):
    cache, _ = wbsynth(tmp_path, "--cache-mib", "160", "--backing-mib", "512", "--writes", "40000",
                       "--partial-percent", "0", "--flush-every", "0")
    wbdump = tool_path("wbdump")
    text_code, text_rss = peak_rss_kib(tmp_path, [wbdump, cache, "--metablocks"])
    json_code, json_rss = peak_rss_kib(tmp_path, [wbdump, cache, "--metablocks", "--json"])
    assert text_code == json_code == OK
    assert json_rss <= 1.5 * text_rss, f"peak RSS: JSON {json_rss} KiB, text {text_rss} KiB"
