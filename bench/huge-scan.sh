#!/usr/bin/env bash
# The header scan of a huge cache: wbdump --no-verify on an 8 TiB sparse
# cache image (16.7 million slots, truncate(1) makes it a file of holes) with
# a log of some MiB in its first slots; the goal is under 60 s, with peak
# memory at most the 463 MB of one 24-byte slot record per slot plus the
# tool. Each round also times the full validation (checksums on) of the same
# image. Medians over rounds; the load average is printed with each figure.
# Usage: bench/huge-scan.sh BUILD_DIR [WORK_DIR]   (WBKIT_BENCH_HUGE_GIB, WBKIT_BENCH_HUGE_LOG_MIB, WBKIT_BENCH_ROUNDS)
set -euo pipefail
build=$(realpath "${1:?usage: $0 BUILD_DIR [WORK_DIR]}")
work=${2:-$(mktemp -d /var/tmp/wbkit-huge-bench.XXXXXX)}
trap 'rm -rf "$work"' EXIT
gib=${WBKIT_BENCH_HUGE_GIB:-8192}
log_mib=${WBKIT_BENCH_HUGE_LOG_MIB:-256}
rounds=${WBKIT_BENCH_ROUNDS:-3}

echo "making a $gib GiB sparse cache image with $log_mib MiB of log..."
"$build/bench/replay_synth" huge "$work/huge.img" "$gib" "$log_mib"

/usr/bin/python3 - "$build/tools/wbdump/wbdump" "$work/huge.img" "$rounds" <<'PY'
import os, statistics, subprocess, sys

wbdump, image, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])

def run(args):
    # Wall seconds and peak RSS of one fresh child, through a python wrapper.
    code = ("import resource,subprocess,sys,time;t=time.perf_counter();"
            "r=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
            "print(time.perf_counter()-t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout.split()
    if int(out[2]) not in (0, 1):
        sys.exit(f"wbdump failed with exit code {out[2]}")
    return float(out[0]), int(out[1]) * 1024

def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])

size = os.path.getsize(image)
slots = (size // 512 - 2048) // 1024
headers, full = [], []
for r in range(rounds):
    headers.append(run([wbdump, image, "--no-verify"]))
    full.append(run([wbdump, image]))
    print(f"  round {r + 1}: --no-verify {headers[-1][0]:.1f} s, full validation {full[-1][0]:.1f} s (load {load()})")
t = statistics.median(x[0] for x in headers)
rss = max(x[1] for x in headers)
print(f"{size / 2**40:.0f} TiB sparse cache, {slots} slots: wbdump --no-verify {t:.1f} s (median of {rounds}), "
      f"goal 60 s: ratio goal/time {60 / t:.1f} (goal >= 1); load {load()}")
print(f"  peak RSS {rss / 1e6:.0f} MB = {rss / slots:.1f} bytes per slot (goal <= 463 MB)")
print(f"  full validation of the same image: {statistics.median(x[0] for x in full):.1f} s, "
      f"peak RSS {max(x[1] for x in full) / 1e6:.0f} MB")
PY
