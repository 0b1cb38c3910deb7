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


def test_default_install_dir_is_on_debians_path():
    """With the default prefix /usr/local the package lands in a folder this python3 searches."""
    cache = (build_dir() / "CMakeCache.txt").read_text()
    prefix = next(l.split("=", 1)[1] for l in cache.splitlines() if l.startswith("CMAKE_INSTALL_PREFIX:"))
    subdir = next(l.split("=", 1)[1] for l in cache.splitlines() if l.startswith("WBKIT_PYTHON_INSTALL_DIR:"))
    target = pathlib.Path(prefix) / subdir
    assert str(target) in sys.path or str(target) == sysconfig.get_paths()["purelib"], (target, sys.path)
