#!/usr/bin/python3
"""Prints the tests tests.list takes from the `auto` group of an fstests tree,
one a line with its reason and the test's own description, as tests.list
holds them (the hand-picked lines at its top are kept by hand).

Usage: tests/fstests/choose.py FSTESTS_TREE   (the unpacked source: its tests/)
"""
import glob
import os
import re
import sys


def test_info(path):
    text = open(path, errors="replace").read()
    lines = text.split("\n")
    groups = next((line.split()[1:] for line in lines if line.startswith("_begin_fstest")), [])
    description = ""
    after_title = False
    for line in lines[:40]:
        if re.match(r"#\s*FS QA Test", line):
            after_title = True
            continue
        words = line.lstrip("#").strip()
        if after_title and words and not words.startswith(("Copyright", "SPDX")):
            description = words
            break
    needs_log_writes = "_require_log_writes" in text or re.search(r"_require_dm_target\s+log-writes", text)
    needs_flakey = re.search(r"_require_dm_target\s+flakey", text) is not None
    return groups, description, bool(needs_log_writes), needs_flakey


def reason(kind, groups, log_writes, flakey):
    quick = "quick" in groups
    if kind == "generic":
        if "recoveryloop" in groups and log_writes:
            return "dm-log-writes replay after every FUA/flush"
        if "log" in groups and flakey and quick:
            return "fsync, then a power cut by dm-flakey over our device"
        if "aio" in groups and quick:
            return "aio"
        if "trim" in groups:
            return "FITRIM: discards through the target"
        if "eio" in groups and quick:
            return "dm-error over our device: I/O errors reach the file system"
        if "shutdown" in groups and quick and "log" in groups:
            return "shutdown after fsync: what was flushed survives"
        if "punch" in groups and quick and "rw" in groups:
            return "punch hole / zero range over cached blocks"
    elif kind == "ext4":
        kinds = [g for g in groups if g in ("rw", "aio", "prealloc")]
        if kinds and quick:
            return "ext4 " + "/".join(kinds)
    elif kind == "xfs":
        if "log" in groups and quick:
            return "XFS log recovery"
        if "rw" in groups and quick and "realtime" not in groups:
            return "XFS rw"
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    tests_dir = os.path.join(sys.argv[1], "tests")
    for kind in ("generic", "ext4", "xfs"):
        for path in sorted(glob.glob(os.path.join(tests_dir, kind, "[0-9][0-9][0-9]"))):
            groups, description, log_writes, flakey = test_info(path)
            if "auto" not in groups or "soak" in groups or any(g.startswith("dangerous") for g in groups):
                continue
            why = reason(kind, groups, log_writes, flakey)
            if why:
                print(f"{kind}/{os.path.basename(path)}  # {why}: {description}")


if __name__ == "__main__":
    main()
