"""An append in place cut between its two writes (docs/FORMAT.md, "Segment"
and "Checksum"): the header still holds the committed length and checksum,
its metablock area already names the blocks past them. The tools read the
segment as valid at its stored length, say so as an info finding, exit as
for a clean log, and replay its committed blocks only. Images are crafted
byte by byte (craft.py), not by the library."""
import json

from conftest import DAMAGE, OK, run, tool_path
from craft import BLOCK, SEGMENT_SIZE, SUPERBLOCK_SIZE, block_data, cut_append, make_cache
from replay_model import dirty_sources, log_facts
from test_json_schemas import validate

SLOTS = 4


def appended_cache(path, committed=4, damaged=False):
    """Segment 1: blocks 0..2. Segment 2: ten blocks at backing block 32 on,
    committed at `committed`; damaged: a byte of its data block 0 flipped,
    so neither reading of the checksum matches."""
    first = [(8 * i, 0xFF, block_data(1, 8 * i)) for i in range(3)]
    second = [(8 * (32 + i), 0xFF, block_data(2, 8 * (32 + i))) for i in range(10)]
    make_cache(path, SLOTS, [(1, first), (2, second)])
    cut_append(path, SLOTS, 2, committed)
    if damaged:
        data = bytearray(path.read_bytes())
        data[SUPERBLOCK_SIZE + SEGMENT_SIZE + BLOCK] ^= 1
        path.write_bytes(bytes(data))
    return path


def dump(*args):
    done = run([tool_path("wbdump"), "--json", "-q", *args])
    return done.returncode, json.loads(done.stdout)


def test_wbdump_reads_the_segment_at_its_committed_length(tmp_path):
    cache = appended_cache(tmp_path / "cache.img")
    code, doc = dump(cache, "--slot", "1")
    assert code == OK
    validate(doc, "wbdump")
    assert doc["damage"] is False
    assert [(f["code"], f["severity"], f["place"]["slot"], f["place"]["segment_id"]) for f in doc["findings"]] == [
        ("append-not-committed", "info", 1, 2)]
    assert "the 6 metablock(s) past it are ignored" in doc["findings"][0]["message"]
    log = doc["log"]
    assert (log["segments"], log["last_flushed_id"], log["stop"]["reason"]) == (2, 2, "end-of-ring")
    assert log["dirty_blocks"] == 3 + 4
    seg = doc["segment"]
    assert (seg["state"], seg["checksum_ok"], seg["length"], seg["ignored_metablocks"]) == ("valid", True, 4, 6)
    assert seg["checksum_computed"] == seg["checksum_stored"]
    assert len(seg["metablocks"]) == 4
    # The plain model of the rules reads the log the same.
    assert {k: log[k] for k in log_facts(cache.read_bytes())} == log_facts(cache.read_bytes())

    text = run([tool_path("wbdump"), "-q", cache, "--slot", "1"])
    assert text.returncode == OK, text.stderr
    assert "append-not-committed" in text.stdout
    assert "with the 6 metablock(s) past length read as zero: valid" in text.stdout


def test_a_cut_at_length_zero_leaves_an_empty_valid_segment(tmp_path):
    cache = appended_cache(tmp_path / "cache.img", committed=0)
    code, doc = dump(cache)
    assert code == OK
    assert [f["code"] for f in doc["findings"]] == ["append-not-committed"]
    assert (doc["log"]["segments"], doc["log"]["dirty_blocks"]) == (2, 3)


def test_wbreplay_writes_the_committed_blocks_only(tmp_path):
    cache = appended_cache(tmp_path / "cache.img")
    backing = tmp_path / "backing.img"
    backing.write_bytes(bytes(1 << 20))
    sources = dirty_sources(cache.read_bytes())
    assert sorted(sources) == list(range(3 * 8)) + list(range(32 * 8, 36 * 8))
    done = run([tool_path("wbreplay"), "--cache", cache, "--backing", backing, "-q"])
    assert done.returncode == OK, done.stderr
    written = backing.read_bytes()
    for block in list(range(3)) + list(range(32, 36)):
        tag = 1 if block < 3 else 2
        assert written[block * BLOCK:(block + 1) * BLOCK] == block_data(tag, 8 * block), block
    # Blocks 36..41 are on the cache, but their append never committed.
    assert written[36 * BLOCK:42 * BLOCK] == bytes(6 * BLOCK)


def test_a_checksum_that_matches_neither_reading_is_a_torn_newest_segment(tmp_path):
    cache = appended_cache(tmp_path / "cache.img", damaged=True)
    code, doc = dump(cache)
    names = {f["code"] for f in doc["findings"]}
    assert "torn-newest-segment" in names
    assert "append-not-committed" not in names
    # Its tail is what it always was: a non-zero area the checksum does not explain.
    assert "unused-metablock-nonzero" in names
    assert code == DAMAGE
    assert (doc["log"]["segments"], doc["log"]["last_flushed_id"]) == (1, 1)
    assert {k: doc["log"][k] for k in log_facts(cache.read_bytes())} == log_facts(cache.read_bytes())
