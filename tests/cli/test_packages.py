"""The Debian packages built from the tree (cpack -G DEB): unpacked into a
scratch root, their tools, manual pages, Python package and DKMS tree work
from there, and each package holds what it should and nothing else."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, TOOLS, run

VERSION = (ROOT / "VERSION").read_text().strip()


@pytest.fixture(scope="module")
def packages(tmp_path_factory, build_dir):
    """Builds the packages once; returns {package name: (deb path, scratch root, file list)}."""
    if not shutil.which("dpkg-deb") or not shutil.which("cpack"):
        pytest.skip("dpkg-deb or cpack missing")
    out = tmp_path_factory.mktemp("debs")
    done = run(["cpack", "-G", "DEB", "--config", build_dir / "CPackConfig.cmake", "-B", out], timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    result = {}
    for deb in sorted(out.glob("*.deb")):
        name = run(["dpkg-deb", "-f", deb, "Package"]).stdout.strip()
        root = out / f"root-{name}"
        assert run(["dpkg-deb", "-x", deb, root]).returncode == 0
        listing = run(["dpkg-deb", "-c", deb]).stdout.splitlines()
        files = {line.split()[-1].removeprefix(".") for line in listing if not line.startswith("d")}
        result[name] = (deb, root, files)
    assert set(result) == {"wbkit", "python3-wbkit", "dm-wbkit-dkms"}, sorted(result)
    return result


def field(deb, name):
    return run(["dpkg-deb", "-f", deb, name]).stdout.strip()


def test_every_package_has_the_project_version_and_a_copyright(packages):
    for name, (deb, _, files) in packages.items():
        assert field(deb, "Version") == VERSION, name
        assert f"/usr/share/doc/{name}/copyright" in files, name
        assert not any(f.startswith(("/usr/local", "/usr/bin/", "/home", "/root")) for f in files), (name, files)


def test_tools_package_runs_from_a_scratch_root(packages):
    deb, root, files = packages["wbkit"]
    expected = {f"/usr/sbin/{t}" for t in TOOLS} | {f"/usr/share/man/man8/{t}.8.gz" for t in TOOLS} | {
        f"/usr/share/bash-completion/completions/{t}" for t in TOOLS} | {
        "/usr/share/doc/wbkit/README.md", "/usr/share/doc/wbkit/recovery.md", "/usr/share/doc/wbkit/FORMAT.md",
        "/usr/share/doc/wbkit/copyright"} | {
        f"/usr/share/doc/wbkit/schemas/{p.name}" for p in (ROOT / "docs" / "schemas").glob("*.schema.json")}
    assert expected <= files, sorted(expected - files)
    allowed = ("/usr/sbin/", "/usr/share/man/man8/", "/usr/share/bash-completion/completions/", "/usr/share/doc/wbkit/")
    assert all(f.startswith(allowed) for f in files), sorted(f for f in files if not f.startswith(allowed))
    depends = field(deb, "Depends")
    assert "libc6" in depends and "libstdc++6" in depends, depends
    for tool in TOOLS:
        done = run([root / "usr/sbin" / tool, "--version"])
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[:2] == [tool, VERSION]
        env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")
        shown = subprocess.run(["man", "--warnings", "-l", str(root / f"usr/share/man/man8/{tool}.8.gz")],
                               capture_output=True, text=True, env=env, timeout=60)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
        assert f"{tool} - " in shown.stdout


def test_bash_completion_offers_the_options(packages):
    if not pathlib.Path("/usr/share/bash-completion/bash_completion").exists():
        pytest.skip("bash-completion not installed")
    _, root, _ = packages["wbkit"]
    script = (f". /usr/share/bash-completion/bash_completion; . {root}/usr/share/bash-completion/completions/wbreplay; "
              f"PATH={root}/usr/sbin:$PATH; COMP_WORDS=(wbreplay --ma); COMP_CWORD=1; COMP_LINE='wbreplay --ma'; "
              "COMP_POINT=${#COMP_LINE}; _wbkit_tool wbreplay --ma wbreplay; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = run(["bash", "-c", script])
    assert done.stdout.split() == ["--mark-clean"], done.stdout + done.stderr


def test_python_package_has_metadata_and_imports_from_a_scratch_root(packages):
    deb, root, files = packages["python3-wbkit"]
    site = "/usr/lib/python3/dist-packages"
    assert f"{site}/wbkit/__init__.py" in files
    assert any(f.startswith(f"{site}/wbkit/_wbkit.") and f.endswith(".so") for f in files)
    assert f"{site}/wbkit-{VERSION}.dist-info/METADATA" in files
    assert f"{site}/wbkit-{VERSION}.dist-info/RECORD" in files
    assert "python3 (>= 3." in field(deb, "Depends")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root / site.lstrip("/"))
    code = ("import importlib.metadata as m, wbkit; print(m.version('wbkit'), wbkit.__version__, wbkit.__file__); "
            "print(sorted(str(f) for f in m.files('wbkit') if str(f).startswith('wbkit/'))[0])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.split() == [VERSION, VERSION, str(root / site.lstrip("/") / "wbkit/__init__.py")]
    assert second == "wbkit/__init__.py"


def test_dkms_package_conflicts_with_upstream_and_holds_a_complete_tree(packages):
    deb, root, files = packages["dm-wbkit-dkms"]
    assert field(deb, "Architecture") == "all"
    assert "dm-writeboost-dkms" in field(deb, "Conflicts")
    assert "dm-writeboost-dkms" in field(deb, "Provides")
    assert "dkms" in field(deb, "Depends")
    tree = f"/usr/src/dm-wbkit-{VERSION}"
    for name in ("dkms.conf", "Kbuild", "Makefile", "VERSION", "format/wbkit_format.h", "dm-wbkit-target.c"):
        assert f"{tree}/{name}" in files, name
    assert "/usr/share/man/man4/dm-wbkit.4.gz" in files
    conf = (root / tree.lstrip("/") / "dkms.conf").read_text()
    assert f'PACKAGE_VERSION="{VERSION}"' in conf
    assert 'PACKAGE_NAME="dm-wbkit"' in conf
    control = run(["dpkg-deb", "-I", deb, "postinst"]).stdout
    assert f"VERSION={VERSION}" in control and "common.postinst" in control


def test_dkms_tree_builds_the_module_with_the_project_version(packages, tmp_path):
    """What DKMS does on the target machine: build the tree against kernel headers."""
    kernels = sorted(pathlib.Path("/lib/modules").glob("*/build"))
    if not kernels:
        pytest.skip("no kernel headers")
    _, root, _ = packages["dm-wbkit-dkms"]
    tree = tmp_path / "dm-wbkit"
    shutil.copytree(root / f"usr/src/dm-wbkit-{VERSION}", tree)
    done = run(["make", "-s", "-C", kernels[-1], f"M={tree}", "modules"], timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    info = run(["modinfo", "-F", "version", tree / "dm-wbkit.ko"]).stdout.strip()
    alias = run(["modinfo", "-F", "alias", tree / "dm-wbkit.ko"]).stdout.split()
    assert info == VERSION
    assert "dm-writeboost" in alias
