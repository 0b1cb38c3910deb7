"""The Debian packages `make deb` built (debian/, dpkg-buildpackage) in
<build>/deb: lintian --pedantic finds no error and no warning; each package
holds what it should and nothing else; the binaries are stripped (their debug
information is in the -dbgsym packages) and hardened; the tools, manual pages,
Python package and DKMS tree work unpacked into a scratch root; the maintainer
scripts byte-compile and clean the Python package, and the kernel hook of
dm-wbkit-dkms never fails a kernel's installation.

Skips when <build>/deb holds no packages: `make deb` makes them, and `make
test` does not run it (it takes ten minutes and more on two shared cores).
Installing them on a clean Debian 12 is tests/packaging/clean-root.sh (`make
test-deb-root`)."""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, TOOLS, run, build_path

VERSION = (ROOT / "VERSION").read_text().strip()
PACKAGES = ("wbkit", "python3-wbkit", "dm-wbkit-dkms")
DEBUG_PACKAGES = ("wbkit-dbgsym", "python3-wbkit-dbgsym")
SITE = "/usr/lib/python3/dist-packages"
MAINTAINER = "wbkit developers <wbkit-devel@lists.wbkit.org>"


def deb_dir() -> pathlib.Path:
    return build_path() / "deb"


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """{package name: (deb path, scratch root, file list)}, the -dbgsym ones included
    (Debian names them *-dbgsym_*.deb)."""
    if not shutil.which("dpkg-deb"):
        pytest.skip("dpkg-deb missing")
    debs = sorted(deb_dir().glob("*.deb"))
    if not debs:
        pytest.skip(f"no packages in {deb_dir()}: make deb")
    out = tmp_path_factory.mktemp("debs")
    result = {}
    for deb in debs:
        name = field(deb, "Package")
        root = out / f"root-{name}"
        assert run(["dpkg-deb", "-x", deb, root]).returncode == 0
        listing = run(["dpkg-deb", "-c", deb]).stdout.splitlines()
        # a symbolic link's line ends in "path -> target"
        files = {line.split(" -> ")[0].split()[-1].removeprefix(".") for line in listing if not line.startswith("d")}
        result[name] = (deb, root, files)
    assert set(result) == set(PACKAGES) | set(DEBUG_PACKAGES), sorted(result)
    for name, (deb, _, _) in result.items():
        assert field(deb, "Version") == VERSION, (name, "rebuild: make deb")
    return result


def field(deb, name):
    return run(["dpkg-deb", "-f", deb, name]).stdout.strip()


def control_file(deb, name):
    return run(["dpkg-deb", "-I", deb, name]).stdout


def test_lintian_pedantic_reports_no_error_and_no_warning(packages):
    if not shutil.which("lintian"):
        pytest.skip("lintian missing")
    changes = sorted(deb_dir().glob("*.changes")) + sorted(deb_dir().glob("*.dsc"))
    assert len(changes) == 2, changes
    done = run(["lintian", "--pedantic", "--display-info", "--no-tag-display-limit", *changes], timeout=600)
    bad = [line for line in done.stdout.splitlines() if line.startswith(("E:", "W:"))]
    assert done.returncode == 0 and not bad, done.stdout + done.stderr


def test_every_package_has_a_maintainer_a_copyright_and_its_own_synopsis(packages):
    synopses = set()
    for name in PACKAGES:
        deb, root, files = packages[name]
        assert field(deb, "Maintainer") == MAINTAINER, name
        assert f"/usr/share/doc/{name}/copyright" in files, name
        assert f"/usr/share/doc/{name}/changelog.gz" in files, name
        copyright = (root / f"usr/share/doc/{name}/copyright").read_text()
        assert copyright.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
        assert copyright == (ROOT / "debian" / "copyright").read_text()
        description = field(deb, "Description").splitlines()
        synopsis, long = description[0], [line.strip() for line in description[1:]]
        synopses.add(synopsis)
        assert long and long[0] != synopsis and synopsis not in long[0], (name, description)
        assert not any(f.startswith(("/usr/local", "/usr/bin/", "/home", "/root", "/build")) for f in files), name
        if name != "dm-wbkit-dkms":
            assert "dkms" not in field(deb, "Depends"), name
            assert "dkms" not in control_file(deb, "postinst") + control_file(deb, "prerm"), name
    assert len(synopses) == len(PACKAGES), synopses


def test_license_of_each_part_matches_license_file(packages):
    _, root, _ = packages["wbkit"]
    copyright = (root / "usr/share/doc/wbkit/copyright").read_text()
    stanzas = {m.group(1): m.group(2) for m in re.finditer(r"^Files: (.*?)\n(?:.*\n)*?License: (.*)$", copyright, re.M)}
    assert stanzas["*"] == "GPL-2+"
    assert stanzas["kmod/*"] == "GPL-2"
    assert stanzas["format/wbkit_format.h"] == "GPL-2 or MIT"
    assert "Copyright: " in copyright


def elf_facts(path):
    sections = run(["readelf", "-SW", path]).stdout
    dynamic = run(["readelf", "-dW", path]).stdout
    symbols = run(["readelf", "--dyn-syms", "-W", path]).stdout
    return sections, dynamic, symbols


def test_binaries_are_stripped_and_hardened_with_their_debug_info_in_dbgsym(packages):
    binaries = [packages["wbkit"][1] / "usr/sbin" / t for t in TOOLS]
    _, py_root, py_files = packages["python3-wbkit"]
    binaries += [py_root / f.lstrip("/") for f in py_files if f.endswith(".so")]
    assert len(binaries) == len(TOOLS) + 1
    for path in binaries:
        sections, dynamic, symbols = elf_facts(path)
        assert ".debug_info" not in sections and ".symtab" not in sections, f"{path} is not stripped"
        assert "GNU_DEBUGLINK" in sections.upper() or ".gnu_debuglink" in sections, path
        assert "BIND_NOW" in dynamic or re.search(r"FLAGS.*\bNOW\b", dynamic), f"{path}: no bindnow"
        assert "_chk@" in symbols, f"{path}: no fortified calls (_FORTIFY_SOURCE)"
    for tool in TOOLS:
        header = run(["readelf", "-hW", packages["wbkit"][1] / "usr/sbin" / tool]).stdout
        assert "DYN (Position-Independent Executable" in header or "DYN (Shared object" in header, tool
    for name in DEBUG_PACKAGES:
        _, _, files = packages[name]
        assert any(f.startswith("/usr/lib/debug/.build-id/") and f.endswith(".debug") for f in files), name
    # Stripped, the packages are small (unstripped they installed 45 and 38 MB).
    assert int(field(packages["wbkit"][0], "Installed-Size")) < 8 * 1024
    assert int(field(packages["python3-wbkit"][0], "Installed-Size")) < 8 * 1024


def test_tools_package_runs_from_a_scratch_root(packages):
    deb, root, files = packages["wbkit"]
    expected = {f"/usr/sbin/{t}" for t in TOOLS} | {f"/usr/share/man/man8/{t}.8.gz" for t in TOOLS} | {
        f"/usr/share/bash-completion/completions/{t}" for t in TOOLS} | {
        "/usr/share/doc/wbkit/README.md", "/usr/share/doc/wbkit/recovery.md", "/usr/share/doc/wbkit/FORMAT.md",
        "/usr/share/doc/wbkit/copyright", "/usr/share/doc/wbkit/changelog.gz",
        "/usr/share/wbkit/grafana/wbkit-dashboard.json"} | {
        f"/usr/share/doc/wbkit/schemas/{p.name}" for p in (ROOT / "docs" / "schemas").glob("*.schema.json")} | {
        f"/usr/share/doc/wbkit/docs/images/{p.name}" for p in (ROOT / "docs" / "images").glob("*.png")} | {
        "/usr/share/doc/wbkit/docs/recovery.md", "/usr/share/doc/wbkit/docs/FORMAT.md",
        "/usr/share/doc/wbkit/docs/tools.md", "/usr/share/doc/wbkit/docs/install.md",
        "/usr/share/doc/wbkit/docs/comparison.md"}
    assert expected == files, (sorted(expected - files), sorted(files - expected))
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


def test_installed_readme_links_resolve(packages):
    """The README's relative links (docs/recovery.md, its charts) reach a file
    in the installed package, as they do in the source tree."""
    _, root, _ = packages["wbkit"]
    doc = root / "usr/share/doc/wbkit"
    links = re.findall(r"\]\(([^)\s]+)\)", (doc / "README.md").read_text())
    relative = [link.split("#")[0] for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]
    assert "docs/recovery.md" in relative and any(link.startswith("docs/images/") for link in relative), relative
    missing = [link for link in relative if not (doc / link).resolve().is_file()]
    assert not missing, missing


def test_bash_completion_offers_the_options(packages):
    if not pathlib.Path("/usr/share/bash-completion/bash_completion").exists():
        pytest.skip("bash-completion not installed")
    _, root, _ = packages["wbkit"]
    script = (f". /usr/share/bash-completion/bash_completion; . {root}/usr/share/bash-completion/completions/wbreplay; "
              f"PATH={root}/usr/sbin:$PATH; COMP_WORDS=(wbreplay --ma); COMP_CWORD=1; COMP_LINE='wbreplay --ma'; "
              "COMP_POINT=${#COMP_LINE}; _wbkit_tool wbreplay --ma wbreplay; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = run(["bash", "-c", script])
    assert done.stdout.split() == ["--mark-clean"], done.stdout + done.stderr


def test_python_package_has_metadata_imports_and_is_compiled_on_install(packages):
    deb, root, files = packages["python3-wbkit"]
    py = {p.name for p in (ROOT / "python" / "wbkit").iterdir() if p.suffix in (".py", ".pyi") or p.name == "py.typed"}
    extension = [f for f in files if f.startswith(f"{SITE}/wbkit/_wbkit.") and f.endswith(".so")]
    dist_info = {f"{SITE}/wbkit-{VERSION}.dist-info/{n}" for n in ("METADATA", "RECORD", "INSTALLER", "top_level.txt")}
    docs = {"/usr/share/doc/python3-wbkit/copyright", "/usr/share/doc/python3-wbkit/changelog.gz"} | {
        f"/usr/share/doc/python3-wbkit/examples/{p.name}" for p in (ROOT / "python" / "examples").glob("*.py")}
    assert len(extension) == 1, files
    assert files == {f"{SITE}/wbkit/{n}" for n in py} | set(extension) | dist_info | docs, sorted(files)
    depends = field(deb, "Depends")
    assert re.search(r"python3 \(>= 3\.\d+~\)", depends) and "python3 (<< 3." in depends, depends
    assert "py3compile -p python3-wbkit" in control_file(deb, "postinst")
    assert "py3clean -p python3-wbkit" in control_file(deb, "prerm")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(root / SITE.lstrip("/"))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    code = ("import importlib.metadata as m, wbkit; print(m.version('wbkit'), wbkit.__version__, wbkit.__file__); "
            "print(sorted(str(f) for f in m.files('wbkit') if str(f).startswith('wbkit/'))[0])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.split() == [VERSION, VERSION, str(root / SITE.lstrip("/") / "wbkit/__init__.py")]
    assert second == "wbkit/__init__.py"


def test_dkms_package_replaces_upstream_and_holds_a_complete_tree(packages):
    deb, root, files = packages["dm-wbkit-dkms"]
    assert field(deb, "Architecture") == "all"
    for relation in ("Conflicts", "Replaces", "Provides"):
        assert field(deb, relation) == "dm-writeboost-dkms", relation
    assert "dkms" in field(deb, "Depends")
    tree = f"/usr/src/dm-wbkit-{VERSION}"
    kmod = ROOT / "kmod"
    # Not the build's own dm-wbkit.mod.c (the VM tests build the module in kmod/).
    sources = sorted(p.name for p in kmod.iterdir()
                     if (p.suffix in (".c", ".h") and not p.name.endswith(".mod.c")) or p.name in ("Kbuild", "Makefile"))
    assert len([s for s in sources if s.endswith(".c")]) >= 6, sources
    expected = {f"{tree}/{name}" for name in sources} | {
        f"{tree}/dkms.conf", f"{tree}/VERSION", f"{tree}/format/wbkit_format.h", f"{tree}/format/wbkit_contract.h",
        "/usr/share/man/man4/dm-wbkit.4.gz", "/usr/share/doc/dm-wbkit-dkms/copyright",
        "/usr/share/doc/dm-wbkit-dkms/changelog.gz",
        "/etc/kernel/postinst.d/dm-wbkit-dkms", "/etc/kernel/header_postinst.d/dm-wbkit-dkms",
        "/usr/share/initramfs-tools/hooks/dm-wbkit", "/usr/share/initramfs-tools/scripts/local-top/dm-wbkit",
        # The boot guard (packaging/boot/, wbkit-boot(8)).
        "/usr/lib/wbkit/writeboosttab.sh", "/usr/lib/wbkit/wbkit-boot",
        "/usr/lib/udev/rules.d/61-wbkit-writeboosttab.rules",
        "/usr/lib/systemd/system-generators/wbkit-writeboosttab-generator",
        "/usr/lib/systemd/system/wbkit@.service", "/usr/share/man/man8/wbkit-boot.8.gz"}
    assert files == expected, (sorted(expected - files), sorted(files - expected))
    for program in ("usr/lib/wbkit/wbkit-boot", "usr/lib/systemd/system-generators/wbkit-writeboosttab-generator"):
        assert os.access(root / program, os.X_OK), program
    for name in ("wbkit-boot", "writeboosttab.sh"):
        assert (root / "usr/lib/wbkit" / name).read_text() == (ROOT / "packaging/boot" / name).read_text(), name
    # The initramfs (root on a writeboost device): the hook and the boot script
    # are programs, and dh_installinitramfs made the package rebuild the
    # initramfs on install and removal (the update-initramfs trigger).
    for script, source in (("usr/share/initramfs-tools/hooks/dm-wbkit", "hook"),
                           ("usr/share/initramfs-tools/scripts/local-top/dm-wbkit", "local-top")):
        assert os.access(root / script, os.X_OK), script
        assert (root / script).read_text() == (ROOT / "packaging/initramfs" / source).read_text(), script
    assert "activate-noawait update-initramfs" in control_file(deb, "triggers")
    conf = (root / tree.lstrip("/") / "dkms.conf").read_text()
    assert f'PACKAGE_VERSION="{VERSION}"' in conf
    assert 'PACKAGE_NAME="dm-wbkit"' in conf
    # DKMS's own autoinstall would fail the kernel's postinst on a failed build.
    assert not re.search(r"^AUTOINSTALL=", conf, re.M), conf
    # common.postinst registers and builds the module; a failed build warns.
    postinst = control_file(deb, "postinst")
    assert f'if ! /usr/lib/dkms/common.postinst dm-wbkit "{VERSION}"' in postinst, postinst
    assert postinst.count("/usr/lib/dkms/common.postinst") == 1, "dh_dkms's own call is still there"
    assert "dkms remove" in control_file(deb, "prerm")
    conffiles = set(control_file(deb, "conffiles").split())
    assert conffiles == {"/etc/kernel/postinst.d/dm-wbkit-dkms", "/etc/kernel/header_postinst.d/dm-wbkit-dkms"}
    for hook in conffiles:
        path = root / hook.lstrip("/")
        assert os.access(path, os.X_OK), hook
        assert f"VERSION={VERSION}\n" in path.read_text(), hook


def fake_dkms(tmp_path, install_status):
    """A dkms that knows dm-wbkit as added, builds nothing and exits install_status on install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "dkms.log"
    script = bin_dir / "dkms"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {log}
case "$1" in
status) case "$*" in *" -k "*) ;; *) echo "dm-wbkit/{VERSION}: added" ;; esac ;;
install) echo "Error! Bad return status for module build" >&2; exit {install_status} ;;
esac
""")
    script.chmod(0o755)
    return bin_dir, log


@pytest.mark.parametrize("install_status", [0, 10])
def test_kernel_hook_builds_for_a_new_kernel_and_never_fails_its_installation(packages, tmp_path, install_status):
    kernels = sorted(p.parent.name for p in pathlib.Path("/lib/modules").glob("*/build") if (p / "include").exists())
    if not kernels:
        pytest.skip("no kernel headers: the hook skips kernels without them")
    _, root, _ = packages["dm-wbkit-dkms"]
    hook = root / "etc/kernel/postinst.d/dm-wbkit-dkms"
    bin_dir, log = fake_dkms(tmp_path, install_status)
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin")
    done = subprocess.run([hook, kernels[-1]], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"install -m dm-wbkit -v {VERSION} -k {kernels[-1]}" in log.read_text()
    warned = "could not be built for kernel" in done.stderr
    assert warned == (install_status != 0), done.stderr
    # Without headers the kernel is skipped, also with exit 0.
    done = subprocess.run([hook, "0.0.0-no-such-kernel"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and "no headers" in done.stderr, done.stderr


def test_dkms_tree_builds_the_module_with_the_project_version(packages, tmp_path):
    """What DKMS does on the target machine: build the tree against kernel headers."""
    kernels = sorted(pathlib.Path("/lib/modules").glob("*/build"))
    if not kernels:
        pytest.skip("no kernel headers")
    _, root, _ = packages["dm-wbkit-dkms"]
    tree = tmp_path / "dm-wbkit"
    shutil.copytree(root / f"usr/src/dm-wbkit-{VERSION}", tree)
    done = run(["nice", "-n", "15", "make", "-s", "-C", kernels[-1], f"M={tree}", "modules"], timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    info = run(["modinfo", "-F", "version", tree / "dm-wbkit.ko"]).stdout.strip()
    alias = run(["modinfo", "-F", "alias", tree / "dm-wbkit.ko"]).stdout.split()
    assert info == VERSION
    assert "dm-writeboost" in alias
