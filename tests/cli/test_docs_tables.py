"""Tables in the documentation that are made from the tree and must not
drift from it: the VM scenario table of tests/vm/README.md is made from the
scenarios' own `# shows:` header lines."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIO_TABLE = ROOT / "tests/vm/scenario-table.py"


def test_scenario_table_matches_the_scenario_headers():
    result = subprocess.run([sys.executable, SCENARIO_TABLE, "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_scenario_has_a_row():
    table = subprocess.run([sys.executable, SCENARIO_TABLE], capture_output=True, text=True, check=True).stdout
    scenarios = sorted(path.stem for path in (ROOT / "tests/vm/scenarios").glob("*.sh"))
    rows = [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]
    assert rows == scenarios
    assert all(line.count("|") == 3 for line in table.splitlines()[2:]), "a summary holds a '|'"
