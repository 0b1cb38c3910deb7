#!/usr/bin/env bash
# shows: wbstat in the guest on an upstream device, then on a dm-wbkit device
#   and a dead one: every JSON figure against the raw `dmsetup status` and
#   `table` lines, the schema, the Prometheus output parses, `--interval` counts
#   50 writes and the segments a `drop_caches` wrote back, the dead cause
#
# wbstat in the guest, on both modules in one boot: an upstream dm-writeboost
# device, then a dm-wbkit device and a dead dm-wbkit device next to it. After
# writes, flushes, read hits and misses, wbstat's JSON must say what the raw
# `dmsetup status` and `dmsetup table` lines say (every field, and the
# figures derived from them), validate against its schema, and its
# Prometheus output must parse; --interval over 50 writes and a drop_caches
# must count exactly those writes and the segments written back; a dead
# target's cause is dm-wbkit's reply to dead_cause; the error counters are
# dm-wbkit's reply to error_counts (all 9 at 0 on a healthy device; a read
# miss on a failing backing device counts and fails that read alone, the
# target stays alive; writeback to it kills), upstream fails that message
# and has none; a missing device and a device without a writeboost target
# are errors (exit 3). Without upstream's module only dm-wbkit's devices
# run (PARTIAL).
# The outputs are kept in the log folder (WBSTAT_RESULTS=<dir> keeps them
# there instead): fixtures/status/ holds such captures as fixtures.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
wbkit_need_guest_tool wbstat
VM_TIMEOUT=480

# out (/dev/vde): the guest's outputs, a tar file.
make_devices backing 32M cache-up 8M cache-wk 8M cache-dead 8M out 8M

run_guest <<'GUEST'
WBSTAT=/usr/local/bin/wbstat
[ -x $WBSTAT ] || wb_skip "wbstat is not in the initramfs"
OUT=/tmp/out
mkdir -p $OUT
HALF=$(($(wb_sectors /dev/vda) / 2))
wb_dm_create b1 "0 $HALF linear /dev/vda 0"
wb_dm_create b2 "0 $HALF linear /dev/vda $HALF"
ARGS="4 writeback_threshold 0 nr_max_batched_writeback 16"

# snapshot <tag>: the raw lines, wbstat's three outputs, the raw status again
# (the devices are idle: it must not have changed).
snapshot() {
	$DMSETUP status --target writeboost >$OUT/$1.status
	$DMSETUP table --target writeboost >$OUT/$1.table
	$WBSTAT --json >$OUT/$1.json 2>$OUT/$1.json.err
	echo $? >$OUT/$1.json.rc
	$WBSTAT --prometheus >$OUT/$1.prom 2>$OUT/$1.prom.err
	echo $? >$OUT/$1.prom.rc
	$WBSTAT >$OUT/$1.txt 2>&1
	echo $? >$OUT/$1.txt.rc
	$DMSETUP status --target writeboost >$OUT/$1.status.after
}
# workload <dev>: dirty data with flushes, read hits, read misses.
workload() {
	$WBSTAMP write /dev/mapper/$1 --seed 89 --size 4M --ops 300 --flush-every 30 --final-flush >/dev/null ||
		wb_fail "$1: writes failed"
	$DD if=/dev/mapper/$1 of=/dev/null bs=4k count=64 iflag=direct 2>/dev/null || wb_fail "$1: reads failed"
	$DD if=/dev/mapper/$1 of=/dev/null bs=4k count=16 skip=2000 iflag=direct 2>/dev/null ||
		wb_fail "$1: reads failed"
}
# rates <tag> <dev>: wbstat --interval 10 around 50 writes and a drop_caches.
rates() {
	$DMSETUP status --target writeboost >$OUT/$1.rates.status0
	$WBSTAT --json --interval 10 --count 1 $2 >$OUT/$1.rates.json 2>$OUT/$1.rates.err &
	pid=$!
	sleep 1
	# conv=fsync: upstream's drop_caches waits for the open segment, which
	# only a flush (or sync_data_interval) writes.
	$DD if=/dev/zero of=/dev/mapper/$2 bs=4k count=50 seek=3000 oflag=direct conv=fsync 2>/dev/null ||
		wb_fail "$2: writes failed"
	$DMSETUP message $2 0 drop_caches || wb_fail "$2: drop_caches failed"
	wait $pid
	echo $? >$OUT/$1.rates.rc
	$DMSETUP status --target writeboost >$OUT/$1.rates.status1
}

if wb_has_upstream; then
	wb_load_target upstream
	wb_dm_create wbup "0 $HALF writeboost /dev/mapper/b1 /dev/vdb $ARGS"
	workload wbup
	snapshot up
	# Upstream does not know error_counts: the message fails.
	$DMSETUP message wbup 0 error_counts >$OUT/up.counts 2>&1
	echo $? >$OUT/up.counts.rc
	$DMSETUP status wbup | $WBSTAT --json - >$OUT/up.pipe.json 2>$OUT/up.pipe.err
	echo $? >$OUT/up.pipe.rc
	rates up wbup
	$DMSETUP remove wbup || wb_fail "upstream: remove failed"
	wb_unload_target upstream
fi

wb_load_target wbkit
wb_dm_create wbk "0 $HALF writeboost /dev/mapper/b1 /dev/vdc $ARGS"
workload wbk
snapshot wk
$DMSETUP message wbk 0 error_counts >$OUT/wk.counts
rates wk wbk
# A second dm-wbkit device on a backing device that fails: a read miss fails
# alone (the target stays alive), writeback kills it.
wb_dm_create wbd "0 $HALF writeboost /dev/mapper/b2 /dev/vdd $ARGS"
$DD if=/dev/zero of=/dev/mapper/wbd bs=4k count=8 oflag=direct 2>/dev/null || wb_fail "wbd: writes failed"
$DMSETUP load b2 --table "0 $HALF error" && $DMSETUP resume b2 || wb_fail "cannot fail the backing device"
$DD if=/dev/mapper/wbd of=/dev/null bs=4k count=1 skip=1000 iflag=direct 2>/dev/null
echo $? >$OUT/miss.read.rc
$WBSTAT --json wbd >$OUT/miss.json 2>$OUT/miss.json.err
echo $? >$OUT/miss.json.rc
$DMSETUP message wbd 0 error_counts >$OUT/miss.counts
timeout 120 $DMSETUP message wbd 0 drop_caches >/dev/null 2>&1
echo $? >$OUT/kill.rc
snapshot dead
$DMSETUP message wbd 0 error_counts >$OUT/dead.wbd.counts
$DMSETUP message wbk 0 error_counts >$OUT/dead.wbk.counts
$WBSTAT wbd >$OUT/dead.named.txt 2>&1
echo $? >$OUT/dead.named.rc
$WBSTAT nosuch >$OUT/nosuch.txt 2>&1
echo $? >$OUT/nosuch.rc
$WBSTAT b1 >$OUT/linear.txt 2>&1
echo $? >$OUT/linear.rc

(cd /tmp && tar -cf /tmp/out.tar out) || wb_fail "tar failed"
$DD if=/tmp/out.tar of=/dev/vde bs=64k conv=sync oflag=direct 2>/dev/null || wb_fail "cannot write the results"
wb_report results ok
GUEST
guest_passed
require_all ok results

results=${WBSTAT_RESULTS:-$VM_LOG_DIR/wbstat-results}
rm -rf "$results"
mkdir -p "$results"
tar -xf "$work/out.img" -C "$results"
echo "outputs: $results/out"
/usr/bin/python3 - "$results/out" "$WBKIT_ROOT" "$with_upstream" <<'CHECK'
import json
import pathlib
import re
import sys

out, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
with_upstream = sys.argv[3] == "1"
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
        print("FAIL:", message)


def text(name):
    return (out / name).read_text()


def rc(name):
    return int(text(name + ".rc").strip())


def raw(name):
    """name -> tokens after `writeboost`, from dmsetup status/table output."""
    lines = {}
    for line in text(name).splitlines():
        m = re.fullmatch(r"(\S+): (\d+) (\d+) writeboost (.*)", line)
        if m:
            lines[m.group(1)] = m.group(4).split()
    return lines


try:
    import jsonschema
    store = {}
    for path in (root / "docs" / "schemas").glob("*.schema.json"):
        schema = json.loads(path.read_text())
        store[schema["$id"]] = schema
    schema = store["https://wbkit.invalid/schemas/wbstat-1.schema.json"]
    validator = jsonschema.Draft202012Validator(schema, resolver=jsonschema.RefResolver.from_schema(schema, store=store))
except ImportError:
    validator = None


def document(name):
    doc = json.loads(text(name))
    if validator:
        errors = list(validator.iter_errors(doc))
        check(not errors, f"{name}: does not validate: {errors[:1]}")
    check(doc.get("schema") == "wbstat/1", f"{name}: schema {doc.get('schema')}")
    return doc


def reads_writes(n):
    stat = n[7:23]
    return (sum(stat[:8]), sum(v for i, v in enumerate(stat[:8]) if i & 4), sum(stat[8:]),
            sum(v for i, v in enumerate(stat[8:]) if i & 4))


def compare_device(where, d, fields, table, target):
    """d: a device of wbstat's JSON; fields: the raw status tokens."""
    n = [int(v) for v in fields[:24]]
    pairs = {fields[i]: int(fields[i + 1]) for i in range(25, len(fields), 2)}
    check(int(fields[24]) == len(fields) - 25, f"{where}: raw count")
    s = d["status"]
    got = [s["cursor_pos"], s["nr_cache_blocks"], s["nr_segments"], s["current_id"], s["last_flushed_id"],
           s["last_writeback_id"], s["nr_dirty_cache_blocks"], *s["stat"], s["nr_partial_flushed"]]
    check(got == n, f"{where}: status fields {got} != raw {n}")
    check(s["pairs"] == pairs, f"{where}: pairs {s['pairs']} != raw {pairs}")
    check(d["target"] == target, f"{where}: target {d['target']}, not {target}")
    check(d["cache"]["blocks"] == n[1] and d["cache"]["bytes"] == n[1] * 4096, f"{where}: cache size")
    check(d["cache"]["dirty_blocks"] == n[6] and d["cache"]["dirty_bytes"] == n[6] * 4096, f"{where}: dirty")
    seg = d["segments"]
    check(seg["total"] == n[2] and seg["in_use"] == n[3] - n[5], f"{where}: segments in use")
    check(seg["to_write_back"] == n[4] - n[5] and seg["unflushed"] == n[3] - n[4], f"{where}: writeback progress")
    reads, read_hits, writes, write_hits = reads_writes(n)
    io = d["io"]
    check((io["reads"], io["read_hits"], io["writes"], io["write_hits"]) == (reads, read_hits, writes, write_hits),
          f"{where}: io {io} != raw {(reads, read_hits, writes, write_hits)}")
    if reads:
        check(abs(io["read_hit_ratio"] - read_hits / reads) < 1e-9, f"{where}: read hit ratio")
    if writes:
        check(abs(io["write_hit_ratio"] - write_hits / writes) < 1e-9, f"{where}: write hit ratio")
    t = d["tunables"]
    for key in ("writeback_threshold", "nr_cur_batched_writeback", "sync_data_interval", "update_sb_record_interval",
                "read_cache_threshold"):
        check(t[key] == pairs[key], f"{where}: tunable {key}")
    check(t["nr_max_batched_writeback"] == 16, f"{where}: nr_max_batched_writeback {t['nr_max_batched_writeback']} "
          "(the table says 16)")
    check(t["nr_read_cache_cells"] == 2048 and t["write_around_mode"] == 0, f"{where}: table defaults")
    check(d["table"] is not None and [d["table"]["backing"], d["table"]["cache"]] == table[:2], f"{where}: table")
    if target == "dm-wbkit":
        check(d["dead"] == (pairs["dead"] == 1), f"{where}: dead")
    else:
        check(d["dead"] is None and "dead" not in pairs, f"{where}: upstream has no dead state")
    return n


SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*)\})? '
                    r'(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)')


def prometheus(name):
    """{(metric, frozenset(labels)): value}; checks every line's form."""
    samples, typed = {}, set()
    for line in text(name).splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = SAMPLE.fullmatch(line)
        check(m is not None, f"{name}: not a sample line: {line!r}")
        if not m:
            continue
        metric = m.group(1)
        check(metric in typed or metric.removesuffix("_total") in typed, f"{name}: {metric} before its TYPE")
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        check((metric, labels) not in samples, f"{name}: {metric} {sorted(labels)} twice")
        samples[(metric, labels)] = float(m.group(3))
    try:
        from prometheus_client.parser import text_string_to_metric_families
        families = list(text_string_to_metric_families(text(name)))
        check(len(families) > 10, f"{name}: the Prometheus parser found {len(families)} families")
    except ImportError:
        pass
    return samples


def prom_value(samples, metric, device, target):
    return samples.get((metric, frozenset({("device", device), ("target", target)})))


COUNTERS = ["backing_read", "backing_write", "backing_flush", "cache_read", "cache_write", "cache_flush",
            "cache_read_fallback", "failed_requests", "transient"]
FATAL = ["backing_write", "backing_flush", "cache_read", "cache_write", "cache_flush"]


def counts(name):
    """dm-wbkit's raw reply to error_counts, as {name: count} in its order."""
    words = text(name).split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}


def check_errors(where, d, raw_counts, samples=None):
    """d["errors"] against the raw reply: the 9 counters in order, the same
    values; and the Prometheus samples when given."""
    errors = d["errors"]
    check(errors is not None and list(errors) == COUNTERS, f"{where}: errors {errors}, not the 9 counters")
    check(errors == raw_counts, f"{where}: errors {errors} != raw {raw_counts}")
    if samples is not None and errors:
        for name in COUNTERS:
            got = samples.get(("writeboost_errors_total", frozenset({("device", d["name"]), ("target", "dm-wbkit"),
                                                                     ("counter", name)})))
            check(got == errors[name], f"{where}: prometheus writeboost_errors_total {name} {got}")
    return errors or {}


def bios_sum(samples, device):
    return sum(v for (metric, labels), v in samples.items()
               if metric == "writeboost_bios_total" and ("device", device) in labels)


devices = (("up", "wbup", "dm-writeboost"),) if with_upstream else ()
for tag, device, target in devices + (("wk", "wbk", "dm-wbkit"),):
    status, table = raw(f"{tag}.status"), raw(f"{tag}.table")
    check(text(f"{tag}.status") == text(f"{tag}.status.after"), f"{tag}: the status changed while wbstat ran")
    check(rc(f"{tag}.json") == 0, f"{tag}: wbstat --json exit {rc(tag + '.json')}: {text(tag + '.json.err')}")
    doc = document(f"{tag}.json")
    check([d["name"] for d in doc["devices"]] == [device], f"{tag}: devices {[d['name'] for d in doc['devices']]}")
    if doc["devices"]:
        n = compare_device(tag, doc["devices"][0], status[device], table[device], target)
        check(n[6] > 0 and reads_writes(n)[1] > 0 and reads_writes(n)[0] > reads_writes(n)[1],
              f"{tag}: the workload left no dirty blocks, read hits or misses: {n}")
    pipe = document(f"{tag}.pipe.json") if (out / f"{tag}.pipe.json").exists() else None
    if pipe:
        check(rc(f"{tag}.pipe") == 0 and [d["name"] for d in pipe["devices"]] == ["stdin:1"], f"{tag}: pipe")
        check(pipe["devices"][0]["status"] == doc["devices"][0]["status"], f"{tag}: the pipe read other figures")
    check(rc(f"{tag}.prom") == 0, f"{tag}: wbstat --prometheus exit {rc(tag + '.prom')}")
    samples = prometheus(f"{tag}.prom")
    n = [int(v) for v in status[device][:24]]
    check(prom_value(samples, "writeboost_dirty_blocks", device, target) == n[6], f"{tag}: prometheus dirty blocks")
    check(prom_value(samples, "writeboost_last_writeback_segment_id", device, target) == n[5],
          f"{tag}: prometheus last_writeback_id")
    check(bios_sum(samples, device) == sum(n[7:23]), f"{tag}: prometheus bios")
    check(samples.get(("writeboost_devices", frozenset())) == 1, f"{tag}: writeboost_devices")
    human = text(f"{tag}.txt")
    check(rc(f"{tag}.txt") == 0 and human.startswith(f"{device}: {target},"), f"{tag}: human output:\n{human}")
    check(f"  dirty      {n[6]} block(s)" in human, f"{tag}: human dirty line:\n{human}")
    check(f"current id {n[3]}, last flushed {n[4]}, last written back {n[5]}" in human, f"{tag}: human ids")
    if target == "dm-wbkit":
        errors = check_errors(tag, doc["devices"][0], counts(f"{tag}.counts"), samples)
        check(set(errors.values()) == {0}, f"{tag}: a healthy device counted errors: {errors}")
        check("  errors     none since the target was made (9 counters at 0)\n" in human, f"{tag}: human errors")
    else:
        check(rc("up.counts") != 0, f"up: upstream answered error_counts: {text('up.counts')!r}")
        check(doc["devices"][0]["errors"] is None, "up: upstream has error counters")
        check(not [k for k in samples if k[0] == "writeboost_errors_total"], "up: prometheus error counters")
        check("  errors     not reported (dm-writeboost has no error counters)\n" in human, "up: human errors")

    # --interval 10 around 50 writes and a drop_caches: the rates are the
    # difference of wbstat's two samples, the first the raw status before.
    check(rc(f"{tag}.rates") == 0, f"{tag}: wbstat --interval exit {rc(tag + '.rates')}: {text(tag + '.rates.err')}")
    rdoc = document(f"{tag}.rates.json")
    s0 = [int(v) for v in raw(f"{tag}.rates.status0")[device][:24]]
    s1 = [int(v) for v in raw(f"{tag}.rates.status1")[device][:24]]
    d = rdoc["devices"][0]
    r = d["rates"]
    print(f"{tag}: rates {json.dumps(r)}")
    check(rdoc["interval_seconds"] == 10 and 9.5 <= r["seconds"] <= 20, f"{tag}: interval {r['seconds']}")
    check(not r["reset"], f"{tag}: reset")
    st = d["status"]
    second = [st["cursor_pos"], st["nr_cache_blocks"], st["nr_segments"], st["current_id"], st["last_flushed_id"],
              st["last_writeback_id"], st["nr_dirty_cache_blocks"], *st["stat"], st["nr_partial_flushed"]]
    check(r["writes"] == reads_writes(second)[2] - reads_writes(s0)[2] == 50,
          f"{tag}: {r['writes']} writes in the interval; samples {reads_writes(second)[2] - reads_writes(s0)[2]}, "
          "wrote 50")
    check(r["segments_written_back"] == second[5] - s0[5] > 0,
          f"{tag}: {r['segments_written_back']} segments written back; samples {second[5] - s0[5]}")
    check(r["dirty_blocks_change"] == second[6] - s0[6], f"{tag}: dirty change {r['dirty_blocks_change']}")
    check(r["segments_flushed"] == second[4] - s0[4] > 0, f"{tag}: segments flushed {r['segments_flushed']}")
    check(abs(r["writes_per_second"] - 50 / r["seconds"]) < 1e-6, f"{tag}: writes per second")
    if target == "dm-wbkit":
        check(r["errors"] == {name: 0 for name in COUNTERS} and list(r["errors"]) == COUNTERS,
              f"{tag}: error rates {r['errors']}")
        check(set(r["errors_per_second"].values()) == {0}, f"{tag}: errors per second {r['errors_per_second']}")
    else:
        check(r["errors"] is None and r["errors_per_second"] is None, f"{tag}: upstream error rates")
    # drop_caches was over before the second sample: it is the final state.
    check(second == s1 and s1[6] == 0, f"{tag}: the second sample {second} is not the final state {s1}")

# The read miss on the failing backing device: that read failed, the
# target stayed alive and counted it.
check(rc("miss.read") != 0, "miss: a read of a failing backing device succeeded")
check(rc("miss.json") == 0, f"miss: wbstat --json exit {rc('miss.json')}: {text('miss.json.err')}")
miss = document("miss.json")["devices"][0]
check(miss["dead"] is False, "miss: a failed read miss killed the target")
errors = check_errors("miss", miss, counts("miss.counts"))
check(errors.get("backing_read", 0) >= 1 and errors.get("failed_requests", 0) >= 1,
      f"miss: the failed read is not counted: {errors}")
check(all(errors.get(name) == 0 for name in FATAL + ["transient", "cache_read_fallback"]),
      f"miss: other counters went up: {errors}")
check(rc("kill") != 0, "kill: drop_caches wrote back to a failing backing device")

# Both dm-wbkit devices, one dead.
status, table = raw("dead.status"), raw("dead.table")
check(rc("dead.json") == 1, f"dead: wbstat --json exit {rc('dead.json')}, not 1: {text('dead.json.err')}")
doc = document("dead.json")
devices = {d["name"]: d for d in doc["devices"]}
check(sorted(devices) == ["wbd", "wbk"], f"dead: devices {sorted(devices)}")
for name, d in devices.items():
    compare_device(f"dead/{name}", d, status[name], table[name], "dm-wbkit")
check(devices["wbd"]["dead"] is True and devices["wbk"]["dead"] is False, "dead: the dead flags")
cause = devices["wbd"]["dead_cause"] or ""
check(re.fullmatch(r"backing write \d+ -5", cause) is not None, f"dead: dead_cause {cause!r}")
check(devices["wbk"]["dead_cause"] is None, "dead: an alive device has no cause")
samples = prometheus("dead.prom")
wbd_errors = check_errors("dead/wbd", devices["wbd"], counts("dead.wbd.counts"), samples)
check(wbd_errors.get("backing_write", 0) >= 1, f"dead: the writeback error is not counted: {wbd_errors}")
check(wbd_errors.get("backing_read") == errors.get("backing_read") and
      wbd_errors.get("failed_requests") == errors.get("failed_requests"),
      f"dead: the read miss's counts changed: {errors} -> {wbd_errors}")
wbk_errors = check_errors("dead/wbk", devices["wbk"], counts("dead.wbk.counts"), samples)
check(set(wbk_errors.values()) == {0}, f"dead: the healthy device counted errors: {wbk_errors}")
check(rc("dead.prom") == 1, "dead: --prometheus exit")
check(prom_value(samples, "writeboost_dead", "wbd", "dm-wbkit") == 1, "dead: prometheus writeboost_dead wbd")
check(prom_value(samples, "writeboost_dead", "wbk", "dm-wbkit") == 0, "dead: prometheus writeboost_dead wbk")
check(samples.get(("writeboost_dead_cause_info", frozenset({("device", "wbd"), ("target", "dm-wbkit"),
                                                             ("cause", cause)}))) == 1, "dead: dead_cause_info")
check(rc("dead.named") == 1 and f"DEAD: {cause}" in text("dead.named.txt"), f"dead: {text('dead.named.txt')}")
errors_line = next((line for line in text("dead.named.txt").splitlines() if line.startswith("  errors ")), "")
check(re.match(r"  errors     backing device \d+, cache device 0, failed requests \d+, transient 0 since the target "
               r"was made: backing_read \d+, backing_write \d+", errors_line) is not None and
      ("; possibly fatal: backing_write " in errors_line or "; FATAL: " in errors_line),
      f"dead: human errors: {text('dead.named.txt')}")
check(rc("nosuch") == 3 and text("nosuch.txt").startswith("wbstat: error: "), f"nosuch: {text('nosuch.txt')}")
check(rc("linear") == 3 and "b1: not a writeboost device" in text("linear.txt"), f"linear: {text('linear.txt')}")
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
CHECK
