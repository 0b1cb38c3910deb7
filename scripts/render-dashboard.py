#!/usr/bin/python3
"""Draws docs/images/grafana-dashboard.png: the panels of the Grafana
dashboard packaging/grafana/wbkit-dashboard.json (titles, grid positions,
units, thresholds, value mappings, legends, hidden table columns), each
filled with what a real Prometheus answered to the panel's queries.

Not a Grafana screenshot: Grafana is not in Debian. Prometheus and the data
are real: Debian's prometheus scrapes `wbstat --prometheus` every second
for --seconds, wbstat reading the three devices of fixtures/status/ through
a stand-in dmsetup whose counters advance (tests/cli/prometheus_feed.py, the
same as the dashboard's test). The drawing is matplotlib's.

    scripts/render-dashboard.py [--wbstat build/tools/wbstat/wbstat] [--seconds 120] [--output PNG]
"""
import argparse
import datetime
import io
import json
import pathlib
import re
import sys
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402
from PIL import Image  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cli"))
import prometheus_feed as feed  # noqa: E402

WIDTH_PX, ROW_PX, DPI = 1500, 30, 100  # Grafana: 24 columns, rows of 30 px
COLOURS = {"green": "#56a64b", "red": "#e02f44"}


def human_bytes(v, _=None):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024


def formatter(unit):
    if unit == "bytes":
        return human_bytes
    if unit == "percentunit":
        return lambda v, _=None: f"{v * 100:.0f}%"
    if unit in ("iops", "cps"):
        return lambda v, _=None: f"{v:g}/s"
    if unit.startswith("suffix:"):
        return lambda v, _=None: f"{v:g}{unit[len('suffix:'):]}"
    return lambda v, _=None: f"{v:g}"


def legend(fmt, metric):
    if not fmt or fmt == "__auto":
        return ",".join(f"{k}={v}" for k, v in metric.items() if k != "__name__")
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt)


def threshold_colour(steps, value):
    colour = steps[0]["color"]
    for step in steps[1:]:
        if value >= step["value"]:
            colour = step["color"]
    return COLOURS.get(colour, colour)


def axes_for(fig, grid, rows):
    """The rectangle of a gridPos, in figure coordinates, title room left."""
    w_unit, height = 1 / 24, rows * ROW_PX
    x0 = grid["x"] * w_unit
    top = 1 - (grid["y"] * ROW_PX + HEADER_PX) / (height + HEADER_PX)
    h = grid["h"] * ROW_PX / (height + HEADER_PX)
    return x0, top - h, grid["w"] * w_unit, h


HEADER_PX = 70


def frame(fig, rect, title):
    """A panel's box and title; returns the inner rectangle."""
    x, y, w, h = rect
    pad_x, pad_y = 0.004, 0.004
    box = fig.add_axes([x + pad_x, y + pad_y, w - 2 * pad_x, h - 2 * pad_y])
    box.set_xticks([])
    box.set_yticks([])
    for side in box.spines.values():
        side.set_color("#c7d0d9")
    box.set_facecolor("#fbfbfc")
    box.text(0.01, 0.985, title, transform=box.transAxes, va="top", ha="left", fontsize=9, weight="bold")
    title_h = 24 / (fig.get_figheight() * DPI)
    return x + pad_x, y + pad_y, w - 2 * pad_x, h - 2 * pad_y - title_h


def draw_timeseries(fig, rect, panel, answers):
    x, y, w, h = rect
    defaults = panel["fieldConfig"]["defaults"]
    unit = defaults.get("unit", "none")
    left = 0.15 if unit.startswith("suffix:") else 0.09  # room for the tick labels
    ax = fig.add_axes([x + w * left, y + h * 0.36, w * (0.97 - left), h * 0.60])
    lines = 0
    for target, result in answers:
        for series in result:
            t = [float(p[0]) for p in series["values"]]
            v = [float(p[1]) for p in series["values"]]
            stamps = [datetime.datetime.fromtimestamp(s, datetime.timezone.utc) for s in t]
            ax.plot(stamps, v, linewidth=1.2, label=legend(target.get("legendFormat"), series["metric"]))
            lines += 1
    if "min" in defaults or "max" in defaults:
        ax.set_ylim(defaults.get("min"), defaults.get("max"))
    style = defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode", "off")
    if style == "line":
        for step in defaults["thresholds"]["steps"][1:]:
            ax.axhline(step["value"], color=COLOURS.get(step["color"], step["color"]), linestyle="--", linewidth=1)
    ax.yaxis.set_major_formatter(FuncFormatter(formatter(unit)))
    ax.yaxis.set_major_locator(MaxNLocator(4))
    ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter("%H:%M:%S"))
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if lines:
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(0, -0.14), ncol=3 if lines > 3 else lines,
                  frameon=False, handlelength=1.2, columnspacing=1.0)


def draw_stat(fig, rect, panel, answers):
    x, y, w, h = rect
    defaults = panel["fieldConfig"]["defaults"]
    mappings = {}
    for mapping in defaults.get("mappings", []):
        mappings.update(mapping["options"])
    series = [(target, s) for target, result in answers for s in result]
    for i, (target, s) in enumerate(series):
        value = float(s["values"][-1][1])
        text = mappings.get(f"{value:g}", {}).get("text", f"{value:g}")
        colour = threshold_colour(defaults["thresholds"]["steps"], value)
        cell = fig.add_axes([x + w * i / len(series) + 0.002, y + 0.004, w / len(series) - 0.004, h - 0.006])
        cell.set_facecolor(colour)
        cell.set_xticks([])
        cell.set_yticks([])
        cell.text(0.5, 0.72, legend(target.get("legendFormat"), s["metric"]), ha="center", va="center",
                  fontsize=7.5, color="white", transform=cell.transAxes)
        cell.text(0.5, 0.35, text, ha="center", va="center", fontsize=15, weight="bold", color="white",
                  transform=cell.transAxes)


def draw_table(fig, rect, panel, answers):
    x, y, w, h = rect
    hidden, renamed = set(), {}
    for transformation in panel["transformations"]:
        if transformation["id"] == "organize":
            hidden |= set(transformation["options"]["excludeByName"])
            renamed.update(transformation["options"]["renameByName"])
    rows = [dict(s["metric"], Value=s["value"][1]) for _, result in answers for s in result]
    columns = []
    for row in rows:
        columns += [c for c in row if c not in columns and c not in hidden and c != "Value"]
    if "Value" not in hidden:
        columns.append("Value")
    rows.sort(key=lambda r: [r.get(c, "") for c in columns])
    ax = fig.add_axes([x + 0.003, y + 0.003, w - 0.006, h - 0.006])
    ax.axis("off")
    if not rows:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", fontsize=9, color="grey")
        return
    # Rows of 20 px as far as the panel goes; Grafana scrolls the rest.
    height_px = h * fig.get_figheight() * DPI
    fit = max(1, int(height_px // 20) - 1)
    shown = rows if len(rows) <= fit else rows[:fit - 1]
    cells = [[row.get(c, "") for c in columns] for row in shown]
    n = len(cells) + 1
    table = ax.table(cellText=cells, colLabels=[renamed.get(c, c) for c in columns], cellLoc="left", colLoc="left",
                     bbox=[0, 1 - n * 20 / height_px, 1, n * 20 / height_px])
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    for (r, _), cell in table.get_celld().items():
        cell.set_edgecolor("#e4e7eb")
        if r == 0:
            cell.set_text_props(weight="bold")
            cell.set_facecolor("#eef1f4")
    if len(shown) < len(rows):
        ax.text(0.01, 1 - (n + 0.6) * 20 / height_px, f"... {len(rows) - len(shown)} more rows (the table scrolls)",
                fontsize=7, color="#666", va="center", transform=ax.transAxes)


def render(dashboard, answers, output, seconds):
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    fig = plt.figure(figsize=(WIDTH_PX / DPI, (rows * ROW_PX + HEADER_PX) / DPI), dpi=DPI)
    fig.text(0.005, 1 - 8 / (rows * ROW_PX + HEADER_PX), dashboard["title"], va="top", fontsize=13, weight="bold")
    fig.text(0.005, 1 - 32 / (rows * ROW_PX + HEADER_PX),
             "The panels of packaging/grafana/wbkit-dashboard.json drawn by scripts/render-dashboard.py with "
             "matplotlib, NOT a Grafana screenshot, from a real Prometheus's answers to each panel's queries:\n"
             f"{seconds} s of `wbstat --prometheus` scraped every second, over three devices (dm-wbkit wbk, dm-wbkit "
             "wbd which is dead, dm-writeboost wbup) and a made-up workload.", va="top", fontsize=8, color="#444",
             linespacing=1.4)
    draw = {"timeseries": draw_timeseries, "stat": draw_stat, "table": draw_table}
    for panel in dashboard["panels"]:
        inner = frame(fig, axes_for(fig, panel["gridPos"], rows), panel["title"])
        draw[panel["type"]](fig, inner, panel, answers[panel["id"]])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    # A palette of 64 colours keeps the picture small for the repository.
    Image.open(buffer).convert("RGB").quantize(colors=64).save(output, optimize=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wbstat", default=str(feed.wbstat_path()))
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--output", default=str(ROOT / "docs" / "images" / "grafana-dashboard.png"))
    args = parser.parse_args()
    dashboard = json.loads(feed.DASHBOARD.read_text())
    rate_interval = f"{4 * feed.Prometheus.SCRAPE_SECONDS}s"  # Grafana's $__rate_interval at a 1 s scrape
    answers = {}
    with tempfile.TemporaryDirectory(prefix="wbkit-render-") as tmp:
        with feed.Exporter(args.wbstat, f"{tmp}/exporter") as exporter, feed.Prometheus(
                f"{tmp}/prometheus", exporter.port, instance="host1") as prom:
            prom.wait_for_samples(args.seconds, timeout=args.seconds * 3 + 60)
            variables = feed.resolve_variables(prom, dashboard)
            end = time.time()
            for panel in dashboard["panels"]:
                answers[panel["id"]] = []
                for target in panel["targets"]:
                    expr = feed.substitute(target["expr"], variables, rate_interval)
                    if target.get("instant"):
                        reply = prom.api("query", query=expr, time=end)
                    else:
                        reply = prom.api("query_range", query=expr, start=end - args.seconds, end=end, step=1)
                    if reply["status"] != "success":
                        sys.exit(f"render-dashboard: {panel['title']}: {reply.get('error')}")
                    answers[panel["id"]].append((target, reply["data"]["result"]))
            if exporter.errors:
                sys.exit(f"render-dashboard: wbstat failed: {exporter.errors[0]}")
    render(dashboard, answers, args.output, args.seconds)
    print(f"{args.output}: {pathlib.Path(args.output).stat().st_size} bytes")


if __name__ == "__main__":
    main()
