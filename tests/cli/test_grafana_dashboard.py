"""The Grafana dashboard for `wbstat --prometheus`
(packaging/grafana/wbkit-dashboard.json), without Grafana (it is not in
Debian):

- its structure against the part of Grafana's dashboard model it uses
  (grafana-dashboard.schema.json, written from Grafana's dashboard kind), and
  what an import needs that a schema does not say: the data source input its
  panels name, one panel per grid cell, the variables the queries use;
- every metric, label and label value its PromQL names is one that wbstat
  prints, over the captured status lines of both modules;
- with Debian's `prometheus` installed, a real Prometheus scrapes wbstat (a
  stand-in dmsetup whose counters advance, prometheus_feed.py) every second,
  and every panel's query, with the variables resolved as Grafana resolves
  them, is valid PromQL, returns data, keeps the labels its legend names and
  filters by device.

What this does not prove: that Grafana draws the panels as intended (units,
colours, the table transformations). The picture in docs/images/ is
scripts/render-dashboard.py's rendering of the same queries, not Grafana's."""
import json
import math
import re
import shutil
import tempfile
import time

import jsonschema
import pytest

import prometheus_feed as feed
from conftest import ROOT, cannot_run, tool_path
from test_wbstat import parse_exposition

SCHEMA = ROOT / "tests" / "cli" / "grafana-dashboard.schema.json"
# Labels Prometheus adds to every scraped sample.
SCRAPE_LABELS = {"instance", "job"}
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range"}


def dashboard():
    return json.loads(feed.DASHBOARD.read_text())


def test_structure_matches_grafanas_dashboard_model():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(dashboard())


def overlaps(a, b):
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_what_an_import_needs():
    d = dashboard()
    inputs = {i["name"] for i in d["__inputs"] if i["pluginId"] == "prometheus"}
    assert inputs == {"DS_PROMETHEUS"}
    source = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    required_panels = {r["id"] for r in d["__requires"] if r["type"] == "panel"}
    assert {r["id"] for r in d["__requires"] if r["type"] == "datasource"} == {"prometheus"}
    variables = [v["name"] for v in d["templating"]["list"]]
    for v in d["templating"]["list"]:
        assert v["datasource"] == source, v["name"]
    panels = d["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for i, p in enumerate(panels):
        assert p["type"] in required_panels, p["title"]
        assert p["datasource"] == source, p["title"]
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for q in panels[:i]:
            assert not overlaps(g, q["gridPos"]), (p["title"], q["title"])
        refs = [t["refId"] for t in p["targets"]]
        assert len(set(refs)) == len(refs), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == source, p["title"]
            used = set(re.findall(r"\$\{?(\w+)\}?", t["expr"]))
            assert used <= set(variables) | GRAFANA_BUILTINS, (p["title"], used)
            # Every query of a panel filters by host and device.
            assert {"instance", "device"} <= used, p["title"]
    # No gap that Grafana would close by moving panels up: every panel but
    # the first row sits on the panel above it.
    for p in panels:
        g = p["gridPos"]
        if g["y"]:
            assert any(q["gridPos"]["y"] + q["gridPos"]["h"] == g["y"] and overlaps(
                {**g, "y": g["y"] - 1, "h": 1}, q["gridPos"]) for q in panels), p["title"]


def test_it_shows_what_the_issue_asks_for():
    d = dashboard()
    by_metric = {}
    for p in d["panels"]:
        for t in p["targets"]:
            for name, _ in selectors(t["expr"]):
                by_metric.setdefault(name, []).append(p)
    for name in ("writeboost_dirty_bytes", "writeboost_dirty_blocks", "writeboost_bios_total",
                 "writeboost_last_writeback_segment_id", "writeboost_errors_total", "writeboost_dead",
                 "writeboost_segments_in_use", "writeboost_tunable"):
        assert name in by_metric, name
    # The dead state: a stat panel that turns red at 1.
    (dead,) = by_metric["writeboost_dead"]
    assert dead["type"] == "stat"
    steps = dead["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[0]["value"] is None and steps[-1] == {"color": "red", "value": 1}
    # Error counters as rates, hit ratios from the counters with rate().
    assert any("rate(writeboost_errors_total" in t["expr"] for p in by_metric["writeboost_errors_total"]
               for t in p["targets"])
    hits = [t for p in by_metric["writeboost_bios_total"] for t in p["targets"] if 'hit="1"' in t["expr"]]
    assert {re.search(r'op="(\w+)"', t["expr"]).group(1) for t in hits} == {"read", "write"}
    assert all("rate(" in t["expr"] for t in hits)
    assert [p["type"] for p in by_metric["writeboost_tunable"]] == ["table"]


# PromQL, as much as the dashboard uses: strings, {matchers}, [ranges],
# Grafana's $variables, names, numbers, operators.
TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<var>\$\{?\w+\}?)|(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
                   r'|(?P<number>[0-9][0-9.eE]*[a-z]*)|(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){}\[\],]))')
KEYWORDS = {"and", "or", "unless", "bool", "offset"}
# Aggregations may put `by (...)` between their name and their `(`.
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
                "quantile"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def tokens(expr):
    pos, out = 0, []
    while pos < len(expr.rstrip()):
        m = TOKEN.match(expr, pos)
        assert m and m.end() > pos, f"cannot read {expr[pos:]!r} in {expr!r}"
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def selectors(expr):
    """(metric name, [(label, operator, value)]) of every vector selector,
    and checks the grouping clauses are lists of labels."""
    toks, out, i = tokens(expr), [], 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][1] if i + 1 < len(toks) else None
        if kind == "name" and text in GROUPING:
            if following == "(":
                j = i + 2
                while toks[j][1] != ")":
                    assert toks[j][0] == "name" or toks[j][1] == ",", expr
                    j += 1
                i = j
        elif kind == "name" and (following == "(" or text in AGGREGATIONS):
            pass  # a function or an aggregation
        elif kind == "name" and text not in KEYWORDS:
            matchers = []
            if following == "{":
                j = i + 2
                while toks[j][1] != "}":
                    if toks[j][1] == ",":
                        j += 1
                        continue
                    (lk, label), (_, operator), (vk, value) = toks[j:j + 3]
                    assert lk == "name" and operator in ("=", "!=", "=~", "!~") and vk == "string", expr
                    matchers.append((label, operator, json.loads(value)))
                    j += 3
                i = j
            out.append((text, matchers))
        elif text == "[":
            while toks[i][1] != "]":
                i += 1
        i += 1
    return out


def grouping_labels(expr):
    return {label for clause in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr)
            for label in re.findall(r"\w+", clause)}


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """{metric: {label: {values}}} of what wbstat prints for the three
    captured devices, through the stand-in dmsetup (error counters and the
    dead cause included), at two steps of the workload."""
    path = tool_path("wbstat")
    if not path.exists():
        pytest.fail(f"no wbstat at {path}: build first, or set WBKIT_BUILD")
    exporter = feed.Exporter(path, tmp_path_factory.mktemp("exporter"))
    metrics = {}
    for _ in range(2):
        for (name, labels) in parse_exposition(exporter.scrape()):
            entry = metrics.setdefault(name, {})
            for label, value in labels:
                entry.setdefault(label, set()).add(value)
    assert not exporter.errors, exporter.errors
    return metrics


def test_every_metric_and_label_is_one_wbstat_prints(printed):
    assert {"writeboost_dead", "writeboost_errors_total", "writeboost_dead_cause_info"} <= set(printed)
    assert printed["writeboost_info"]["target"] == {"dm-wbkit", "dm-writeboost"}
    queries = [(p["title"], t["expr"]) for p, t in feed.panel_targets(dashboard())]
    queries += [(v["name"], v["query"]["query"]) for v in dashboard()["templating"]["list"]]
    for title, expr in queries:
        if title in ("instance", "device"):
            expr = re.fullmatch(r"label_values\((.*),\s*\w+\)", expr).group(1)
        found = selectors(expr)
        assert found, (title, expr)
        for name, matchers in found:
            assert name in printed, f"{title}: wbstat prints no metric {name}"
            labels = printed[name]
            for label, operator, value in matchers:
                assert label in set(labels) | SCRAPE_LABELS, f"{title}: {name} has no label {label}"
                if label not in SCRAPE_LABELS and "$" not in value:
                    values = labels[label]
                    if operator == "=":
                        assert value in values, f"{title}: {name}{{{label}}} is never {value!r}"
                    elif operator == "=~":
                        assert any(re.fullmatch(value, v) for v in values), (title, name, label, value)
        names = {name for name, _ in found}
        for label in grouping_labels(expr):
            assert any(label in printed[n] for n in names) or label in SCRAPE_LABELS, (title, label)


def test_a_misspelled_metric_is_caught(printed):
    # The check above, on a query with a typo: it must not pass.
    name, matchers = selectors('rate(writeboost_bio_total{op="read",hit="1"}[5m])')[0]
    assert name == "writeboost_bio_total" and name not in printed
    (_, matchers), = selectors('writeboost_errors_total{counter="cache_writes"}')
    assert matchers[0][2] not in printed["writeboost_errors_total"]["counter"]


@pytest.fixture(scope="module")
def prometheus():
    """A real Prometheus scraping wbstat every second, after 6 scrapes."""
    if shutil.which("prometheus") is None:
        cannot_run("prometheus is not installed (Debian's package prometheus): the dashboard's queries are not "
                   "run")
    path = tool_path("wbstat")
    with tempfile.TemporaryDirectory(prefix="wbkit-prom-") as tmp:
        with feed.Exporter(path, f"{tmp}/exporter") as exporter, feed.Prometheus(f"{tmp}/prometheus",
                                                                                exporter.port) as prom:
            prom.wait_for_samples(6)
            yield prom, exporter
            assert not exporter.errors, exporter.errors


# Grafana's $__rate_interval: max(4 scrape intervals, $__interval + one):
# 4 s here, where Prometheus scrapes every second.
RATE_INTERVAL = f"{4 * feed.Prometheus.SCRAPE_SECONDS}s"


def run_target(prom, target, variables):
    expr = feed.substitute(target["expr"], variables, RATE_INTERVAL)
    if target.get("instant"):
        reply = prom.api("query", query=expr)
    else:
        end = time.time()
        reply = prom.api("query_range", query=expr, start=end - 10, end=end, step=1)
    assert reply["status"] == "success", (expr, reply.get("error"))
    result = reply["data"]["result"]
    values = [float(v) for series in result for v in
              ([series["value"][1]] if "value" in series else [p[1] for p in series["values"]])]
    return result, values


def test_every_panel_query_returns_data_from_a_real_prometheus(prometheus):
    prom, exporter = prometheus
    d = dashboard()
    variables = feed.resolve_variables(prom, d)
    assert variables["device"] == "(wbd|wbk|wbup)"
    assert variables["instance"] == feed.grafana_regex([f"127.0.0.1:{exporter.port}"])
    for panel, target in feed.panel_targets(d):
        what = f"{panel['title']} {target['refId']}"
        result, values = run_target(prom, target, variables)
        assert result, f"{what}: no data"
        assert any(math.isfinite(v) for v in values), f"{what}: no number"
        for series in result:
            for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
                assert label in series["metric"], f"{what}: the legend's {label} is not in {series['metric']}"
        for transformation in panel["transformations"]:
            if transformation["id"] == "organize":
                columns = {"Time", "Value"} | {label for s in result for label in s["metric"]}
                named = set(transformation["options"]["excludeByName"]) | set(
                    transformation["options"]["renameByName"])
                assert named <= columns, (what, named - columns)


def test_the_answers_say_what_the_devices_did(prometheus):
    prom, exporter = prometheus
    d = dashboard()
    variables = feed.resolve_variables(prom, d)
    panels = {p["title"]: p for p in d["panels"]}

    def last(title, ref="A"):
        (target,) = [t for t in panels[title]["targets"] if t["refId"] == ref]
        result, _ = run_target(prom, {**target, "instant": True}, variables)
        return {s["metric"].get("device"): float(s["value"][1]) for s in result}

    assert last("Dead") == {"wbd": 1, "wbk": 0}  # dm-writeboost has no dead state
    assert set(last("Dead cause")) == {"wbd"}
    dirty = last("Dirty data")
    assert dirty["wbd"] == 8 * 4096 and dirty["wbk"] > 0
    for device, ratio in last("Hit ratio", "A").items():
        assert device == "wbd" and math.isnan(ratio) or 0.25 <= ratio <= 0.75, (device, ratio)
    for device, ratio in last("Hit ratio", "B").items():
        assert device == "wbd" and math.isnan(ratio) or 0.15 <= ratio <= 0.55, (device, ratio)
    share = last("Segments in use")
    assert 0 < share["wbk"] < 1 and share["wbd"] == 1 / 14
    assert last("Writeback rate", "B")["wbk"] == pytest.approx(1, abs=0.5)  # one segment a scrape
    assert set(last("Errors since the target was made")) == {"wbd", "wbk"}
    assert last("Requests")["wbd"] == 0


def test_the_device_variable_filters_every_panel(prometheus):
    prom, _ = prometheus
    d = dashboard()
    variables = feed.resolve_variables(prom, d)
    for device in ("wbd", "wbk", "wbup"):
        one = {**variables, "device": feed.grafana_regex([device])}
        for panel, target in feed.panel_targets(d):
            result, _ = run_target(prom, target, one)
            assert {s["metric"].get("device") for s in result} <= {device}, (panel["title"], device)


def test_the_picture_in_the_docs_is_small_and_shown():
    png = ROOT / "docs" / "images" / "grafana-dashboard.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size < 300 * 1024
    assert "](images/grafana-dashboard.png)" in (ROOT / "docs" / "tools.md").read_text()
