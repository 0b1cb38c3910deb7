"""The one reader of /etc/writeboosttab (packaging/boot/writeboosttab.sh) and
wbkit-boot, which the udev rule and the systemd units call.

The initramfs boot script and hook source the same file, so the cases here
are theirs too; test_the_initramfs_parts_have_no_reader_of_their_own makes
sure they keep no copy. Every case of the file is also read by the loop of
Debian's writeboost package's /sbin/writeboost (quoted below): both must
find the same devices.
"""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BOOT = ROOT / "packaging" / "boot"
LIB = BOOT / "writeboosttab.sh"
HELPER = BOOT / "wbkit-boot"
UUID = "6b1f2c1e-7a55-4c3e-9d0b-77a1ce0f0a27"

TAB = f"""## name    backing (HDD)    cache (SSD)    options
# a comment
   # an indented comment
wbdata  UUID={UUID}  /dev/disk/by-id/virtio-wbcache  writeback_threshold=60,sync_data_interval=3600
wbtab\tLABEL=data\tPARTUUID=43372b68-01\t

/dev/mapper/x /dev/sda /dev/sdb
short /dev/sda
#off /dev/sdc /dev/sdd
name#x /dev/sde /dev/sdf
wbpart PARTLABEL=slow /dev/vdz nr_max_batched_writeback=4
"""

# The loop of /sbin/writeboost (writeboost 1.20170616-1.2), reduced to what
# it decides: which lines are devices, and their three device fields.
DEBIAN_LOOP = r"""
while read -r M H S O; do
    [ -z "${M%%#*}" ] && continue           ## skip comments.
    [ -z "${M%%/*}" ] && continue           ## skip invalid map names.
    [ -z "$M" ] && continue
    [ -z "$H" ] && continue
    [ -z "$S" ] && continue
    echo "$M $H $S"
done < "$1"
"""

EXPECTED = [
    ["wbdata", f"UUID={UUID}", "/dev/disk/by-id/virtio-wbcache", "writeback_threshold=60,sync_data_interval=3600"],
    ["wbtab", "LABEL=data", "PARTUUID=43372b68-01", ""],
    ["name#x", "/dev/sde", "/dev/sdf", ""],
    ["wbpart", "PARTLABEL=slow", "/dev/vdz", "nr_max_batched_writeback=4"],
]


@pytest.fixture
def tab(tmp_path):
    path = tmp_path / "writeboosttab"
    path.write_text(TAB)
    return path


def lib(tab, script, env=None):
    """Runs <script> under dash with writeboosttab.sh sourced, on <tab>."""
    full = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "WBTAB": str(tab), **(env or {})}
    done = subprocess.run(["dash", "-c", f". {LIB}; {script}"], capture_output=True, text=True, env=full,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def helper(tab, *args, env=None, tmp_path=None):
    full = {"WBTAB": str(tab), "WBKIT_LIBDIR": str(BOOT), **(env or {})}
    return subprocess.run(["dash", str(HELPER), *args], capture_output=True, text=True, env=full, timeout=60)


def test_entries(tab):
    out = lib(tab, "wbtab_entries")
    rows = [line.split(" ") for line in out.splitlines()]
    assert [r + [""] * (4 - len(r)) if len(r) < 4 else r for r in rows] == EXPECTED
    assert lib(tab, "wbtab_names") == "wbdata wbtab name#x wbpart"
    assert lib(tab, "wbtab_entry wbpart") == "wbpart PARTLABEL=slow /dev/vdz nr_max_batched_writeback=4\n"
    assert lib(tab, "wbtab_entry short || echo none") == "none\n"


def test_entries_are_the_devices_debians_writeboost_maps(tab):
    debian = subprocess.run(["dash", "-c", DEBIAN_LOOP, "loop", str(tab)], capture_output=True, text=True,
                            check=True).stdout
    ours = "".join(" ".join(line.split(" ")[:3]) + "\n" for line in lib(tab, "wbtab_entries").splitlines())
    assert ours == debian


def test_missing_or_empty_file(tmp_path):
    assert lib(tmp_path / "none", "wbtab_entries; wbtab_names") == ""
    (tmp_path / "empty").write_text("# nothing\n")
    assert lib(tmp_path / "empty", "wbtab_names") == ""


def udev(tab, links="", **env):
    return lib(tab, f"wbtab_udev {links}", env)


@pytest.mark.parametrize("env,links,expected", [
    # The backing device by its file system's UUID; the writeboost device on
    # top has the same UUID and is not its own backing device.
    ({"DEVNAME": "/dev/vdb", "ID_FS_UUID": UUID}, "", "WBKIT_BACKING_OF=wbdata"),
    ({"DEVNAME": "/dev/dm-0", "DM_NAME": "wbdata", "ID_FS_UUID": UUID}, "", ""),
    # Another device-mapper device with that UUID (an LV as backing device).
    ({"DEVNAME": "/dev/dm-1", "DM_NAME": "vg-slow", "ID_FS_UUID": UUID}, "", "WBKIT_BACKING_OF=wbdata"),
    # The cache by a link udev made in this event ($links, relative to /dev).
    ({"DEVNAME": "/dev/vdc"}, "disk/by-path/virtio-pci-0000:00:05.0 disk/by-id/virtio-wbcache",
     "WBKIT_CACHE_OF=wbdata"),
    ({"DEVNAME": "/dev/vdc"}, "disk/by-id/virtio-other", ""),
    ({"DEVNAME": "/dev/sdx1", "ID_FS_LABEL": "data"}, "", "WBKIT_BACKING_OF=wbtab"),
    ({"DEVNAME": "/dev/sdy1", "ID_PART_ENTRY_UUID": "43372b68-01"}, "", "WBKIT_CACHE_OF=wbtab"),
    ({"DEVNAME": "/dev/sdz3", "ID_PART_ENTRY_NAME": "slow"}, "", "WBKIT_BACKING_OF=wbpart"),
    ({"DEVNAME": "/dev/sde"}, "", "WBKIT_BACKING_OF=name#x"),
    ({"DEVNAME": "/dev/sdf"}, "", "WBKIT_CACHE_OF=name#x"),
    # Devices of lines that are not entries.
    ({"DEVNAME": "/dev/sdc"}, "", ""),
    ({"DEVNAME": "/dev/sda"}, "", ""),
    ({"DEVNAME": "/dev/sdq", "ID_FS_UUID": "0000", "ID_FS_LABEL": "other"}, "", ""),
    # A label or UUID is not a path.
    ({"DEVNAME": "/dev/sdx1", "ID_FS_LABEL": "UUID=" + UUID}, "", ""),
])
def test_udev_match(tab, env, links, expected):
    assert udev(tab, links, **env).strip() == expected


def test_udev_match_through_an_existing_link(tmp_path):
    # A name outside /dev/disk, made by an earlier event: resolved.
    link = tmp_path / "slow-disk"
    link.symlink_to("/dev/null")
    tab = tmp_path / "tab"
    tab.write_text(f"wbl {link} /dev/vdz\n")
    assert udev(tab, DEVNAME="/dev/null").strip() == "WBKIT_BACKING_OF=wbl"
    assert udev(tab, DEVNAME="/dev/zero").strip() == ""


def test_generate(tab, tmp_path):
    out = tmp_path / "gen"
    out.mkdir()
    done = helper(tab, "generate", str(out), str(tmp_path), str(tmp_path))
    assert done.returncode == 0, done.stderr
    wants = out / "local-fs.target.wants"
    assert sorted(p.name for p in wants.iterdir()) == sorted(
        ["wbkit@wbdata.service", "wbkit@wbtab.service", r"wbkit@name\x23x.service", "wbkit@wbpart.service"])
    assert all(os.readlink(p) == "/usr/lib/systemd/system/wbkit@.service" for p in wants.iterdir())


def test_the_generator_does_nothing_without_a_file(tmp_path):
    done = subprocess.run(["dash", str(BOOT / "wbkit-writeboosttab-generator"), str(tmp_path)], capture_output=True,
                          text=True, timeout=30)
    # /etc/writeboosttab of the machine the test runs on decides; either way
    # nothing fails.
    assert done.returncode == 0, done.stderr


def fakes(tmp_path, mapped=False):
    """dmsetup, udevadm and modprobe stand-ins; dmsetup logs its calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "dmsetup.log"
    (bin_dir / "dmsetup").write_text(f"""#!/bin/sh
echo "$*" >>{log}
case $1 in
targets) echo "writeboost       v0.1.0" ;;
info) exit {0 if mapped else 1} ;;
esac
exit 0
""")
    (bin_dir / "udevadm").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "modprobe").write_text("#!/bin/sh\nexit 0\n")
    for p in bin_dir.iterdir():
        p.chmod(0o755)
    return bin_dir, log


def cmdline(tmp_path, text):
    path = tmp_path / "cmdline"
    path.write_text(text + "\n")
    return str(path)


def test_activate_gives_up_on_a_missing_cache_device_with_a_reason(tmp_path):
    bin_dir, log = fakes(tmp_path)
    tab = tmp_path / "tab"
    tab.write_text("wbdata /dev/null /dev/wbkit-no-such-cache\n")
    done = helper(tab, "activate", "wbdata", env={
        "WBKIT_TEST_PATH": str(bin_dir), "WBKIT_CMDLINE": cmdline(tmp_path, "quiet writeboost.wait=1")})
    assert done.returncode == 1
    # /dev/null is no block device: the backing device is the one missing.
    assert "writeboost: waiting up to 1s for wbdata: backing device /dev/null not found" in done.stdout
    assert ("writeboost: error: gave up on wbdata after 1s: backing device /dev/null not found. "
            "Its backing device /dev/null stays unmounted") in done.stdout
    assert "create" not in log.read_text()


def test_activate_leaves_an_existing_device(tmp_path):
    bin_dir, log = fakes(tmp_path, mapped=True)
    tab = tmp_path / "tab"
    tab.write_text("wbdata /dev/null /dev/wbkit-no-such-cache\n")
    done = helper(tab, "activate", "wbdata", env={"WBKIT_TEST_PATH": str(bin_dir)})
    assert done.returncode == 0, done.stdout
    assert "writeboost: wbdata exists already" in done.stdout
    assert "create" not in log.read_text()


def test_activate_of_a_name_not_in_the_file(tab, tmp_path):
    bin_dir, _ = fakes(tmp_path)
    done = helper(tab, "activate", "short", env={"WBKIT_TEST_PATH": str(bin_dir)})
    assert done.returncode == 1
    assert f"writeboost: error: short is not an entry of {tab}" in done.stdout


@pytest.mark.parametrize("line,seconds", [
    ("quiet", 30), ("rootdelay=10", 30), ("rootdelay=90", 90), ("rootdelay=90 writeboost.wait=5", 5),
    ("writeboost.wait=0", 0), ("writeboost.wait=x", 30), ("rootdelay=x", 30)])
def test_wait_bound(tab, tmp_path, line, seconds):
    done = helper(tab, "wait-seconds", env={"WBKIT_CMDLINE": cmdline(tmp_path, line)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{seconds}\n"


def test_usage(tab):
    assert helper(tab).returncode == 2
    assert helper(tab, "bogus").returncode == 2
    assert helper(tab, "activate").returncode == 2


def test_the_initramfs_parts_have_no_reader_of_their_own():
    for part in ("hook", "local-top"):
        text = (ROOT / "packaging" / "initramfs" / part).read_text()
        assert "NF >= 3" not in text, part
        assert "/usr/lib/wbkit/writeboosttab.sh" in text, part
    local_top = (ROOT / "packaging" / "initramfs" / "local-top").read_text()
    for function in ("wbtab_entries", "wbtab_create", "wbtab_resolve", "wbtab_mapped"):
        assert function in local_top, function
