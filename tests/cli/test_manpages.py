"""The manual pages: built from docs/man/*.scd, rendered by man(1) without a
warning, and naming every option each tool's --help offers; --version."""
import os
import pathlib
import re
import subprocess

import pytest

from conftest import ROOT, TOOLS, run, tool_path

PAGES = {"wbdump": "wbdump.8", "wbreplay": "wbreplay.8", "wbrecover": "wbrecover.8", "wbstat": "wbstat.8", "wbctl": "wbctl.8",
         "dm-wbkit": "dm-wbkit.4", "wbkit-boot": "wbkit-boot.8"}


def page_path(build_dir: pathlib.Path, page: str) -> pathlib.Path:
    path = build_dir / "docs" / "man" / f"{page}.gz"
    assert path.exists(), f"{path} was not built"
    return path


def render(path: pathlib.Path, width: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH=str(width), MANPAGER="cat", PAGER="cat")
    # --warnings makes groff report every problem (bad requests, lines it cannot break) on stderr.
    return subprocess.run(["man", "--warnings", "-l", str(path)], capture_output=True, text=True, env=env, timeout=60)


def help_options(tool: str) -> set[str]:
    done = run([tool_path(tool), "--help"])
    assert done.returncode == 0, done.stderr
    options = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", done.stdout.split("\nOptions:", 1)[-1]))
    positionals = done.stdout.split("Positionals:", 1)[1].split("Options:", 1)[0] if "Positionals:" in done.stdout else ""
    options |= set(re.findall(r"^\s+([A-Z][A-Z_]+)\b", positionals, re.M))
    assert {"--help", "--version"} <= options, done.stdout
    return options


@pytest.mark.parametrize("page", sorted(PAGES.values()))
@pytest.mark.parametrize("width", [80, 60])
def test_page_renders_without_warnings(build_dir, page, width):
    done = render(page_path(build_dir, page), width)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    name = page.split(".")[0]
    assert re.search(rf"^NAME\s+{re.escape(name)} - ", done.stdout, re.M), done.stdout[:400]


@pytest.mark.parametrize("tool", TOOLS)
def test_page_names_every_option_of_help(build_dir, tool):
    # Wide enough that no option is hyphenated across lines.
    text = render(page_path(build_dir, PAGES[tool]), 1000).stdout
    missing = sorted(opt for opt in help_options(tool) if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text))
    assert not missing, f"{tool}'s manual page lacks {missing}"


def test_target_page_documents_table_status_messages_and_dead_state(build_dir):
    text = render(page_path(build_dir, PAGES["dm-wbkit"]), 1000).stdout
    for heading in ("TABLE LINE", "STATUS", "MESSAGES", "DEAD STATE"):
        assert re.search(rf"^{heading}$", text, re.M), heading
    # Every key the constructor and the message handler take: the table
    # options are rows of the contract header, the messages strings in kmod/.
    source = "\n".join(p.read_text() for p in (ROOT / "kmod").glob("*.c"))
    contract = (ROOT / "format" / "wbkit_contract.h").read_text()
    for key in ("writeback_threshold", "nr_max_batched_writeback", "update_sb_record_interval", "sync_data_interval",
                "read_cache_threshold", "write_around_mode", "nr_read_cache_cells"):
        assert re.search(rf"X\([A-Z_]+, {key},", contract), key
        assert key in text, key
    for key in ("drop_caches", "clear_stat"):
        assert f'"{key}"' in source, key
        assert key in text, key


@pytest.mark.parametrize("tool", TOOLS)
def test_version_names_the_project_version(build_dir, tool):
    version = (ROOT / "VERSION").read_text().strip()
    done = run([tool_path(tool), "--version"])
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    first = done.stdout.splitlines()[0]
    assert first.split()[:2] == [tool, version], first
    described = subprocess.run(["git", "-C", str(ROOT), "describe", "--tags", "--always"], capture_output=True,
                               text=True)
    if described.returncode == 0:
        # Built from this checkout: the commit is named (the build may predate a later commit, so only its form).
        assert re.fullmatch(rf"{tool} {re.escape(version)} \(git [\w.+-]+\)", first), first
