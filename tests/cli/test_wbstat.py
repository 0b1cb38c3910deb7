"""wbstat from the outside, without a kernel: dmsetup's output as the VM
scenario 89-wbstat captured it from both modules (fixtures/status/), read
from a file or stdin, and a stand-in dmsetup for the live paths (default,
named devices, dead_cause, error_counts, --interval, --prometheus-file). Human, JSON
(validated against docs/schemas/wbstat-1.schema.json, every figure checked
against the raw line) and Prometheus output (parsed by the Prometheus client
library when it is installed, and by a strict line check), bad input, usage
errors, and that only read-only dmsetup commands are run.
test_contract.py covers --help and unknown options."""
import json
import os
import pathlib
import re
import stat
import textwrap

import jsonschema
import pytest

from conftest import DAMAGE, OK, OPERATIONAL, ROOT, USAGE, run, tool_path

DATA = ROOT / "fixtures" / "status"
SCHEMAS = ROOT / "docs" / "schemas"


def wbstat(*args, **kwargs):
    return run([tool_path("wbstat"), *args], **kwargs)


def load_validator():
    store = {}
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text())
        store[schema["$id"]] = schema
    schema = store["https://wbkit.invalid/schemas/wbstat-1.schema.json"]
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, resolver=jsonschema.RefResolver.from_schema(schema, store=store))


VALIDATOR = load_validator()


def document(done, code=OK):
    assert done.returncode == code, done.stderr
    doc = json.loads(done.stdout)
    VALIDATOR.validate(doc)
    assert doc["schema"] == "wbstat/1"
    return doc


def raw_lines(text):
    """{name: tokens after `writeboost`} of named dmsetup lines."""
    lines = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(\S+): (\d+) (\d+) writeboost (.*)", line)
        if m:
            lines[m.group(1)] = m.group(4).split()
    return lines


def capture(tag):
    """A captured sample: the status and the table output of one moment."""
    return (DATA / f"{tag}.status").read_text() + (DATA / f"{tag}.table").read_text()


CAPTURES = {"up": ("dm-writeboost", OK), "wk": ("dm-wbkit", OK), "dead": ("dm-wbkit", DAMAGE)}


def check_device(d, fields, table):
    """Every figure of one device of wbstat's document against its raw lines."""
    n = [int(v) for v in fields[:24]]
    pairs = {fields[i]: int(fields[i + 1]) for i in range(25, len(fields), 2)}
    s = d["status"]
    assert [s["cursor_pos"], s["nr_cache_blocks"], s["nr_segments"], s["current_id"], s["last_flushed_id"],
            s["last_writeback_id"], s["nr_dirty_cache_blocks"], *s["stat"], s["nr_partial_flushed"]] == n
    assert s["pairs"] == pairs
    assert d["target"] == ("dm-wbkit" if "dead" in pairs else "dm-writeboost")
    assert d["dead"] == (None if "dead" not in pairs else pairs["dead"] == 1)
    assert d["cache"] == {"blocks": n[1], "bytes": n[1] * 4096, "dirty_blocks": n[6], "dirty_bytes": n[6] * 4096,
                          "dirty_ratio": pytest.approx(n[6] / n[1]),
                          "discarded_blocks": pairs.get("nr_discarded_blocks"),
                          "discarded_dirty_blocks": pairs.get("nr_discarded_dirty")}
    seg = d["segments"]
    assert (seg["total"], seg["in_use"], seg["unflushed"], seg["to_write_back"]) == (
        n[2], n[3] - n[5], n[3] - n[4], n[4] - n[5])
    reads, writes = n[7:15], n[15:23]
    io = d["io"]
    assert io["reads"] == sum(reads) and io["writes"] == sum(writes)
    assert io["read_hits"] == sum(reads[4:]) and io["write_hits"] == sum(writes[4:])
    assert io["read_hits_on_buffer"] == sum(reads[6:]) and io["writes_fullsize"] == sum(writes[1::2])
    if sum(reads):
        assert io["read_hit_ratio"] == pytest.approx(sum(reads[4:]) / sum(reads))
    for key in ("writeback_threshold", "sync_data_interval", "read_cache_threshold"):
        assert d["tunables"][key] == pairs[key]
    assert d["table"]["backing"] == table[0] and d["table"]["cache"] == table[1]
    assert d["tunables"]["nr_max_batched_writeback"] == 16  # the table line gave it
    assert d["tunables"]["nr_read_cache_cells"] == 2048  # it did not: the default


@pytest.mark.parametrize("tag", sorted(CAPTURES))
def test_json_says_what_the_captured_lines_say(tag, tmp_path):
    target, code = CAPTURES[tag]
    path = tmp_path / "sample.txt"
    path.write_text(capture(tag))
    doc = document(wbstat("--json", "--from-file", path), code)
    status, table = raw_lines((DATA / f"{tag}.status").read_text()), raw_lines((DATA / f"{tag}.table").read_text())
    assert [d["name"] for d in doc["devices"]] == list(status)
    assert doc["source"] == str(path) and doc["interval_seconds"] is None
    for d in doc["devices"]:
        assert d["target"] == target
        # A file: no message is sent.
        assert d["rates"] is None and d["dead_cause"] is None and d["errors"] is None
        check_device(d, status[d["name"]], table[d["name"]])


def test_the_workload_left_figures_worth_checking():
    # The captures must exercise what the checks compare: dirty data, read
    # hits and misses, write hits and misses, segments written back, a dead flag.
    for tag in ("up", "wk"):
        (fields,) = raw_lines((DATA / f"{tag}.status").read_text()).values()
        n = [int(v) for v in fields[:24]]
        assert n[6] > 0 and sum(n[11:15]) > 0 and sum(n[7:11]) > 0, (tag, n)
        assert sum(n[19:23]) > 0 and sum(n[15:19]) > 0 and n[3] > n[5], (tag, n)
    (fields,) = raw_lines((DATA / "up.status").read_text()).values()
    assert int(fields[5]) > 0  # upstream's ring wrapped: it wrote back
    dead = raw_lines((DATA / "dead.status").read_text())
    assert dead["wbd"][-1] == "1" and dead["wbk"][-1] == "0"


def test_stdin_filter_as_wbstatus_is_used():
    # `dmsetup status wb | wbstat -`: one device, no name.
    (fields,) = raw_lines((DATA / "up.status").read_text()).values()
    line = "0 16384 writeboost " + " ".join(fields) + "\n"
    done = wbstat("-", input=line)
    assert done.returncode == OK, done.stderr
    assert done.stdout.startswith("stdin:1: dm-writeboost, sectors 0+16384 (8.0 MiB)\n")
    n = [int(v) for v in fields[:24]]
    assert f"  dirty      {n[6]} block(s)," in done.stdout
    assert f"current id {n[3]}, last flushed {n[4]}, last written back {n[5]}" in done.stdout
    assert "  state      not reported (dm-writeboost has no dead state)" in done.stdout
    # The whole `dmsetup status` (linear devices among them) works too.
    done = wbstat("--json", "-", input=(DATA / "dead.status").read_text())
    assert [d["name"] for d in document(done, DAMAGE)["devices"]] == ["wbd", "wbk"]


def test_human_output_labels_every_figure():
    done = wbstat("--from-file", "-", input=capture("dead"))
    assert done.returncode == DAMAGE, done.stderr
    blocks = done.stdout.split("\n\n")
    assert len(blocks) == 2
    for block in blocks:
        labels = [line.split()[0] for line in block.splitlines()[1:]]
        assert labels == ["state", "errors", "dirty", "segments", "writeback", "reads", "writes", "partial",
                          "discarded", "tunables"], block
    assert "  state      DEAD: cause not read;" in blocks[0]
    assert "  state      alive\n" in blocks[1]
    assert "  errors     not known (not read from dmsetup: the counters are dm-wbkit's reply to the message " \
        "error_counts)\n" in blocks[1]
    assert "nr_max_batched_writeback 16" in blocks[1]
    # Captured before the discard counters: an older dm-wbkit's lines.
    assert "  discarded  not reported (a dm-wbkit from before discard support)\n" in blocks[1]


SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)\})? (-?[0-9]+(?:\.[0-9]+)?)')


def parse_exposition(text):
    """{(name, frozenset(labels)): value}, checking the text format by hand:
    every sample line `name{labels} number`, HELP and TYPE once per metric and
    before its samples, the samples of a metric together."""
    samples, helped, typed, seen_order = {}, set(), {}, []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in helped, line
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name not in typed and kind in ("gauge", "counter"), line
            assert name in helped, f"TYPE before HELP: {line}"
            typed[name] = kind
            continue
        m = SAMPLE.fullmatch(line)
        assert m, f"not a sample line: {line!r}"
        name = m.group(1)
        assert name in typed, f"{name} has no TYPE"
        if typed[name] == "counter":
            assert name.endswith("_total"), name
        if not seen_order or seen_order[-1] != name:
            assert name not in seen_order, f"samples of {name} are not together"
            seen_order.append(name)
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        assert (name, labels) not in samples, line
        samples[(name, labels)] = float(m.group(3))
    assert all(name.startswith("writeboost_") for name in typed)
    return samples


def test_prometheus_parses_and_matches_the_raw_lines():
    text = wbstat("--prometheus", "-", input=capture("dead")).stdout
    samples = parse_exposition(text)
    raw = raw_lines((DATA / "dead.status").read_text())
    for name, fields in raw.items():
        n = [int(v) for v in fields[:24]]
        labels = {("device", name), ("target", "dm-wbkit")}
        assert samples[("writeboost_dirty_blocks", frozenset(labels))] == n[6]
        assert samples[("writeboost_dirty_bytes", frozenset(labels))] == n[6] * 4096
        assert samples[("writeboost_segments_in_use", frozenset(labels))] == n[3] - n[5]
        assert samples[("writeboost_dead", frozenset(labels))] == (1 if name == "wbd" else 0)
        for k in range(16):
            kind = labels | {("op", "write" if k & 8 else "read"), ("hit", str(k >> 2 & 1)),
                             ("on_buffer", str(k >> 1 & 1)), ("full_size", str(k & 1))}
            assert samples[("writeboost_bios_total", frozenset(kind))] == n[7 + k]
        assert samples[("writeboost_tunable", frozenset(labels | {("key", "nr_max_batched_writeback")}))] == 16
    assert samples[("writeboost_devices", frozenset())] == 2
    # Every sample but the device count says which device and which target.
    for (name, labels) in samples:
        if name != "writeboost_devices":
            assert {"device", "target"} <= {k for k, _ in labels}, name
    prometheus_client = pytest.importorskip("prometheus_client.parser")
    families = {f.name: f for f in prometheus_client.text_string_to_metric_families(text)}
    assert families["writeboost_bios"].type == "counter"
    assert len(families["writeboost_bios"].samples) == 32
    assert families["writeboost_dirty_blocks"].type == "gauge"


def test_upstream_has_no_dead_metric():
    samples = parse_exposition(wbstat("--prometheus", "-", input=capture("up")).stdout)
    assert not [key for key in samples if key[0] in ("writeboost_dead", "writeboost_errors_total",
                                                     "writeboost_discarded_blocks_total",
                                                     "writeboost_discarded_dirty_blocks_total")]
    assert [key for key in samples if key[0] == "writeboost_segments"]


def with_discards(fields, blocks, dirty):
    """A captured dm-wbkit status (12 counted tokens, `dead` last) as the
    module prints it since discard support: 16 tokens, the two discard
    counters after `dead`."""
    assert fields[24] == "12" and fields[-2] == "dead", fields
    return ["16", *fields[25:], "nr_discarded_blocks", str(blocks), "nr_discarded_dirty", str(dirty)]


def test_discard_counters_in_every_output(tmp_path):
    # wk's capture with nonzero discard counters: JSON, text and Prometheus
    # give those numbers; an older dm-wbkit's line (dead's capture) and
    # upstream's give none.
    (fields,) = raw_lines((DATA / "wk.status").read_text()).values()
    fields = fields[:24] + with_discards(fields, 5000000000, 37)
    line = "wbk: 0 32768 writeboost " + " ".join(fields) + "\n"
    table = (DATA / "wk.table").read_text()
    path = tmp_path / "sample.txt"
    path.write_text(line + table)
    doc = document(wbstat("--json", "--from-file", path))
    (d,) = doc["devices"]
    check_device(d, fields, raw_lines(table)["wbk"])
    assert (d["cache"]["discarded_blocks"], d["cache"]["discarded_dirty_blocks"]) == (5000000000, 37)
    assert d["status"]["pairs"]["dead"] == 0 and d["dead"] is False
    human = wbstat("--from-file", path)
    assert human.returncode == OK, human.stderr
    assert "  discarded  5000000000 cached block(s) dropped by discards, 37 of them dirty (never written " \
        "back)\n" in human.stdout
    samples = parse_exposition(wbstat("--prometheus", "--from-file", path).stdout)
    labels = frozenset({("device", "wbk"), ("target", "dm-wbkit")})
    assert samples[("writeboost_discarded_blocks_total", labels)] == 5000000000
    assert samples[("writeboost_discarded_dirty_blocks_total", labels)] == 37
    assert samples[("writeboost_dead", labels)] == 0

    for tag in ("up", "dead"):
        doc = document(wbstat("--json", "-", input=capture(tag)), CAPTURES[tag][1])
        for d in doc["devices"]:
            assert d["cache"]["discarded_blocks"] is None and d["cache"]["discarded_dirty_blocks"] is None
        samples = parse_exposition(wbstat("--prometheus", "-", input=capture(tag)).stdout)
        assert not [key for key in samples if key[0].startswith("writeboost_discarded_")], tag


def test_garbage_is_an_error_that_names_the_line():
    done = wbstat("-", input="wbk: 0 8 linear 8:0 0\nhello world\n")
    assert done.returncode == OPERATIONAL
    assert done.stdout == ""
    assert done.stderr.startswith("wbstat: error: stdin:2: neither a line of dmsetup status")
    (fields,) = raw_lines((DATA / "up.status").read_text()).values()
    cut = "wbup: 0 8 writeboost " + " ".join(fields[:20]) + "\n"
    done = wbstat("--json", "-", input=cut)
    assert done.returncode == OPERATIONAL and done.stdout == ""
    assert "stdin:1: writeboost status: a writeboost status has at least 25 fields" in done.stderr
    bad = list(fields)
    bad[6] = "many"
    done = wbstat("-", input="wbup: 0 8 writeboost " + " ".join(bad) + "\n")
    assert done.returncode == OPERATIONAL
    assert "field 7 (nr_dirty_cache_blocks) is not a number: 'many'" in done.stderr


def test_no_writeboost_target_is_not_an_error():
    done = wbstat("-", input="No devices found\n")
    assert done.returncode == OK, done.stderr
    assert done.stdout == "no writeboost targets (none in -)\n"
    doc = document(wbstat("--json", "-", input="b1: 0 8 linear 8:0 0\n"))
    assert doc["devices"] == []
    samples = parse_exposition(wbstat("--prometheus", "-", input="").stdout)
    assert samples == {("writeboost_devices", frozenset()): 0}


def test_unreadable_file_is_operational(tmp_path):
    done = wbstat("--from-file", tmp_path / "absent.txt")
    assert done.returncode == OPERATIONAL
    assert done.stderr.startswith("wbstat: error: ") and "absent.txt" in done.stderr


@pytest.mark.parametrize("args", [["--count", "2"], ["--interval", "1", "-"], ["--json", "--prometheus", "-"],
                                  ["-", "wb"], ["--interval", "0"], ["--interval", "x"], ["--count", "0",
                                                                                         "--interval", "1"],
                                  ["--from-file", "f", "wb"], ["--prometheus-file", "p", "--json", "-"]])
def test_usage_errors(args):
    done = wbstat(*args, input="")
    assert done.returncode == USAGE, (args, done.stderr)
    assert done.stderr.startswith("wbstat: error: ")


# The stand-in dmsetup: answers status, table and message from files,
# logs every call, and fails anything else. error_counts without a file
# fails as dm-writeboost (or a dm-wbkit before the message) fails it.
FAKE = textwrap.dedent("""\
    #!/usr/bin/python3
    import os, pathlib, sys
    d = pathlib.Path(os.environ["FAKE_DMSETUP"])
    args = sys.argv[1:]
    with open(d / "calls", "a") as log:
        log.write(" ".join(args) + "\\n")
    def answer(name):
        path = d / name
        if (d / (name + ".fail")).exists():
            sys.stderr.write((d / (name + ".fail")).read_text())
            sys.exit(1)
        sys.stdout.write(path.read_text() if path.exists() else "")
    if args[:2] == ["status", "--target"] or args[:2] == ["table", "--target"]:
        kind, dev = args[0], (args[3] if len(args) > 3 else "all")
        if kind == "status" and (d / f"status.{dev}.1").exists():
            # A series: status.<dev>.1, .2, ... one per call, the last repeats.
            count = d / f"count.{dev}"
            n = int(count.read_text()) + 1 if count.exists() else 1
            count.write_text(str(n))
            while not (d / f"status.{dev}.{n}").exists():
                n -= 1
            answer(f"status.{dev}.{n}")
        else:
            answer(f"{kind}.{dev}")
    elif args[0] == "message" and args[3:] == ["dead_cause"]:
        answer(f"message.{args[1]}.{args[2]}")
    elif args[0] == "message" and args[3:] == ["error_counts"]:
        name = f"errors.{args[1]}.{args[2]}"
        if (d / f"{name}.1").exists():
            # A series, as for status.
            count = d / f"count.{name}"
            n = int(count.read_text()) + 1 if count.exists() else 1
            count.write_text(str(n))
            while not (d / f"{name}.{n}").exists():
                n -= 1
            name = f"{name}.{n}"
        if not (d / name).exists() and not (d / f"{name}.fail").exists():
            sys.stderr.write(f"device-mapper: message ioctl on {args[1]}  failed: Invalid argument\\n"
                             "Command failed.\\n")
            sys.exit(1)
        answer(name)
    else:
        sys.stderr.write("fake dmsetup: not a read-only query: " + " ".join(args) + "\\n")
        sys.exit(9)
    """)


@pytest.fixture
def fake(tmp_path):
    d = tmp_path / "dmsetup-state"
    d.mkdir()
    program = tmp_path / "dmsetup"
    program.write_text(FAKE)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)

    class Fake:
        dir = d
        env = dict(os.environ, FAKE_DMSETUP=str(d))

        def put(self, name, text):
            (d / name).write_text(text)

        def calls(self):
            path = d / "calls"
            return path.read_text().splitlines() if path.exists() else []

        def run(self, *args):
            return wbstat("--dmsetup", program, *args, env=self.env)

    return Fake()


COUNTERS = ("backing_read", "backing_write", "backing_flush", "cache_read", "cache_write", "cache_flush",
            "cache_read_fallback", "failed_requests", "transient")


def counts_reply(**nonzero):
    """dm-wbkit's reply to error_counts: every counter, 0 unless given."""
    counts = {name: 0 for name in COUNTERS} | nonzero
    return " ".join(f"{name} {value}" for name, value in counts.items()) + "\n"


def test_live_reads_status_table_and_the_two_messages_only(fake):
    fake.put("status.all", (DATA / "dead.status").read_text())
    fake.put("table.all", (DATA / "dead.table").read_text())
    fake.put("message.wbd.0", "backing write 0 -5\n")
    fake.put("errors.wbd.0", counts_reply(backing_read=1, backing_write=1, failed_requests=1))
    fake.put("errors.wbk.0", counts_reply())
    doc = document(fake.run("--json"), DAMAGE)
    assert fake.calls() == ["status --target writeboost", "table --target writeboost", "message wbd 0 dead_cause",
                            "message wbd 0 error_counts", "message wbk 0 error_counts"]
    devices = {d["name"]: d for d in doc["devices"]}
    assert devices["wbd"]["dead_cause"] == "backing write 0 -5"
    assert devices["wbk"]["dead_cause"] is None
    assert doc["source"] == "dmsetup"
    # Every counter, in dm-wbkit's order.
    assert list(devices["wbk"]["errors"].items()) == [(name, 0) for name in COUNTERS]
    assert list(devices["wbd"]["errors"]) == list(COUNTERS)
    assert {k: v for k, v in devices["wbd"]["errors"].items() if v} == {"backing_read": 1, "backing_write": 1,
                                                                           "failed_requests": 1}
    done = fake.run()
    assert done.returncode == DAMAGE and done.stderr == ""
    wbd, wbk = done.stdout.split("\n\n")
    assert "  state      DEAD: backing write 0 -5;" in wbd
    assert "  errors     backing device 2, cache device 0, failed requests 1, transient 0 since the target was " \
        "made: backing_read 1, backing_write 1, failed_requests 1; possibly fatal: backing_write 1 (fatal when " \
        "writing back)\n" in wbd
    assert "  errors     none since the target was made (9 counters at 0)\n" in wbk
    text = fake.run("--prometheus").stdout
    samples = parse_exposition(text)
    assert samples[("writeboost_dead_cause_info", frozenset({("device", "wbd"), ("target", "dm-wbkit"),
                                                             ("cause", "backing write 0 -5")}))] == 1
    for device, counts in (("wbd", devices["wbd"]["errors"]), ("wbk", devices["wbk"]["errors"])):
        for name in COUNTERS:
            labels = frozenset({("device", device), ("target", "dm-wbkit"), ("counter", name)})
            assert samples[("writeboost_errors_total", labels)] == counts[name]
    assert "# TYPE writeboost_errors_total counter\n" in text
    prometheus_client = pytest.importorskip("prometheus_client.parser")
    families = {f.name: f for f in prometheus_client.text_string_to_metric_families(text)}
    assert families["writeboost_errors"].type == "counter"
    assert len(families["writeboost_errors"].samples) == 18


def test_error_counts_that_the_target_does_not_know_are_absent_not_an_error(fake):
    # dm-writeboost, or a dm-wbkit before error_counts: the message fails.
    fake.put("status.all", (DATA / "wk.status").read_text())
    fake.put("table.all", (DATA / "wk.table").read_text())
    done = fake.run("--json")
    doc = document(done)
    assert done.stderr == ""
    assert fake.calls() == ["status --target writeboost", "table --target writeboost", "message wbk 0 error_counts"]
    (d,) = doc["devices"]
    assert d["errors"] is None
    done = fake.run()
    assert done.returncode == OK and done.stderr == ""
    assert "  errors     not known (no usable reply to the message error_counts; a dm-wbkit older than it has " \
        "none)\n" in done.stdout
    samples = parse_exposition(fake.run("--prometheus").stdout)
    assert not [key for key in samples if key[0] == "writeboost_errors_total"]
    # An upstream device is not asked.
    fake.put("status.all", (DATA / "up.status").read_text())
    fake.put("table.all", (DATA / "up.table").read_text())
    (fake.dir / "calls").unlink()
    doc = document(fake.run("--json"))
    assert fake.calls() == ["status --target writeboost", "table --target writeboost"]
    assert doc["devices"][0]["errors"] is None


@pytest.mark.parametrize("reply", ["", "backing_read\n", "backing_read 1 backing_write x\n", "1 2\n",
                                   "backing_read -1\n", "backing_read 1 backing_read 1\n", "b\u00e4ck 1\n"])
def test_error_counts_that_do_not_parse_are_absent(fake, reply):
    fake.put("status.all", (DATA / "wk.status").read_text())
    fake.put("table.all", (DATA / "wk.table").read_text())
    fake.put("errors.wbk.0", reply)
    done = fake.run("--json")
    assert document(done)["devices"][0]["errors"] is None
    if reply:
        assert done.stderr.startswith("wbstat: warning: wbk: the reply to `")
        assert "error_counts` does not read as error counters (" in done.stderr
    else:
        assert done.stderr == ""  # an empty reply: as if the message were unknown
    done = fake.run()
    assert done.returncode == OK and "  errors     not known (" in done.stdout


def test_unknown_error_counters_are_kept(fake):
    fake.put("status.all", (DATA / "wk.status").read_text())
    fake.put("table.all", (DATA / "wk.table").read_text())
    fake.put("errors.wbk.0", counts_reply(transient=3).rstrip("\n") + " new_counter 7\n")
    doc = document(fake.run("--json"))
    errors = doc["devices"][0]["errors"]
    assert list(errors) == [*COUNTERS, "new_counter"] and errors["new_counter"] == 7
    assert "failed requests 0, transient 3 since the target was made: transient 3, new_counter 7\n" in fake.run().stdout
    samples = parse_exposition(fake.run("--prometheus").stdout)
    labels = frozenset({("device", "wbk"), ("target", "dm-wbkit"), ("counter", "new_counter")})
    assert samples[("writeboost_errors_total", labels)] == 7


def test_a_dead_cause_that_cannot_be_read_is_a_warning(fake):
    fake.put("status.all", (DATA / "dead.status").read_text())
    fake.put("table.all", (DATA / "dead.table").read_text())
    fake.put("message.wbd.0.fail", "device-mapper: message ioctl on wbd failed: Invalid argument\n")
    fake.put("errors.wbd.0", counts_reply(cache_write=1))
    doc = document(fake.run("--json"), DAMAGE)
    assert {d["name"]: d["dead_cause"] for d in doc["devices"]} == {"wbd": None, "wbk": None}
    assert doc["devices"][0]["errors"]["cache_write"] == 1  # the counters are read all the same
    text = fake.run().stdout
    assert "  state      DEAD: cause not read;" in text
    assert "cache_write 1; FATAL: cache_write 1 (every such error makes the target dead)\n" in text
    assert fake.run("--json").stderr.startswith("wbstat: warning: wbd is dead, but `")
    assert "Invalid argument" in fake.run("--json").stderr


def test_named_devices(fake):
    (fields,) = raw_lines((DATA / "up.status").read_text()).values()
    (table,) = raw_lines((DATA / "up.table").read_text()).values()
    fake.put("status.wbup", "0 16384 writeboost " + " ".join(fields) + "\n")
    fake.put("table.wbup", "0 16384 writeboost " + " ".join(table) + "\n")
    doc = document(fake.run("--json", "wbup"))
    assert fake.calls() == ["status --target writeboost wbup", "table --target writeboost wbup"]
    (d,) = doc["devices"]
    assert d["name"] == "wbup" and d["length"] == 16384
    check_device(d, fields, table)
    # A device without a writeboost target, and one that does not exist.
    fake.put("status.b1", "")
    done = fake.run("b1")
    assert done.returncode == OPERATIONAL
    assert done.stderr == "wbstat: error: b1: not a writeboost device (its table has no writeboost target)\n"
    fake.put("status.nosuch.fail", "Device does not exist.\nCommand failed.\n")
    done = fake.run("wbup", "nosuch")
    assert done.returncode == OPERATIONAL and done.stdout == ""
    assert "`" + str(fake.dir.parent / "dmsetup") + " status --target writeboost nosuch` failed (exit 1): Device " \
        "does not exist. Command failed." in done.stderr


def test_dmsetup_that_cannot_be_run(tmp_path):
    done = wbstat("--dmsetup", tmp_path / "no-dmsetup")
    assert done.returncode == OPERATIONAL
    assert done.stderr.startswith("wbstat: error: ") and "no-dmsetup" in done.stderr
    # Not in PATH, nor in /usr/sbin or /sbin: says where it looked.
    if not any(pathlib.Path(p, "wbstat-no-such-program").exists() for p in ("/usr/sbin", "/sbin")):
        done = wbstat("--dmsetup", "wbstat-no-such-program")
        assert done.returncode == OPERATIONAL
        assert "not found in PATH, /usr/sbin or /sbin" in done.stderr


def series(fake, dev, lines):
    for i, line in enumerate(lines, 1):
        fake.put(f"status.{dev}.{i}", f"0 16384 writeboost {line}\n")
    fake.put(f"table.{dev}", "0 16384 writeboost 254:0 254:16\n")


def status_line(cur, flushed, wb, dirty, stat, partial=0, dead=0):
    return (f"10 1778 14 {cur} {flushed} {wb} {dirty} " + " ".join(map(str, stat)) +
            f" {partial} 12 writeback_threshold 0 nr_cur_batched_writeback 1 sync_data_interval 0 "
            f"update_sb_record_interval 0 read_cache_threshold 0 dead {dead}")


def test_interval_rates_between_samples(fake):
    zero = [0] * 16
    s1 = zero[:]
    s1[8], s1[12], s1[0], s1[4] = 100, 20, 10, 30  # write misses, write hits, read misses, read hits
    s2 = s1[:]
    s2[8] += 40
    s2[12] += 10
    s3 = zero  # clear_stat
    series(fake, "wb", [status_line(5, 4, 1, 300, s1), status_line(7, 6, 4, 250, s2, partial=2),
                        status_line(7, 6, 4, 250, s3)])
    done = fake.run("--json", "--interval", "0.2", "--count", "2", "wb")
    assert done.returncode == OK, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2  # one compact document per report
    first, second = (json.loads(line) for line in lines)
    for doc in (first, second):
        VALIDATOR.validate(doc)
        assert doc["interval_seconds"] == 0.2
    r = first["devices"][0]["rates"]
    assert 0.15 < r["seconds"] < 5
    assert not r["reset"]
    assert (r["writes"], r["write_hits"], r["reads"], r["read_hits"]) == (50, 10, 0, 0)
    assert (r["segments_flushed"], r["segments_written_back"], r["partial_flushed"]) == (2, 3, 2)
    assert r["dirty_blocks_change"] == -50
    assert r["write_hit_ratio"] == pytest.approx(0.2) and r["read_hit_ratio"] is None
    assert r["writes_per_second"] == pytest.approx(50 / r["seconds"])
    assert r["dirty_blocks_per_second"] == pytest.approx(-50 / r["seconds"])
    assert r["errors"] is None and r["errors_per_second"] is None  # no error counters: the message failed
    r = second["devices"][0]["rates"]
    assert r["reset"] and r["writes"] is None and r["writes_per_second"] is None
    assert fake.calls().count("status --target writeboost wb") == 3
    # Besides status and table, only error_counts, once per sample (no device is dead).
    assert [c for c in fake.calls() if c.split()[0] not in ("status", "table")] == ["message wb 0 error_counts"] * 3


def test_interval_error_rates(fake):
    s1 = [0] * 16
    s2 = s1[:]
    s2[0] = 4  # four read misses
    series(fake, "wb", [status_line(5, 4, 1, 300, s1), status_line(5, 4, 1, 300, s2), status_line(5, 4, 1, 300, s2),
                        status_line(5, 4, 1, 300, s2)])
    # The second sample: 3 failed read misses, 2 transient errors; the third
    # says nothing new; the fourth went back (another device of that name).
    for n, reply in enumerate([counts_reply(), counts_reply(backing_read=3, failed_requests=3, transient=2),
                               counts_reply(backing_read=3, failed_requests=3, transient=2), counts_reply()], 1):
        fake.put(f"errors.wb.0.{n}", reply)
    done = fake.run("--json", "--interval", "0.2", "--count", "3", "wb")
    assert done.returncode == OK, done.stderr
    docs = [json.loads(line) for line in done.stdout.splitlines()]
    for doc in docs:
        VALIDATOR.validate(doc)
    r = docs[0]["devices"][0]["rates"]
    assert not r["reset"]
    assert list(r["errors"]) == list(COUNTERS)
    assert {k: v for k, v in r["errors"].items() if v} == {"backing_read": 3, "failed_requests": 3, "transient": 2}
    assert r["errors_per_second"]["backing_read"] == pytest.approx(3 / r["seconds"])
    assert r["errors_per_second"]["cache_write"] == 0
    assert docs[0]["devices"][0]["errors"]["backing_read"] == 3
    r = docs[1]["devices"][0]["rates"]
    assert set(r["errors"].values()) == {0} and set(r["errors_per_second"].values()) == {0}
    r = docs[2]["devices"][0]["rates"]
    assert not r["reset"] and r["errors"] is None and r["errors_per_second"] is None
    # The human form: a line of the counters that went up, none when none did.
    for name in list(fake.dir.glob("count.*")):
        name.unlink()
    done = fake.run("--interval", "0.2", "--count", "2", "wb")
    assert done.returncode == OK, done.stderr
    first, second = done.stdout.split("\n\n--- ")
    line = next(line for line in first.splitlines() if line.startswith("  errors/s"))
    assert re.fullmatch(r"  errors/s   backing_read \d+\.\d/s, failed_requests \d+\.\d/s, transient \d+\.\d/s", line), line
    assert "errors/s" not in second


def test_interval_human_output(fake):
    series(fake, "wb", [status_line(5, 4, 1, 300, [0] * 16), status_line(5, 4, 2, 200, [0] * 8 + [8] + [0] * 7)])
    done = fake.run("--interval", "0.1", "--count", "1", "wb")
    assert done.returncode == OK, done.stderr
    assert "--- " not in done.stdout  # one report: no time stamps
    line = next(line for line in done.stdout.splitlines() if line.startswith("  rates"))
    assert re.fullmatch(r"  rates      over \d+\.\d s: reads 0\.0/s \(hits -\), writes \d+\.\d/s \(hits 0\.0%\), "
                        r"written back \d+\.\d segment\(s\)/s, dirty -\d+\.\d block\(s\)/s", line), line


def test_prometheus_file_is_replaced_atomically(fake, tmp_path):
    fake.put("status.all", (DATA / "dead.status").read_text())
    fake.put("table.all", (DATA / "dead.table").read_text())
    fake.put("message.wbd.0", "backing read 8000 -5\n")
    out_dir = tmp_path / "textfile"
    out_dir.mkdir()
    target = out_dir / "wbkit.prom"
    target.write_text("old\n")
    done = fake.run("--prometheus-file", target)
    assert done.returncode == DAMAGE, done.stderr
    assert done.stdout == ""
    assert target.read_text() == fake.run("--prometheus").stdout
    assert sorted(p.name for p in out_dir.iterdir()) == ["wbkit.prom"]  # no temporary file left
    parse_exposition(target.read_text())
    # A failed run leaves the last good file alone.
    (fake.dir / "status.all").write_text("garbage\n")
    done = fake.run("--prometheus-file", target)
    assert done.returncode == OPERATIONAL
    parse_exposition(target.read_text())
    assert sorted(p.name for p in out_dir.iterdir()) == ["wbkit.prom"]
    # A directory that does not exist.
    done = fake.run("--prometheus-file", tmp_path / "absent" / "wbkit.prom")
    assert done.returncode == OPERATIONAL and done.stderr.startswith("wbstat: error: ")
