#!/usr/bin/python3
"""Print the regions of the backing device that hold the most dirty data.

    dirtiest_regions.py CACHE [--backing DEV] [--region-size 1M] [--top 10]

Reads the cache's log as the kernel's replay would (wbkit.Cache.scan()),
splits the backing device into regions of --region-size bytes and lists the
regions with the most dirty sectors still only in the cache, with the oldest
and newest segment holding them. Read-only.
"""

import argparse
import sys

import wbkit

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size_arg(text: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in UNITS else ""
    try:
        value = int(text[: len(text) - len(unit)]) * UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4096, 64K, 1M, 1G)") from None
    if value <= 0 or value % wbkit.SECTOR_SIZE:
        raise argparse.ArgumentTypeError("the region size must be a positive multiple of 512")
    return value


def human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def dirty_regions(scan: wbkit.LogScan, region_sectors: int) -> dict[int, list[int]]:
    """region -> [dirty sectors, oldest segment id, newest segment id]."""
    regions: dict[int, list[int]] = {}
    for entry in scan.index:
        if not entry.dirty:
            continue
        for bit in range(wbkit.BLOCK_SECTORS):
            if entry.dirty >> bit & 1:
                region = (entry.block_sector + bit) // region_sectors
                r = regions.setdefault(region, [0, entry.segment_id, entry.segment_id])
                r[0] += 1
                r[1] = min(r[1], entry.segment_id)
                r[2] = max(r[2], entry.segment_id)
    return regions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache", help="cache device or image")
    parser.add_argument("--backing", help="backing device or image (reports blocks past its end)")
    parser.add_argument("--region-size", type=size_arg, default=1 << 20, help="bytes per region (default 1M)")
    parser.add_argument("--top", type=int, default=10, help="how many regions to list (default 10)")
    args = parser.parse_args()

    try:
        with wbkit.open(args.cache, backing=args.backing) as cache:
            scan = cache.scan()
    except OSError as e:
        print(f"dirtiest_regions: {e}", file=sys.stderr)
        return 3

    region_sectors = args.region_size // wbkit.SECTOR_SIZE
    regions = dirty_regions(scan, region_sectors)
    print(f"{args.cache}: {scan.dirty_sectors} dirty sectors ({human(scan.writeback_bytes)}) in "
          f"{len(regions)} region(s) of {human(args.region_size)}; log ids {scan.oldest_id}..{scan.newest_id}, "
          f"replay: {scan.stop_reason.value}")
    for f in scan.findings:
        if f.severity >= wbkit.Severity.WARNING:
            print(f"  {f}")
    if not regions:
        return 0
    print(f"{'rank':>4}  {'backing bytes':>31}  {'dirty':>10}  {'of region':>9}  segments")
    ranked = sorted(regions.items(), key=lambda kv: (-kv[1][0], kv[0]))
    for rank, (region, (sectors, oldest, newest)) in enumerate(ranked[: args.top], 1):
        start = region * args.region_size
        share = 100.0 * sectors / region_sectors
        print(f"{rank:>4}  {start:>14}..{start + args.region_size:<15}  {human(sectors * 512):>10}  "
              f"{share:>8.1f}%  {oldest}..{newest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
