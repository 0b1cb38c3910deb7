"""wbctl from the outside, without a kernel: a stand-in dmsetup that keeps a
device's live and inactive table, its suspension and its dirty blocks in
files, so that the real process handling (dmsetup in its own process group,
drop_caches in the background, stopped on Ctrl-C or --timeout) and the exit
codes are tested; the steps themselves are unit-tested (test_control.cpp)
and run on both kernels in VM scenarios 95 and 96."""
import json
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import textwrap
import time

import jsonschema
import pytest

import craft
from conftest import ROOT, DAMAGE, OK, OPERATIONAL, REFUSED, USAGE, cannot_run, run, sha256, tool_path

FAKE = textwrap.dedent("""\
    #!/usr/bin/python3
    import os, pathlib, sys, time
    d = pathlib.Path(os.environ["FAKE_DMSETUP"])
    args = sys.argv[1:]
    with open(d / "calls", "a") as log:
        log.write(" ".join(args) + "\\n")
    def read(name, default=""):
        p = d / name
        return p.read_text() if p.exists() else default
    def fail_if(name):
        if (d / ("fail." + name)).exists():
            sys.stderr.write(f"device-mapper: {name} ioctl failed: Invalid argument\\nCommand failed.\\n")
            sys.exit(1)
    cmd = args[0]
    fail_if(cmd)
    if cmd == "table":
        sys.stdout.write(read("live"))
    elif cmd == "status":
        live = read("live").split()
        if live[2] != "writeboost":
            sys.stdout.write(" ".join(live[:3]) + "\\n")
        else:
            dirty = int(read("dirty", "0"))
            wb = int(read("wb_id", "2"))
            # The tunables run as the table gave them (0 when absent).
            opts = dict(zip(live[6::2], live[7::2]))
            t = lambda key: opts.get(key, "0")
            sys.stdout.write(f"0 {live[1]} writeboost 7 32512 256 10 9 {wb} {dirty}" + " 0" * 16 +
                             f" 3 10 writeback_threshold {t('writeback_threshold')} nr_cur_batched_writeback 0"
                             f" sync_data_interval {t('sync_data_interval')}"
                             f" update_sb_record_interval {t('update_sb_record_interval')}"
                             f" read_cache_threshold {t('read_cache_threshold')}\\n")
    elif cmd == "suspend":
        (d / "suspended").write_text("1")
    elif cmd == "resume":
        if (d / "inactive").exists():
            (d / "live").write_text((d / "inactive").read_text() + "\\n")
            (d / "inactive").unlink()
        (d / "suspended").unlink(missing_ok=True)
    elif cmd == "load":
        (d / "inactive").write_text(args[args.index("--table") + 1])
    elif cmd == "info":
        sys.exit(0 if (d / "live").exists() else 1)
    elif cmd == "create":
        (d / "live").write_text(args[args.index("--table") + 1] + "\\n")
    elif cmd == "remove":
        (d / "live").unlink(missing_ok=True)
    elif cmd == "clear":
        (d / "inactive").unlink(missing_ok=True)
    elif cmd == "message" and args[3:] == ["drop_caches"]:
        if (d / "hang").exists():
            (d / "message.pid").write_text(str(os.getpid()))
            while True:
                time.sleep(0.1)
        (d / "dirty").write_text("0")
        (d / "wb_id").write_text("10")
    else:
        sys.stderr.write("fake dmsetup: unknown: " + " ".join(args) + "\\n")
        sys.exit(9)
    """)

# Device numbers no machine has (major 4094 is past every allocation), so
# that nothing here can ever name a real disk: detach wipes its cache.
WB_TABLE = "0 2097152 writeboost 4094:0 4094:16\n"


@pytest.fixture
def fake(tmp_path):
    d = tmp_path / "dm"
    d.mkdir()
    program = tmp_path / "dmsetup"
    program.write_text(FAKE)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)

    class Fake:
        dir = d
        env = dict(os.environ, FAKE_DMSETUP=str(d))

        def put(self, name, text):
            (d / name).write_text(text)

        def get(self, name):
            p = d / name
            return p.read_text() if p.exists() else None

        def calls(self):
            return self.get("calls").splitlines() if self.get("calls") else []

        def argv(self, *args):
            return [tool_path("wbctl"), "--dmsetup", program, *args]

        def run(self, *args):
            return run(self.argv(*args), env=self.env)

    f = Fake()
    f.put("live", WB_TABLE)
    f.put("dirty", "500")
    return f


def test_detach_switches_to_linear_and_prints_the_stall(fake):
    done = fake.run("detach", "wb", "--keep-cache", "-q")
    assert done.returncode == OK, done.stderr
    assert fake.get("live") == "0 2097152 linear 4094:0 0\n"
    assert fake.get("suspended") is None and fake.get("inactive") is None
    assert "I/O held" in done.stdout
    assert "suspend --nolockfs wb" in fake.calls()
    assert "message wb 0 drop_caches" in fake.calls()


def validate(doc):
    schemas = {}
    for path in (ROOT / "docs" / "schemas").glob("*.schema.json"):
        schema = json.loads(path.read_text())
        schemas[schema["$id"]] = schema
    schema = schemas["https://wbkit.invalid/schemas/wbctl-1.schema.json"]
    jsonschema.Draft202012Validator.check_schema(schema)
    resolver = jsonschema.RefResolver.from_schema(schema, store=schemas)
    jsonschema.Draft202012Validator(schema, resolver=resolver).validate(doc)


def test_detach_json(fake):
    done = fake.run("detach", "wb", "--keep-cache", "-q", "--json")
    assert done.returncode == OK, done.stderr
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["schema"] == "wbctl/1" and doc["command"] == "detach"
    assert doc["new_table"] == "0 2097152 linear 4094:0 0"
    assert doc["flush"]["end"] == "done" and doc["flush"]["start_dirty_blocks"] == 500
    assert doc["cache_wiped"] is False  # --keep-cache


def test_detach_that_cannot_wipe_the_cache_says_so(fake):
    # 4094:16 is no device: switched, but the old log stays (exit 1).
    done = fake.run("detach", "wb", "-q")
    assert done.returncode == DAMAGE, done.stderr
    assert fake.get("live") == "0 2097152 linear 4094:0 0\n"
    assert "could not be wiped" in done.stderr


@pytest.mark.parametrize("step", ["load", "suspend"])
def test_detach_failure_leaves_the_device_as_it_was(fake, step):
    fake.put("fail." + step, "")
    done = fake.run("detach", "wb", "-q")
    assert done.returncode == OPERATIONAL
    assert done.stderr.startswith("wbctl: error: ")
    assert fake.get("live") == WB_TABLE
    assert fake.get("suspended") is None and fake.get("inactive") is None


def test_flush_timeout_stops_the_message(fake):
    fake.put("hang", "")
    start = time.monotonic()
    done = fake.run("flush", "wb", "--timeout", "1", "-q")
    assert done.returncode == DAMAGE, done.stderr
    assert time.monotonic() - start < 10
    assert "--timeout" in done.stderr
    pid = int(fake.get("message.pid"))
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert fake.get("live") == WB_TABLE and fake.get("suspended") is None


def test_ctrl_c_stops_the_flush_and_nothing_else(fake):
    fake.put("hang", "")
    proc = subprocess.Popen([str(a) for a in fake.argv("flush", "wb", "-q")], env=fake.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(100):
        if fake.get("message.pid"):
            break
        time.sleep(0.1)
    assert fake.get("message.pid"), "the message never started"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == DAMAGE, err
    assert "interrupted" in err
    with pytest.raises(ProcessLookupError):
        os.kill(int(fake.get("message.pid")), 0)
    assert not any(c.startswith(("suspend", "load", "resume")) for c in fake.calls())


def test_flush_of_a_clean_device_sends_no_message(fake):
    fake.put("dirty", "0")
    done = fake.run("flush", "wb", "-q")
    assert done.returncode == OK, done.stderr
    assert not any("drop_caches" in c for c in fake.calls())


def test_flush_json(fake):
    done = fake.run("flush", "wb", "-q", "--json")
    assert done.returncode == OK, done.stderr
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["flush"]["end"] == "done" and doc["flush"]["dirty_blocks_left"] == 0


def test_attach_refuses_a_writeboost_device(fake):
    done = fake.run("attach", "wb", "--cache", "/dev/null")
    assert done.returncode == OPERATIONAL
    assert "already has a writeboost target" in done.stderr
    assert fake.get("inactive") is None


def some_block_device():
    """A block device of this machine, as major:minor and its size in sectors."""
    for entry in sorted(pathlib.Path("/sys/dev/block").glob("*")):
        size = entry / "size"
        if size.exists() and int(size.read_text()) > 0:
            return entry.name, int(size.read_text())
    pytest.skip("no block device in /sys/dev/block")


def test_attach_refuses_a_cache_that_is_no_block_device(fake, tmp_path):
    devno, sectors = some_block_device()
    fake.put("live", f"0 {sectors} linear {devno} 0\n")
    cache = tmp_path / "cache.img"
    cache.write_bytes(bytes(4 << 20))
    done = fake.run("attach", "wb", "--cache", cache)
    assert done.returncode == REFUSED, done.stderr
    assert "not a block device" in done.stderr
    assert not any(c.startswith(("load", "suspend")) for c in fake.calls())


def test_attach_option_errors_are_usage_errors(fake):
    done = fake.run("attach", "wb", "--cache", "/dev/null", "-o", "no_such_key=1")
    assert done.returncode == USAGE
    assert done.stderr.startswith("wbctl: error: ")


# attach's check of the cache device, on real block devices: loop devices
# over files (the device-mapper device itself is the stand-in's).
@pytest.fixture
def loops():
    if shutil.which("losetup") is None:
        cannot_run("losetup is not installed: wbctl attach's cache checks need loop devices")
    made = []

    def attach(path):
        result = subprocess.run(["losetup", "--find", "--show", str(path)], capture_output=True, text=True)
        if result.returncode != 0:
            cannot_run(f"loop devices are not available here: {result.stderr.strip()}")
        made.append(result.stdout.strip())
        return made[-1]

    yield attach
    for loop in reversed(made):
        subprocess.run(["losetup", "-d", loop], capture_output=True)


def devno(path):
    rdev = os.stat(path).st_rdev
    return f"{os.major(rdev)}:{os.minor(rdev)}"


@pytest.fixture
def linear(fake, loops, tmp_path):
    """The stand-in's device as a linear mapping of a whole loop device."""
    backing = tmp_path / "backing.img"
    backing.write_bytes(bytes(8 << 20))
    loop = loops(backing)
    fake.put("live", f"0 {(8 << 20) // 512} linear {devno(loop)} 0\n")
    return loop


def cache_image(tmp_path, head=b""):
    path = tmp_path / "cache.img"
    path.write_bytes(head + bytes((4 << 20) - len(head)))
    return path


def test_attach_a_blank_cache(fake, linear, loops, tmp_path):
    cache = loops(cache_image(tmp_path))
    done = fake.run("attach", "wb", "--cache", cache, "-o", "writeback_threshold=70", "--json")
    assert done.returncode == OK, done.stderr
    live = fake.get("live").split()
    assert live[2:6] == ["writeboost", devno(linear), cache, "2"], live
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["cache"]["forced"] is False and doc["cache"]["devno"] == devno(cache)
    assert "suspend --nolockfs wb" in fake.calls()


def test_attach_refuses_a_file_system_and_force_wipes_it(fake, linear, loops, tmp_path):
    ext4 = bytearray(4096)
    ext4[1080:1082] = b"\x53\xef"
    image = cache_image(tmp_path, bytes(ext4) + b"\x01" * 4096)
    cache = loops(image)
    before = sha256(image)
    done = fake.run("attach", "wb", "--cache", cache)
    assert done.returncode == REFUSED, done.stderr
    # libblkid names the crafted superblock ("ext2 (found by libblkid)").
    assert "holds ext2" in done.stderr, done.stderr
    assert sha256(image) == before
    assert not any(c.startswith(("load", "suspend")) for c in fake.calls())

    done = fake.run("attach", "wb", "--cache", cache, "--force")
    assert done.returncode == OK, done.stderr
    assert "--force zeroed" in done.stderr
    assert image.read_bytes()[: 1 << 20] == bytes(1 << 20)
    assert fake.get("live").split()[2] == "writeboost"


def test_attach_refuses_the_backing_device_as_cache(fake, linear):
    done = fake.run("attach", "wb", "--cache", linear)
    assert done.returncode == REFUSED, done.stderr
    assert fake.get("live").split()[2] == "linear"


# replace-cache: the new cache is checked as attach's is (a loop device over
# a file); the old one (4094:16) is no device, so --keep-cache.
def test_replace_cache_switches_the_cache_and_prints_the_stall(fake, loops, tmp_path):
    fake.put("live", "0 2097152 writeboost 4094:0 4094:16 2 writeback_threshold 70\n")
    cache = loops(cache_image(tmp_path))
    done = fake.run("replace-cache", "wb", "--cache", cache, "--keep-cache", "-q")
    assert done.returncode == OK, done.stderr
    assert fake.get("live") == f"0 2097152 writeboost 4094:0 {cache} 2 writeback_threshold 70\n"
    assert fake.get("suspended") is None and fake.get("inactive") is None
    assert "I/O held" in done.stdout and "write-back" in done.stdout
    # The fake's status is upstream's: its constructor formats the new
    # cache, so the load waits for the write-back (wbctl(8), CRASHES).
    calls = fake.calls()
    suspend = calls.index("suspend --nolockfs wb")
    assert calls[suspend:] == ["suspend --nolockfs wb", "message wb 0 drop_caches",
                               f"load wb --table 0 2097152 writeboost 4094:0 {cache} 2 writeback_threshold 70",
                               "resume wb"]


def test_replace_cache_json(fake, loops, tmp_path):
    cache = loops(cache_image(tmp_path))
    done = fake.run("replace-cache", "wb", "--cache", cache, "--keep-cache", "-q", "--json")
    assert done.returncode == OK, done.stderr
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["command"] == "replace-cache" and doc["cache"]["devno"] == devno(cache)
    assert doc["flush"]["start_dirty_blocks"] == 500 and doc["old_table"] == WB_TABLE.strip()
    assert doc["cache_wiped"] is False  # --keep-cache


def test_replace_cache_that_cannot_wipe_the_old_cache_says_so(fake, loops, tmp_path):
    cache = loops(cache_image(tmp_path))
    done = fake.run("replace-cache", "wb", "--cache", cache, "-q")
    assert done.returncode == DAMAGE, done.stderr
    assert fake.get("live").split()[4] == cache
    assert "could not be wiped" in done.stderr


def test_replace_cache_refuses_a_file_system_and_force_wipes_it(fake, loops, tmp_path):
    ext4 = bytearray(4096)
    ext4[1080:1082] = b"\x53\xef"
    image = cache_image(tmp_path, bytes(ext4))
    cache = loops(image)
    before = sha256(image)
    done = fake.run("replace-cache", "wb", "--cache", cache, "--keep-cache", "-q")
    assert done.returncode == REFUSED, done.stderr
    assert "holds ext2" in done.stderr and sha256(image) == before
    assert fake.get("live") == WB_TABLE and fake.calls() == ["table wb", "status wb"]
    done = fake.run("replace-cache", "wb", "--cache", cache, "--keep-cache", "-q", "--force")
    assert done.returncode == OK, done.stderr
    assert image.read_bytes()[: 1 << 20] == bytes(1 << 20)


def test_replace_cache_refuses_a_cache_that_is_no_block_device(fake, tmp_path):
    done = fake.run("replace-cache", "wb", "--cache", cache_image(tmp_path), "-q")
    assert done.returncode == REFUSED, done.stderr
    assert "not a block device" in done.stderr
    assert fake.get("live") == WB_TABLE
    assert not any(c.startswith(("load", "suspend", "message")) for c in fake.calls())


@pytest.mark.parametrize("step", ["load", "suspend", "resume"])
def test_replace_cache_failure_leaves_the_device_as_it_was(fake, loops, tmp_path, step):
    cache = loops(cache_image(tmp_path))
    fake.put("fail." + step, "")
    done = fake.run("replace-cache", "wb", "--cache", cache, "-q")
    if step == "resume":
        # Nothing resumes: the stand-in fails every resume, and wbctl says
        # how to finish by hand.
        assert done.returncode == OPERATIONAL
        assert "dmsetup resume wb" in done.stderr
        return
    assert done.returncode == OPERATIONAL, done.stderr
    assert done.stderr.startswith("wbctl: error: ")
    assert fake.get("live") == WB_TABLE
    assert fake.get("suspended") is None and fake.get("inactive") is None


# mode: the stand-in's status is upstream's (no `dead`), so the table is
# loaded only while the device is suspended and written back.
def test_mode_write_around_and_back(fake):
    fake.put("live", "0 2097152 writeboost 4094:0 4094:16 2 writeback_threshold 70\n")
    done = fake.run("mode", "wb", "write-around", "-q")
    assert done.returncode == OK, done.stderr
    assert fake.get("live") == "0 2097152 writeboost 4094:0 4094:16 4 writeback_threshold 70 write_around_mode 1\n"
    assert "I/O held" in done.stdout
    calls = fake.calls()
    suspend = calls.index("suspend --nolockfs wb")
    assert calls[suspend:] == ["suspend --nolockfs wb", "message wb 0 drop_caches",
                               "load wb --table 0 2097152 writeboost 4094:0 4094:16 4 writeback_threshold 70 "
                               "write_around_mode 1", "resume wb"]
    assert fake.get("suspended") is None and fake.get("inactive") is None

    again = fake.run("mode", "wb", "write-around", "--json")
    assert again.returncode == OK, again.stderr
    doc = json.loads(again.stdout)
    validate(doc)
    assert doc["changed"] is False and doc["mode"] == "write-around"

    back = fake.run("mode", "wb", "write-back", "-q", "--json")
    assert back.returncode == OK, back.stderr
    doc = json.loads(back.stdout)
    validate(doc)
    assert doc["changed"] is True
    assert fake.get("live") == "0 2097152 writeboost 4094:0 4094:16 4 writeback_threshold 70 write_around_mode 0\n"


def test_mode_usage(fake):
    done = fake.run("mode", "wb", "write-through")
    assert done.returncode == USAGE
    assert fake.calls() == []


@pytest.mark.parametrize("step", ["load", "suspend"])
def test_mode_failure_leaves_the_device_as_it_was(fake, step):
    fake.put("fail." + step, "")
    done = fake.run("mode", "wb", "write-around", "-q")
    assert done.returncode == OPERATIONAL, done.stderr
    assert fake.get("live") == WB_TABLE
    assert fake.get("suspended") is None and fake.get("inactive") is None


def test_mode_refuses_upstream_write_around_with_read_caching(fake):
    fake.put("live", "0 2097152 writeboost 4094:0 4094:16 4 write_around_mode 1 read_cache_threshold 8\n")
    done = fake.run("mode", "wb", "write-back", "-q")
    assert done.returncode == REFUSED, done.stderr
    assert "detach" in done.stderr
    assert not any(c.startswith(("load", "suspend")) for c in fake.calls())


def test_replace_cache_keeps_a_tunable_a_message_changed(fake, loops, tmp_path):
    # Upstream's table shows writeback_threshold as typed (70); the target
    # runs 30 since a message: the new table says 30.
    fake.put("live", "0 2097152 writeboost 4094:0 4094:16 2 writeback_threshold 70\n")
    real = fake.dir.parent / "dmsetup"
    wrapper = fake.dir.parent / "dmsetup-30"
    wrapper.write_text(f"#!/bin/sh\n{real} \"$@\" | sed 's/writeback_threshold 70 nr_cur/writeback_threshold 30 nr_cur/'\n")
    wrapper.chmod(0o755)
    cache = loops(cache_image(tmp_path))
    done = run([tool_path("wbctl"), "--dmsetup", wrapper, "replace-cache", "wb", "--cache", cache, "--keep-cache",
                "-q"], env=fake.env)
    assert done.returncode == OK, done.stderr
    assert fake.get("live") == f"0 2097152 writeboost 4094:0 {cache} 2 writeback_threshold 30\n"


# create: the devices are loop devices over files, the stand-in dmsetup
# takes the table.
@pytest.fixture
def fresh(fake, loops, tmp_path):
    """No device named wb yet, and a free 8 MiB backing loop device."""
    (fake.dir / "live").unlink()
    fake.put("dirty", "0")
    backing = tmp_path / "backing.img"
    backing.write_bytes(bytes(8 << 20))
    return loops(backing)


def test_create_formats_a_blank_cache_and_adds_the_tab_line(fake, fresh, loops, tmp_path):
    cache = loops(cache_image(tmp_path))
    tab = tmp_path / "writeboosttab"
    tab.write_text("# devices\n")
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache, "-o", "writeback_threshold=70",
                    "--tab", "--tab-file", tab, "--json")
    assert done.returncode == OK, done.stderr
    assert fake.get("live") == f"0 16384 writeboost {fresh} {cache} 2 writeback_threshold 70\n"
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["cache"]["start"] == "formatted" and doc["backing"]["sectors"] == 16384
    assert tab.read_text() == f"# devices\nwb\t{fresh}\t{cache}\twriteback_threshold=70\n"
    assert "kernel name" in done.stderr  # /dev/loopN in the tab: a warning

    # The name exists now: refused before any device is looked at.
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache)
    assert done.returncode == OPERATIONAL and "exists already" in done.stderr


def test_create_without_a_cache_is_a_linear_mapping_attach_takes(fake, fresh, loops, tmp_path):
    done = fake.run("create", "wb", "--backing", fresh)
    assert done.returncode == OK, done.stderr
    assert fake.get("live") == f"0 16384 linear {fresh} 0\n"
    assert "wbctl attach wb --cache" in done.stdout
    # A real block device behind the linear table: attach's own check of the
    # mapping (the whole device from 0) passes.
    fake.put("live", f"0 16384 linear {devno(fresh)} 0\n")
    cache = loops(cache_image(tmp_path))
    done = fake.run("attach", "wb", "--cache", cache)
    assert done.returncode == OK, done.stderr
    assert fake.get("live").split()[2] == "writeboost"


def test_create_replays_a_log_of_this_backing_device(fake, fresh, loops, tmp_path):
    image = craft.make_cache(tmp_path / "log.img", 4, [
        (1, [(8, 0xFF, craft.block_data(1, 8)), (64, 0xFF, craft.block_data(2, 64))]),
        (2, [(8, 0xFF, craft.block_data(3, 8))]),
    ])
    before = sha256(image)
    cache = loops(image)
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache, "--json")
    assert done.returncode == OK, done.stderr
    doc = json.loads(done.stdout)
    assert doc["cache"]["start"] == "replayed" and doc["log_dirty_blocks"] == 2, doc
    assert sha256(image) == before  # the check only reads


def test_create_refuses_the_log_of_another_backing_device(fake, fresh, loops, tmp_path):
    # A dirty block past the end of the 8 MiB backing device.
    image = craft.make_cache(tmp_path / "log.img", 4, [(1, [(1 << 20, 0xFF, craft.block_data(1, 1 << 20))])])
    before = sha256(image)
    cache = loops(image)
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache)
    assert done.returncode == REFUSED, done.stderr
    assert "past the end" in done.stderr and "1 dirty blocks" in done.stderr
    assert sha256(image) == before and fake.get("live") is None
    assert not any(c.startswith("create") for c in fake.calls())


@pytest.mark.parametrize("what,head", [
    ("holds ext2", bytes(1080) + b"\x53\xef"),
    ("bcache", bytes(4096 + 24) + bytes([0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca,
                                         0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81])),
], ids=["ext4", "bcache"])
def test_create_refuses_what_the_cache_holds_and_force_wipes_it(fake, fresh, loops, tmp_path, what, head):
    image = cache_image(tmp_path, head)
    cache = loops(image)
    before = sha256(image)
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache)
    assert done.returncode == REFUSED, done.stderr
    assert what in done.stderr and sha256(image) == before and fake.get("live") is None
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache, "--force")
    assert done.returncode == OK, done.stderr
    assert image.read_bytes()[: 1 << 20] == bytes(1 << 20) and image.read_bytes()[-(1 << 20):] == bytes(1 << 20)


def test_create_names_what_libblkid_finds_and_force_zeroes_both_ends(fake, fresh, loops, tmp_path):
    if not shutil.which("mkfs.ext4"):
        pytest.skip("mkfs.ext4 not installed")
    image = tmp_path / "ext4.img"
    image.write_bytes(bytes(8 << 20))
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    cache = loops(image)
    before = sha256(image)
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache)
    assert done.returncode == REFUSED, done.stderr
    assert f"{cache} holds ext4 (found by libblkid)" in done.stderr, done.stderr
    assert sha256(image) == before and fake.get("live") is None
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache, "--force")
    assert done.returncode == OK, done.stderr
    data = image.read_bytes()
    assert data[: 1 << 20] == bytes(1 << 20) and data[-(1 << 20):] == bytes(1 << 20)


def test_attach_refuses_data_in_the_last_mib(fake, linear, loops, tmp_path):
    # Sector 0 and the first MiB zero: only the kernel's total rule (zeros
    # at both ends) sees it.
    image = cache_image(tmp_path)
    with open(image, "r+b") as f:
        f.seek((4 << 20) - 4096)
        f.write(b"data at the end")
    cache = loops(image)
    before = sha256(image)
    done = fake.run("attach", "wb", "--cache", cache)
    assert done.returncode == REFUSED, done.stderr
    assert f"non-zero data at byte {(4 << 20) - 4096}" in done.stderr, done.stderr
    assert sha256(image) == before


def test_create_refuses_a_writeboost_magic_that_is_no_superblock(fake, fresh, loops, tmp_path):
    image = cache_image(tmp_path, b"tsBW" + b"junk")
    cache = loops(image)
    done = fake.run("create", "wb", "--backing", fresh, "--cache", cache)
    assert done.returncode == REFUSED, done.stderr
    assert "not a valid superblock" in done.stderr, done.stderr


def test_create_refuses_a_backing_device_in_use_and_the_same_device_twice(fake, fresh, loops, tmp_path):
    done = fake.run("create", "wb", "--backing", fresh, "--cache", fresh)
    assert done.returncode == REFUSED, done.stderr
    holder = open(fresh, "rb")  # noqa: SIM115 - held while wbctl runs
    try:
        fd = os.open(fresh, os.O_RDONLY | os.O_EXCL)  # the way a mount holds it
    finally:
        holder.close()
    try:
        done = fake.run("create", "wb", "--backing", fresh)
        assert done.returncode != OK and fake.get("live") is None, done.stderr
        assert "busy" in done.stderr.lower() or "in use" in done.stderr.lower(), done.stderr
    finally:
        os.close(fd)


def test_create_option_errors_change_nothing(fake, fresh, tmp_path):
    tab = tmp_path / "writeboosttab"
    for args in (["-o", "write_around_mode=1", "--cache", "/dev/null", "--tab", "--tab-file", str(tab)],
                 ["-o", "writeback_threshold=70"], ["--tab", "--tab-file", str(tab)],
                 ["--cache", "/dev/null", "--tab-file", str(tab)]):
        done = fake.run("create", "wb", "--backing", fresh, *args)
        assert done.returncode == USAGE, (args, done.stderr)
    assert fake.get("live") is None and not tab.exists()
    tab.write_text("wb /dev/x /dev/y\n")
    done = fake.run("create", "wb", "--backing", fresh, "--cache", "/dev/null", "--tab", "--tab-file", tab)
    assert done.returncode == REFUSED and "names wb already" in done.stderr, done.stderr
    assert fake.get("live") is None
