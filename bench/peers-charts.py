#!/usr/bin/python3
"""Charts of a bench/vm-peers.sh table (and of a tests/crash/peers.sh table).

Usage: bench/peers-charts.py [--older EARLIER.md]... RESULTS.md OUTDIR [CRASH.md]

Reads the first table of RESULTS.md (rows by the labels vm-peers.sh
prints, one column per cache) and writes one PNG per group of rows to
OUTDIR: peers-writes.png, peers-latency.png, peers-reads.png,
peers-filesystem.png, and with CRASH.md (a tests/crash/peers.sh report)
peers-crash.png. Every bar is a median from the table, labelled with its
value; dm-wbkit's bars are drawn in a colour of their own. A row the table
lacks is left out of its chart; a group with no row at all writes no file.
With --older, the rows RESULTS.md lacks come from an earlier table of the
same caches (a run of some rows only, after a change that touched them).
Exit status: 0, or 2 when RESULTS.md holds no vm-peers table or an earlier
table has other columns.
"""

import argparse
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")  # no display: the charts go to files
import matplotlib.pyplot as plt  # noqa: E402

OURS = "dm-wbkit"
OURS_COLOUR = "#d62728"
PEER_COLOUR = "#7f7f7f"
REFERENCE_COLOUR = "#c7c7c7"
REFERENCES = ("bare disk", "bare cache disk")

# (file, title, [(row label in the table, subplot title, log scale)])
GROUPS = [
    ("peers-writes.png", "Writes (higher is better)", [
        ("random 4 KiB writes QD32 into an empty cache", "random 4 KiB writes into an empty cache, IOPS", False),
        ("steady state, random 4 KiB writes QD16", "steady state (writeback-bound), IOPS", False),
        ("4 KiB write + fdatasync QD1", "4 KiB write + fdatasync, writes/s", False),
        ("dbench -s 4 clients", "dbench -s, 4 clients, MB/s", False),
    ]),
    ("peers-latency.png", "Write latency in the steady state, and fdatasync (lower is better)", [
        ("steady state: write latency p50", "steady state p50, ms", True),
        ("steady state: write latency p99.9", "steady state p99.9, ms", True),
        ("steady state: write latency max", "steady state maximum, ms", True),
        ("the fdatasync's p99", "fdatasync p99, ms", False),
    ]),
    ("peers-reads.png", "Reads", [
        ("read hits after writes, 4 KiB QD32", "read hits, IOPS (higher is better)", True),
        ("cold reads: mean latency", "cold read (miss) mean latency, ms (lower is better)", False),
    ]),
    ("peers-filesystem.png", "Filesystem, drain and memory (lower is better)", [
        ("untar + sync", "untar + sync, s", False),
        ("draining the dirty set", "writing the same dirty set back, s", False),
        ("kernel memory (slab + vmalloc) growth, building to full", "kernel memory, building to full, MiB", False),
    ]),
]


def number(cell):
    """A table cell's value, or None for an empty or non-numeric cell."""
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


def read_table(path, first_header):
    """The first markdown table whose header starts with first_header:
    (column names, {row label: [cells]})."""
    columns, rows = None, {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line.startswith("|"):
                if columns is not None and rows:
                    break
                continue
            cells = [c.strip() for c in line.strip("|").split("|")]
            if columns is None:
                if cells[0] == first_header:
                    columns = cells
            elif not re.fullmatch(r"-+", cells[0]):
                rows[cells[0]] = cells
    return columns, rows


def bar_colour(name):
    if name == OURS:
        return OURS_COLOUR
    return REFERENCE_COLOUR if name in REFERENCES else PEER_COLOUR


def bars(ax, names, values, title, log):
    shown = [(n, v) for n, v in zip(names, values) if v is not None]
    if not shown:
        return False
    labels = [n for n, _ in shown]
    heights = [v for _, v in shown]
    ypos = range(len(shown))
    ax.barh(ypos, heights, color=[bar_colour(n) for n in labels])
    ax.set_yticks(list(ypos), labels)
    ax.invert_yaxis()
    if log and min(heights) > 0:
        ax.set_xscale("log")
    ax.set_title(title, fontsize=10)
    top = max(heights)
    for y, v in zip(ypos, heights):
        text = f"{v:,.0f}" if v >= 100 else f"{v:.3g}"
        ax.text(v, y, " " + text, va="center", fontsize=8)
    ax.set_xlim(right=top * (3 if log else 1.18))
    ax.grid(axis="x", alpha=0.3)
    return True


def group_chart(columns, rows, group, outdir, subtitle):
    file, title, wanted = group
    present = [(rows[label], sub, log) for label, sub, log in wanted if label in rows]
    if not present:
        return None
    names = columns[2:]
    fig, axes = plt.subplots(len(present), 1, figsize=(9, 2.4 * len(present) + 0.8))
    if len(present) == 1:
        axes = [axes]
    drawn = 0
    for ax, (cells, sub, log) in zip(axes, present):
        if bars(ax, names, [number(c) for c in cells[2:]], sub, log):
            drawn += 1
        else:
            ax.set_visible(False)
    if not drawn:
        plt.close(fig)
        return None
    fig.suptitle(title, fontsize=12, fontweight="bold")
    fig.text(0.5, 0.005, subtitle, ha="center", fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    out = os.path.join(outdir, file)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def crash_chart(path, outdir):
    columns, rows = read_table(path, "cache")
    if columns is None:
        return None
    lost_col = columns.index("states losing fsynced writes")
    checked_col = columns.index("states checked")
    names, lost, checked = [], [], []
    for label, cells in rows.items():
        names.append(label)
        lost.append(number(cells[lost_col]) or 0)
        checked.append(number(cells[checked_col]) or 0)
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(names) + 1.4))
    ypos = range(len(names))
    ax.barh(ypos, lost, color=[bar_colour("dm-wbkit" if n == OURS else n) for n in names])
    ax.set_yticks(list(ypos), names)
    ax.invert_yaxis()
    for y, (l, c) in enumerate(zip(lost, checked)):
        ax.text(l, y, f" {l:.0f} of {c:.0f} states", va="center", fontsize=8)
    ax.set_xlim(0, max(max(lost), 1) * 1.6)
    ax.set_title("Crash states (power cuts) that lose fsynced writes (lower is better)", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    out = os.path.join(outdir, "peers-crash.png")
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main(argv):
    parser = argparse.ArgumentParser(
        prog="peers-charts", description=__doc__.strip().splitlines()[0])
    parser.add_argument("results", metavar="RESULTS.md")
    parser.add_argument("outdir", metavar="OUTDIR")
    parser.add_argument("crash", metavar="CRASH.md", nargs="?")
    parser.add_argument("--older", metavar="RESULTS.md", action="append", default=[],
                        help="an earlier table with the same columns: the rows RESULTS.md lacks")
    args = parser.parse_args(argv[1:])
    columns, rows = read_table(args.results, "row")
    if columns is None or not rows:
        print(f"peers-charts: error: no vm-peers table in {args.results}", file=sys.stderr)
        return 2
    subtitle = f"medians from {os.path.basename(args.results)}"
    for older in args.older:
        older_columns, older_rows = read_table(older, "row")
        if older_columns != columns:
            print(f"peers-charts: error: {older} has other columns than {args.results}",
                  file=sys.stderr)
            return 2
        taken = [label for label in older_rows if label not in rows]
        rows.update({label: older_rows[label] for label in taken})
        if taken:
            subtitle += f", the rows it lacks from {os.path.basename(older)}"
    subtitle += " (bench/vm-peers.sh)"
    os.makedirs(args.outdir, exist_ok=True)
    for group in GROUPS:
        out = group_chart(columns, rows, group, args.outdir, subtitle)
        if out:
            print(out)
    if args.crash:
        out = crash_chart(args.crash, args.outdir)
        if out:
            print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
