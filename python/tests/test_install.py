"""cmake --install puts a package that Debian's python3 imports."""

import os
import pathlib
import subprocess
import sys
import sysconfig

from conftest import build_dir


def test_cmake_install_gives_an_importable_package(tmp_path):
    prefix = tmp_path / "prefix"
    done = subprocess.run(["cmake", "--install", str(build_dir()), "--component", "python", "--prefix", str(prefix)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = prefix / "lib" / version / "dist-packages"
    installed = {p.name for p in (site / "wbkit").iterdir()}
    assert {"__init__.py", "testing.py", "_wbkit.pyi", "testing.pyi", "py.typed"} <= installed
    assert any(n.startswith("_wbkit.") and n.endswith(".so") for n in installed)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    check = subprocess.run([sys.executable, "-c", "import wbkit, wbkit.testing; print(wbkit.__file__); "
                            "print(hex(wbkit.crc32c(b'123456789')))"], capture_output=True, text=True, env=env,
                           cwd="/", timeout=60)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == [str(site / "wbkit" / "__init__.py"), "0xe3069283"]


def test_default_install_dir_is_on_debians_path(tmp_path):
    """Installed with the configured prefix (/usr/local by default), the package lands in a folder this
    python3 searches, with metadata importlib.metadata reads."""
    cache = (build_dir() / "CMakeCache.txt").read_text()
    prefix = next(l.split("=", 1)[1] for l in cache.splitlines() if l.startswith("CMAKE_INSTALL_PREFIX:"))
    stage = tmp_path / "stage"
    done = subprocess.run(["cmake", "--install", str(build_dir()), "--component", "python"], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, DESTDIR=str(stage)))
    assert done.returncode == 0, done.stderr
    inits = list(stage.glob("**/wbkit/__init__.py"))
    assert len(inits) == 1, inits
    target = "/" + str(inits[0].parent.parent.relative_to(stage))
    assert target.startswith(prefix), (target, prefix)
    assert target in sys.path or target == sysconfig.get_paths()["purelib"], (target, sys.path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(inits[0].parent.parent)
    check = subprocess.run([sys.executable, "-c", "import importlib.metadata as m, wbkit; "
                            "print(m.version('wbkit') == wbkit.__version__, wbkit.__version__)"],
                           capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split()[0] == "True", check.stdout
