"""A real Prometheus scraping `wbstat --prometheus`, for the Grafana
dashboard's test (test_grafana_dashboard.py) and its picture
(scripts/render-dashboard.py).

The devices are the three of fixtures/status/ as the VM scenario 89-wbstat
captured them: `wbk` (dm-wbkit, alive), `wbup` (upstream dm-writeboost) and
`wbd` (dm-wbkit, dead). Each scrape is one step of a made-up workload on top
of the captured lines: wbk and wbup read and write, their ring fills and is
written back in bursts, wbk counts a few errors that do not kill it; wbd stays
as it died. wbstat reads them through a stand-in dmsetup (status, table and
the messages error_counts and dead_cause), as it reads a live system: what
Prometheus gets is wbstat's own output, not a copy of it."""
import json
import math
import os
import pathlib
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
STATUS = ROOT / "fixtures" / "status"
DASHBOARD = ROOT / "packaging" / "grafana" / "wbkit-dashboard.json"

# The stand-in dmsetup: answers from the files of the directory next to it.
FAKE_DMSETUP = """#!/bin/sh
d="$(dirname "$0")/state"
case "$1" in
status) cat "$d/status" ;;
table) cat "$d/table" ;;
message)
	if [ -f "$d/$2.$4" ]; then cat "$d/$2.$4"; exit 0; fi
	echo "device-mapper: message ioctl on $2  failed: Invalid argument" >&2
	echo "Command failed." >&2
	exit 1 ;;
*) echo "fake dmsetup: not a read-only query: $*" >&2; exit 9 ;;
esac
"""

COUNTERS = ("backing_read", "backing_write", "backing_flush", "cache_read", "cache_write", "cache_flush",
            "cache_read_fallback", "failed_requests", "transient")
BLOCKS_PER_SEGMENT = 127  # 512 KiB less the 4 KiB metablock


def captured(tag, device):
    """The tokens after `writeboost` of one captured status or table line."""
    for line in (STATUS / tag).read_text().splitlines():
        name, rest = line.split(": ", 1)
        if name == device:
            return rest.split()[3:]
    raise KeyError(device)


class Workload:
    """dmsetup's answers at step n."""

    def __init__(self):
        self.base = {"wbk": captured("wk.status", "wbk"), "wbup": captured("up.status", "wbup")}
        self.tables = {"wbk": captured("wk.table", "wbk"), "wbup": captured("up.table", "wbup"),
                       "wbd": captured("dead.table", "wbd")}
        self.dead = captured("dead.status", "wbd")

    @staticmethod
    def in_use(n, phase):
        # Fills up to 12 of 14 segments, then writeback catches up: a
        # triangle of period 18, one step at a time.
        t = (n + phase) % 18
        return 3 + (t if t <= 9 else 18 - t)

    def status(self, name, n, phase, reads, writes):
        f = self.base[name][:]
        # current_id rises by one segment a step, last_writeback_id by 0 or
        # 2, so that the segments in use follow the triangle; one segment is
        # not yet flushed; the dirty blocks are those of the segments in use.
        cur = int(f[3]) + n
        wb = cur - self.in_use(n, phase)
        dirty = (cur - wb - 1) * BLOCKS_PER_SEGMENT + (n * 37) % BLOCKS_PER_SEGMENT
        f[0] = str((int(f[0]) + n * 61) % int(f[1]))
        f[3], f[4], f[5], f[6] = str(cur), str(cur - 1), str(wb), str(dirty)
        # Full-size reads and writes, hits and misses, with hit ratios that
        # drift: reads 30% to 70%, writes 20% to 50%.
        stat = [int(v) for v in f[7:23]]
        read_hits = self.cumulative(n, phase, reads, 0.5, 0.2, math.sin, 5)
        write_hits = self.cumulative(n, phase, writes, 0.35, 0.15, math.cos, 7)
        stat[1] += n * reads - read_hits
        stat[5] += read_hits
        stat[9] += n * writes - write_hits
        stat[13] += write_hits
        f[7:23] = [str(v) for v in stat]
        f[23] = str(int(f[23]) + n // 3)  # partial flushes
        return f

    @staticmethod
    def cumulative(n, phase, per_step, mean, swing, wave, period):
        return sum(round(per_step * (mean + swing * wave((k + phase) / period))) for k in range(1, n + 1))

    def answers(self, n):
        """{file name: text} for the stand-in dmsetup."""
        wbk = self.status("wbk", n, 0, 40, 90)
        wbup = self.status("wbup", n, 7, 25, 60)
        lines = {"wbd": self.dead, "wbk": wbk, "wbup": wbup}
        status = "".join(f"{name}: 0 32768 writeboost {' '.join(f)}\n" for name, f in lines.items())
        table = "".join(f"{name}: 0 32768 writeboost {' '.join(f)}\n" for name, f in self.tables.items())
        wbk_errors = {"backing_read": n // 4, "failed_requests": n // 4, "transient": n // 3}
        wbd_errors = {"backing_write": 1}

        def counts(nonzero):
            return " ".join(f"{c} {nonzero.get(c, 0)}" for c in COUNTERS) + "\n"

        return {"status": status, "table": table, "wbk.error_counts": counts(wbk_errors),
                "wbd.error_counts": counts(wbd_errors), "wbd.dead_cause": "backing write 0 -5\n"}


class Exporter:
    """An HTTP server whose /metrics is `wbstat --prometheus` at the next step
    of the workload: each scrape advances it by one."""

    def __init__(self, wbstat, workdir):
        self.wbstat = str(wbstat)
        self.dir = pathlib.Path(workdir)
        (self.dir / "state").mkdir(parents=True, exist_ok=True)
        self.dmsetup = self.dir / "dmsetup"
        self.dmsetup.write_text(FAKE_DMSETUP)
        self.dmsetup.chmod(0o755)
        self.workload = Workload()
        self.step = 0
        self.errors = []
        self.lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.scrape().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def scrape(self):
        with self.lock:
            for name, text in self.workload.answers(self.step).items():
                (self.dir / "state" / name).write_text(text)
            self.step += 1
            done = subprocess.run([self.wbstat, "--prometheus", "--dmsetup", str(self.dmsetup)],
                                  capture_output=True, text=True, timeout=60)
            # 1: a dm-wbkit target (wbd) is dead; the report is complete.
            if done.returncode not in (0, 1) or done.stderr:
                self.errors.append(f"wbstat exit {done.returncode}: {done.stderr}")
            return done.stdout

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """A Prometheus server of its own (temporary directory, free port) that
    scrapes one target every second."""

    SCRAPE_SECONDS = 1

    def __init__(self, workdir, target_port, binary="prometheus", instance=None):
        self.dir = pathlib.Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.binary = shutil.which(binary) or binary
        config = self.dir / "prometheus.yml"
        config.write_text(f"""global:
  scrape_interval: {self.SCRAPE_SECONDS}s
  scrape_timeout: {self.SCRAPE_SECONDS}s
  evaluation_interval: {self.SCRAPE_SECONDS}s
scrape_configs:
  - job_name: wbstat
    static_configs:
      - targets: ['127.0.0.1:{target_port}']
""")
        if instance:  # a host name instead of 127.0.0.1:<port>, for pictures
            config.write_text(config.read_text() + f"""    relabel_configs:
      - target_label: instance
        replacement: {instance}
""")
        self.config = config
        self.process = None
        self.url = None

    def __enter__(self):
        for _ in range(5):  # another program may take the free port first
            port = free_port()
            self.url = f"http://127.0.0.1:{port}"
            self.log = open(self.dir / "prometheus.log", "w")
            self.process = subprocess.Popen(
                [self.binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=self.log, stderr=subprocess.STDOUT, cwd=self.dir)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    time.sleep(0.2)
            self.stop()
        raise RuntimeError("prometheus did not start: " + (self.dir / "prometheus.log").read_text()[-2000:])

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process:
            self.log.close()

    def __exit__(self, *exc):
        self.stop()

    def api(self, path, **params):
        url = f"{self.url}/api/v1/{path}?" + urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # a bad query: 400 with the error in the body
            return json.load(e)

    def wait_for_samples(self, count, timeout=120):
        """Waits until `count` scrapes of the target are stored."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = self.api("query", query="count_over_time(writeboost_devices[10m])")
            result = reply.get("data", {}).get("result", [])
            if result and float(result[0]["value"][1]) >= count:
                return
            time.sleep(0.25)
        raise TimeoutError(f"fewer than {count} scrapes in {timeout} s")


def grafana_regex(values):
    """What Grafana puts in `=~"$var"` for a multi-value (or All) Prometheus
    variable: each value escaped as prometheusSpecialRegexEscape does
    (Grafana's Prometheus data source, datasource.ts: a backslash
    becomes four, a regex metacharacter gets two before it, one for the
    PromQL string and one for the regex), then (a|b|c); one value alone."""
    escaped = [re.sub(r"([$^*{}\[\]+?.()|])", r"\\\\\1", v.replace("\\", "\\" * 4)) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def substitute(expr, variables, rate_interval):
    """An expression as Grafana sends it: $__rate_interval and the template
    variables ($name and ${name}) replaced."""
    expr = expr.replace("$__rate_interval", rate_interval).replace("${__rate_interval}", rate_interval)
    for name, value in variables.items():
        expr = expr.replace("${" + name + "}", value)
        expr = re.sub(r"\$" + re.escape(name) + r"\b", lambda m: value, expr)
    return expr


def label_values(prom, query, variables):
    """Grafana's Prometheus variable query label_values(selector, label) as
    Grafana runs it: /api/v1/label/<label>/values with match[] = selector."""
    m = re.fullmatch(r"label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)", query.strip())
    if not m:
        raise ValueError(f"not a label_values query: {query}")
    selector = substitute(m.group(1), variables, "1m")
    reply = prom.api(f"label/{m.group(2)}/values", **{"match[]": selector})
    assert reply["status"] == "success", reply
    return reply["data"]


def resolve_variables(prom, dashboard):
    """Every template variable as Grafana resolves it with All selected, in
    order (a later query may use an earlier variable): {name: regex}."""
    variables = {}
    for var in dashboard["templating"]["list"]:
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        values = label_values(prom, query, variables)
        variables[var["name"]] = grafana_regex(values) if values else ""
    return variables


def panel_targets(dashboard):
    """(panel, target) of every query of the dashboard, rows' panels included."""
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                yield inner, target


def wbstat_path():
    build = pathlib.Path(os.environ.get("WBKIT_BUILD", ROOT / "build"))
    return build / "tools" / "wbstat" / "wbstat"
