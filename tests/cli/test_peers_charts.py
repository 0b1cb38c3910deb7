"""bench/peers-charts.py: the charts of a bench/vm-peers.sh table and of a
tests/crash/peers.sh table. The values are read from the committed tables
and checked against cells written out here; the PNGs are checked for what
a reader would see (one chart per group, sized by its rows), not pixel by
pixel."""
import importlib.util
import struct
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "bench" / "peers-charts.py"
RESULTS = ROOT / "bench" / "results"
VALIDATION = RESULTS / "vm-peers-validation-2026-12-03.md"
CRASH = RESULTS / "crash-peers-2026-12-03-1425.md"
PYTHON = "/usr/bin/python3"

pytest.importorskip("matplotlib")


def charts():
    spec = importlib.util.spec_from_file_location("peers_charts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def run(*args):
    return subprocess.run([PYTHON, str(SCRIPT), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_reads_the_medians_of_the_table():
    module = charts()
    columns, rows = module.read_table(VALIDATION, "row")
    assert columns[2] == "dm-wbkit" and columns[-1] == "bare cache disk"
    fsync = rows["4 KiB write + fdatasync QD1"]
    assert module.number(fsync[columns.index("dm-wbkit")]) == 77
    assert module.number(fsync[columns.index("dm-writecache")]) == 251
    drain = rows["draining the dirty set"]
    # The bare disks have no drain: an empty cell, not a zero bar.
    assert module.number(drain[columns.index("bare disk")]) is None
    crash_columns, crash_rows = module.read_table(CRASH, "cache")
    lost = crash_columns.index("states losing fsynced writes")
    assert module.number(crash_rows["dm-wbkit"][lost]) == 0
    assert module.number(crash_rows["bcache (writeback)"][lost]) == 2


def test_one_chart_per_group(tmp_path):
    done = run(VALIDATION, tmp_path, CRASH)
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["peers-crash.png", "peers-filesystem.png", "peers-latency.png",
                     "peers-reads.png", "peers-writes.png"]
    assert done.stdout.split() == [str(tmp_path / n) for n in
                                   ("peers-writes.png", "peers-latency.png", "peers-reads.png",
                                    "peers-filesystem.png", "peers-crash.png")]
    # Four rows of bars are taller than two.
    assert png_size(tmp_path / "peers-writes.png")[1] > png_size(tmp_path / "peers-reads.png")[1]


def test_a_table_without_a_group_writes_no_chart_for_it(tmp_path):
    lines = VALIDATION.read_text().splitlines()
    kept = [line for line in lines
            if not line.startswith(("| read hits", "| cold reads"))]
    partial = tmp_path / "partial.md"
    partial.write_text("\n".join(kept) + "\n")
    out = tmp_path / "out"
    done = run(partial, out)
    assert done.returncode == 0, done.stderr
    assert not (out / "peers-reads.png").exists()
    assert (out / "peers-writes.png").exists()


def test_rows_a_partial_run_lacks_come_from_an_older_table(tmp_path):
    lines = VALIDATION.read_text().splitlines()
    partial = tmp_path / "partial.md"
    partial.write_text("\n".join(line for line in lines
                                 if not line.startswith(("| read hits", "| cold reads"))) + "\n")
    done = run("--older", VALIDATION, partial, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "peers-reads.png").exists()
    # Another set of caches cannot fill the gaps: its columns differ.
    other = tmp_path / "other.md"
    other.write_text("\n".join(line.rsplit("|", 2)[0] + "|" if line.startswith("|") else line
                               for line in lines) + "\n")
    done = run("--older", other, partial, tmp_path / "out2")
    assert done.returncode == 2
    assert "has other columns" in done.stderr
    assert not (tmp_path / "out2").exists()


def test_a_file_without_a_table_is_refused(tmp_path):
    empty = tmp_path / "notes.md"
    empty.write_text("# vm-peers\n\nno table here\n")
    done = run(empty, tmp_path / "out")
    assert done.returncode == 2
    assert "peers-charts: error: no vm-peers table" in done.stderr
    assert not (tmp_path / "out").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
