#!/usr/bin/env bash
# Replay throughput and scale.
# 1. A dense dirty set (1 GiB of 4 KiB blocks, default) replayed by wbreplay
#    onto an image file, against dd writing the same number of bytes to the
#    same file system (O_DIRECT, flushed, as wbreplay writes), in the same
#    run, five interleaved rounds, medians; the whole wbreplay run (checksum
#    verification included: it runs beside the writes) has the goal >= 0.9
#    of dd; plus write requests against dirty blocks. The load average is
#    printed with each ratio.
# 2. Scale: sparse caches of 1, 4 and 8 million metablocks (headers only);
#    seconds and peak RSS of scan + plan (replay_synth scan) and of wbreplay
#    --dry-run on each, and the slope of peak RSS per added metablock
#    (least squares; goal <= 16 bytes for both).
# Usage: bench/replay.sh BUILD_DIR [WORK_DIR]   (WBKIT_BENCH_DENSE_MIB, WBKIT_BENCH_METABLOCKS="N ...",
#        WBKIT_BENCH_SKIP_DENSE=1 for the scale part alone)
set -euo pipefail
build=$(realpath "${1:?usage: $0 BUILD_DIR [WORK_DIR]}")
work=${2:-$(mktemp -d /var/tmp/wbkit-replay-bench.XXXXXX)}
trap 'rm -rf "$work"' EXIT
synth="$build/bench/replay_synth"
wbreplay="$build/tools/wbreplay/wbreplay"
dense_mib=${WBKIT_BENCH_DENSE_MIB:-1024}
# The metablock counts of the scale part (peak RSS and its slope).
scale_points=${WBKIT_BENCH_METABLOCKS:-1000000 4000000 8000000}

if [ "${WBKIT_BENCH_SKIP_DENSE:-0}" != 1 ]; then
echo "making a cache with $dense_mib MiB of sequential dirty blocks..."
"$synth" dense "$work/dense.img" "$work/dense-backing.img" "$dense_mib"

/usr/bin/python3 - "$wbreplay" "$work" "$dense_mib" <<'PY'
import json, os, statistics, subprocess, sys, time

wbreplay, work, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
cache, backing = f"{work}/dense.img", f"{work}/dense-backing.img"
size = mib << 20

def timed(args):
    start = time.perf_counter()
    result = subprocess.run(args, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{args[0]} failed: {result.stderr}")
    return elapsed, result.stdout

dd_times, replay_times, write_times, report = [], [], [], None
def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])

for _ in range(5):  # interleaved, medians of five: the machine is shared
    for path in (f"{work}/dd.img", backing):
        with open(path, "w") as f:  # a fresh, sparse file for both writers
            f.truncate(size)
    dd, _ = timed(["dd", "if=/dev/zero", f"of={work}/dd.img", "bs=4M", f"count={mib // 4}",
                   "oflag=direct", "conv=fdatasync,notrunc", "status=none"])
    dd_times.append(dd)
    replay, out = timed([wbreplay, "--cache", cache, "--backing", backing, "-q", "--json"])
    replay_times.append(replay)
    report = json.loads(out)
    write_times.append(report["written"]["seconds"])
d, r, w = statistics.median(dd_times), statistics.median(replay_times), statistics.median(write_times)
written = report["written"]["bytes"]
print(f"dense dirty set of {mib} MiB, medians of 5 interleaved rounds: dd {size / d / 2**20:.0f} MiB/s; "
      f"wbreplay write-back {written / w / 2**20:.0f} MiB/s (read cache, write, flush), ratio {d / w:.2f} "
      f"(goal >= 0.70); load {load()}")
print(f"  whole wbreplay run, checksum verification included (header scan {report['scan_seconds']:.2f} s, then "
      f"writes while the checksums are verified): "
      f"{written / r / 2**20:.0f} MiB/s, ratio {d / r:.2f} (goal >= 0.90); load {load()}")
print(f"  per round, whole run: {' '.join(f'{a / b:.2f}' for a, b in zip(dd_times, replay_times))}")
print(f"merging: {report['written']['write_requests']} write requests for "
      f"{report['plan']['dirty_blocks']} dirty 4 KiB blocks ({report['plan']['extents']} extents of at most "
      f"{report['plan']['max_extent_bytes'] >> 20} MiB)")
PY
rm -f "$work/dense.img" "$work/dense-backing.img" "$work/dd.img"
fi

# Scale: memory must grow by at most 16 bytes per metablock (scan + plan).
# The slope of peak RSS over the metablock counts is what is measured: the
# constant part (the binary, the libraries, buffers) does not grow with the log.
/usr/bin/python3 - "$synth" "$wbreplay" "$build/tools/wbdump/wbdump" "$work" $scale_points <<'PY'
import resource, subprocess, sys, time

synth, wbreplay, wbdump, work = sys.argv[1:5]
points = [int(n) for n in sys.argv[5:]]
cache, backing = f"{work}/sparse.img", f"{work}/sparse-backing.img"

# ru_maxrss of children is a maximum over all of them: measure each run in a fresh wrapper.
def tool_run(args):
    code = ("import resource,subprocess,sys,time;t=time.perf_counter();"
            "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
            "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout.split()
    if int(out[2]) not in (0, 1):
        sys.exit(f"{args[0]} failed with exit code {out[2]}")
    return float(out[0]), int(out[1]) * 1024

def slope(xs, ys):  # least squares: bytes per added metablock
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)

counts, scan_rss, dry_rss, dump_rss = [], [], [], []
for n in points:
    subprocess.run([synth, "sparse", cache, backing, str(n)], check=True, stdout=subprocess.DEVNULL)
    line = subprocess.run([synth, "scan", cache, backing], capture_output=True, text=True, check=True).stdout.split()
    fields = dict(zip(line[0::2], line[1::2]))
    metablocks, rss = int(fields["metablocks"]), int(fields["peak_rss_bytes"])
    elapsed, dry = tool_run([wbreplay, "--cache", cache, "--backing", backing, "--dry-run", "-q"])
    _, dump = tool_run([wbdump, cache, "--backing", backing])
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"{metablocks} metablocks: replay_synth scan {float(fields['seconds']):.1f} s, peak RSS {rss / 2**20:.1f} MiB "
          f"({rss / metablocks:.1f} B/metablock; index alone {int(fields['index_bytes']) / metablocks:.1f}); "
          f"wbreplay --dry-run {elapsed:.1f} s, peak RSS {dry / 2**20:.1f} MiB; wbdump {dump / 2**20:.1f} MiB; "
          f"load {load}")
    counts.append(metablocks)
    scan_rss.append(rss)
    dry_rss.append(dry)
    dump_rss.append(dump)
if len(counts) > 1:
    print(f"slope of peak RSS (least squares over {len(counts)} sizes): replay_synth scan "
          f"{slope(counts, scan_rss):.1f} B/metablock, wbreplay --dry-run {slope(counts, dry_rss):.1f} B/metablock "
          f"(goal <= 16 for both); wbdump --backing {slope(counts, dump_rss):.1f} B/metablock")
PY
