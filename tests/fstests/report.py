#!/usr/bin/python3
"""The statuses of an fstests run (tests/fstests/run.sh).

  report.py config NAME DIR VM_RC TEST...
      one TSV line per test: test, config, status, seconds, detail.
      DIR holds results/ (fstests' RESULT_BASE, with result.xml) when the
      guest got that far, and console.log. A test with no result in
      result.xml takes its status from fstests' own console line; one that
      was started ("run fstests <test> at" in the kernel log) and has
      neither is a hang when the boot ran out of time (VM_RC 124) and a
      crash otherwise; one never started is missing.
  report.py table TSV CONFIG...
      a markdown table, one row per test, one column per config:
      status and seconds; the details (notrun reasons, failures) below it.
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def one_line(text, limit=200):
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def from_xml(path):
    got = {}
    if not path.is_file():
        return got
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        # A run cut short may leave it half written: read the testcases alone.
        text = path.read_text(errors="replace")
        for m in re.finditer(r'<testcase [^>]*name="([^"]+)" time="(\d+)"\s*>(.*?)</testcase>', text, re.S):
            body = m.group(3)
            if "<failure" in body:
                msg = re.search(r'<failure message="([^"]*)"', body)
                got[m.group(1)] = ("fail", int(m.group(2)), msg.group(1) if msg else "")
            elif "<skipped" in body:
                msg = re.search(r'<skipped message="([^"]*)"', body)
                got[m.group(1)] = ("notrun", int(m.group(2)), msg.group(1) if msg else "")
            else:
                got[m.group(1)] = ("pass", int(m.group(2)), "")
        return got
    for tc in root.iter("testcase"):
        name = tc.get("name")
        secs = int(float(tc.get("time") or 0))
        failure = tc.find("failure")
        skipped = tc.find("skipped")
        if failure is not None:
            got[name] = ("fail", secs, failure.get("message", ""))
        elif skipped is not None:
            got[name] = ("notrun", secs, skipped.get("message", ""))
        else:
            got[name] = ("pass", secs, "")
    return got


def from_console(path, tests):
    """fstests' own lines (prefixed 'fstests: ' by the guest) and the kernel
    log's 'run fstests <test> at' markers."""
    lines, started = {}, []
    if not path.is_file():
        return lines, started
    want = set(tests)
    for raw in path.read_text(errors="replace").splitlines():
        line = ANSI.sub("", raw.replace("\r", ""))
        m = re.search(r"run fstests (\S+) at ", line)
        if m and not line.startswith("dmesg: "):
            started.append(m.group(1))
            continue
        m = re.match(r"fstests: (\S+/\d+)\s+(.*)$", line)
        if m and m.group(1) in want:
            lines[m.group(1)] = m.group(2)
    return lines, started


def console_status(rest):
    rest = rest.strip()
    m = re.match(r"^(?:\d+s \.\.\.\s*)?(\d+)s$", rest)
    if m:
        return "pass", int(m.group(1)), ""
    if "[not run]" in rest:
        return "notrun", 0, rest.split("[not run]", 1)[1].strip()
    if "[expunged]" in rest:
        return "notrun", 0, "expunged"
    return "fail", 0, rest


def config_report(name, d, vm_rc, tests):
    d = Path(d)
    xml = from_xml(d / "results" / "result.xml")
    lines, started = from_console(d / "console.log", tests)
    for t in tests:
        if t in xml:
            status, secs, detail = xml[t]
        elif t in lines:
            status, secs, detail = console_status(lines[t])
        elif t in started:
            status, secs = ("hang" if vm_rc == "124" else "crash"), 0
            detail = f"started, no result; the boot ended with {vm_rc} (console.log)"
        else:
            status, secs, detail = "missing", 0, f"not started; the boot ended with {vm_rc}"
        print("\t".join([t, name, status, str(secs), one_line(detail)]))


def table(tsv, configs):
    rows = {}
    order = []
    for line in Path(tsv).read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 5:
            continue
        t, c, status, secs, detail = parts[:5]
        if t not in rows:
            rows[t] = {}
            order.append(t)
        rows[t][c] = (status, secs, detail)
    print("| test | " + " | ".join(configs) + " |")
    print("|---|" + "---|" * len(configs))
    for t in order:
        cells = []
        for c in configs:
            if c in rows[t]:
                status, secs, _ = rows[t][c]
                cells.append(f"{status} {secs} s" if status in ("pass", "fail") else status)
            else:
                cells.append("")
        print(f"| {t} | " + " | ".join(cells) + " |")
    counts = []
    for c in configs:
        n = {}
        for t in order:
            if c in rows[t]:
                n[rows[t][c][0]] = n.get(rows[t][c][0], 0) + 1
        counts.append(", ".join(f"{v} {k}" for k, v in sorted(n.items())))
    print("| **count** | " + " | ".join(counts) + " |")
    print()
    for t in order:
        for c in configs:
            if c in rows[t] and rows[t][c][0] != "pass" and rows[t][c][2]:
                print(f"- {t} on {c}: {rows[t][c][0]}: {rows[t][c][2]}")


def main(argv):
    if len(argv) >= 5 and argv[1] == "config":
        config_report(argv[2], argv[3], argv[4], argv[5:])
    elif len(argv) >= 3 and argv[1] == "table":
        table(argv[2], argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
