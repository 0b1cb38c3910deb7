#!/usr/bin/python3
"""Draw where dirty data lies on the backing device and how old it is.

    dirty_map.py CACHE [--backing DEV] [-o dirty-map.png] [--columns 256] [--rows 128]

x: position on the backing device. y: the segment id holding the newest copy
(low = old, high = recent; ids at or below last_writeback_id are already on
the backing device). Colour: dirty bytes in that cell. The strip on top sums
the dirty bytes per column. Read-only; writes one PNG.
"""

import argparse
import sys

import matplotlib

matplotlib.use("Agg")  # no display: the map goes to a file

import matplotlib.colors as colors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import wbkit  # noqa: E402


def scale(max_bytes: float):
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if max_bytes >= 4 * factor:
            return unit, factor
    return "bytes", 1


def colour_ticks(low: float, high: float, count: int = 6):
    """Ticks for the logarithmic colour bar spread across [low, high], both
    ends included, rounded to few significant digits: matplotlib's own log
    ticks land on powers of ten only, so a range inside one decade showed
    one tick or none."""
    if high <= low:
        return [low]
    for digits in range(2, 7):  # more digits only when a narrow range needs them
        inner = {float(f"{t:.{digits}g}") for t in np.geomspace(low, high, count)[1:-1]}
        ticks = sorted({low, high} | {t for t in inner if low < t < high})
        if len(ticks) >= min(count, 3):
            break
    return ticks


def dirty_points(scan: wbkit.LogScan):
    """One point per 4 KiB backing block with dirty sectors: (byte offset, segment id, dirty bytes)."""
    offsets, ids, weights = [], [], []
    for entry in scan.index:
        if entry.dirty:
            offsets.append(entry.block_sector * wbkit.SECTOR_SIZE)
            ids.append(entry.segment_id)
            weights.append(bin(entry.dirty).count("1") * wbkit.SECTOR_SIZE)
    return np.array(offsets, dtype=np.float64), np.array(ids, dtype=np.int64), np.array(weights, dtype=np.float64)


def draw(scan: wbkit.LogScan, backing_size, columns: int, rows: int, output: str, title: str) -> None:
    offsets, ids, weights = dirty_points(scan)
    end = backing_size or (float(offsets.max()) + wbkit.BLOCK_SIZE if len(offsets) else 1 << 20)
    unit, factor = scale(end)
    first_id = scan.oldest_id or 1
    last_id = max(scan.newest_id, first_id)
    # One row per segment id while that stays legible; a log of millions of
    # segments is binned into `rows` bands instead.
    if last_id - first_id + 1 <= rows:
        id_edges = np.arange(first_id, last_id + 2) - 0.5
    else:
        id_edges = np.linspace(first_id - 0.5, last_id + 0.5, rows + 1)
    x_edges = np.linspace(0, end, columns + 1)

    fig, (strip, ax) = plt.subplots(2, 1, figsize=(12, 7), sharex=True,
                                    gridspec_kw={"height_ratios": [1, 4], "hspace": 0.05})
    grid, _, _ = np.histogram2d(offsets, ids, bins=[x_edges, id_edges], weights=weights)
    shown = np.ma.masked_equal(grid.T / 1024.0, 0)  # empty cells stay white
    if shown.count():
        low, high = max(0.5, float(shown.min())), float(shown.max())
        if high <= low:
            high = low * 2  # one value everywhere: still a range to colour
        mesh = ax.pcolormesh(x_edges / factor, id_edges, shown, cmap="viridis", shading="flat",
                             norm=colors.LogNorm(vmin=low, vmax=high))
        bar = fig.colorbar(mesh, ax=[strip, ax], pad=0.01, label="dirty KiB in cell")
        ticks = colour_ticks(low, high)
        bar.set_ticks(ticks)
        bar.set_ticklabels([f"{t:g}" for t in ticks])
        bar.ax.minorticks_off()
    else:
        ax.text(0.5, 0.5, "nothing dirty", transform=ax.transAxes, ha="center", va="center", fontsize=14)
    if scan.last_writeback_id >= first_id:
        ax.axhline(scan.last_writeback_id + 0.5, color="tab:red", linestyle="--", linewidth=1)
        ax.text(0.995, scan.last_writeback_id + 0.5, " written back below", color="tab:red", ha="right",
                va="bottom", transform=ax.get_yaxis_transform(), fontsize=8)
    ax.set_xlim(0, end / factor)
    ax.set_ylim(id_edges[0], id_edges[-1])
    ax.set_xlabel(f"backing device offset ({unit})")
    ax.set_ylabel("segment id (older \u2192 newer)")
    ax.grid(True, color="0.85", linewidth=0.5)
    ax.set_axisbelow(True)

    per_column, _ = np.histogram(offsets, bins=x_edges, weights=weights)
    strip.bar(x_edges[:-1] / factor, per_column / 1024.0, width=np.diff(x_edges) / factor, align="edge",
              color="tab:orange")
    strip.set_ylabel("dirty KiB")
    strip.set_title(title, fontsize=10)
    fig.savefig(output, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache", help="cache device or image")
    parser.add_argument("--backing", help="backing device or image: the map spans all of it")
    parser.add_argument("-o", "--output", default="dirty-map.png", help="PNG to write (default dirty-map.png)")
    parser.add_argument("--columns", type=int, default=256, help="columns across the backing device (default 256)")
    parser.add_argument("--rows", type=int, default=128, help="most rows of segment ids (default 128)")
    args = parser.parse_args()
    if args.columns < 1 or args.rows < 1:
        parser.error("--columns and --rows must be at least 1")

    try:
        with wbkit.open(args.cache, backing=args.backing) as cache:
            scan = cache.scan()
            backing_size = cache.backing_size
    except OSError as e:
        print(f"dirty_map: {e}", file=sys.stderr)
        return 3

    title = (f"{args.cache}: {scan.dirty_sectors * wbkit.SECTOR_SIZE / 1024:.0f} KiB dirty in "
             f"{scan.dirty_blocks} blocks; log ids {scan.oldest_id}..{scan.newest_id}, "
             f"last_writeback_id {scan.last_writeback_id}, replay {scan.stop_reason.value}")
    draw(scan, backing_size, args.columns, args.rows, args.output, title)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
