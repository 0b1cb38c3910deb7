#!/usr/bin/python3
"""The scenario table of tests/vm/README.md, made from the scenarios' own
`# shows:` header lines, so that the table cannot drift from the files.

    scenario-table.py          print the table
    scenario-table.py --write  put it into the README between its markers
    scenario-table.py --check  exit 1 when the README's table differs
"""
import pathlib
import re
import sys

VM_DIR = pathlib.Path(__file__).resolve().parent
README = VM_DIR / "README.md"
BEGIN = "<!-- scenario table: made by scenario-table.py from each scenario's `# shows:` lines -->"
END = "<!-- end of scenario table -->"


def summary(path):
    """The text of a scenario's `# shows:` line and its `#   ` continuations."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# shows: "):
            words = [line[len("# shows: "):]]
            for more in lines[i + 1:]:
                if not more.startswith("#   "):
                    break
                words.append(more[len("#   "):])
            return " ".join(words)
    raise SystemExit(f"{path}: no '# shows:' header line")


def table():
    rows = ["| scenario | what it shows |", "|---|---|"]
    for path in sorted(VM_DIR.glob("scenarios/*.sh")):
        rows.append(f"| `{path.stem}` | {summary(path)} |")
    return "\n".join(rows) + "\n"


def readme_with(text):
    readme = README.read_text()
    match = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), readme, re.S)
    if not match:
        raise SystemExit(f"{README}: the markers of the scenario table are missing")
    return readme[:match.start(1)] + text + readme[match.end(1):]


def main(argv):
    if argv == ["--write"]:
        README.write_text(readme_with(table()))
    elif argv == ["--check"]:
        if readme_with(table()) != README.read_text():
            print(f"{README}: the scenario table differs from the scenarios' headers; "
                  "run tests/vm/scenario-table.py --write", file=sys.stderr)
            return 1
    elif not argv:
        sys.stdout.write(table())
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
