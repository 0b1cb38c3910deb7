#!/usr/bin/env bash
# Full validation (wbdump, checksums on) of a 2 GiB cache image in page cache
# against a plain sequential read of the same file (dd), interleaved in the
# same run, medians over rounds, with the load average; then
# peak RSS on a 2 GiB and a 16 GiB sparse image: memory must follow the
# number of segments and metablocks, not the amount of data.
# Usage: bench/wbdump-validate.sh BUILD_DIR [WORK_DIR]   (WBKIT_BENCH_ROUNDS, default 5)
set -euo pipefail
build=$(realpath "${1:?usage: $0 BUILD_DIR [WORK_DIR]}")
work=${2:-$(mktemp -d /var/tmp/wbkit-bench.XXXXXX)}
trap 'rm -rf "$work"' EXIT
wbsynth="$build/tests/support/wbsynth"
wbdump="$build/tools/wbdump/wbdump"

echo "making a 2 GiB cache image full of dirty segments..."
"$wbsynth" --cache "$work/full.img" --cache-mib 2048 --backing "$work/full-backing.img" --backing-mib 16384 \
	--writes 519000 --flush-every 0 --partial-percent 0 --seed 1 >/dev/null
echo "making a 16 GiB sparse cache image with a short log..."
"$wbsynth" --cache "$work/sparse.img" --cache-mib 16384 --backing "$work/sparse-backing.img" --backing-mib 1024 \
	--writes 4000 --flush-every 127 --seed 2 >/dev/null
rm -f "$work/full-backing.img" "$work/sparse-backing.img"

/usr/bin/python3 - "$wbdump" "$work/full.img" "$work/sparse.img" "${WBKIT_BENCH_ROUNDS:-5}" <<'PY'
import os, resource, statistics, subprocess, sys, time

wbdump, full, sparse, rounds = *sys.argv[1:4], int(sys.argv[4])
size = os.path.getsize(full)

def timed(args):
    start = time.perf_counter()
    result = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        sys.exit(f"{args[0]} failed: {result.stderr.decode()}")
    return elapsed

def peak_rss_kib(args):
    # ru_maxrss of a fresh child only: run it through a python wrapper.
    code = ("import resource,subprocess,sys;"
            "subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    return int(subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True).stdout)

def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])

subprocess.run(["cat", full], stdout=subprocess.DEVNULL, check=True)  # into page cache
plain, validate = [], []
for _ in range(rounds):  # interleaved: the load of the shared machine falls on both
    plain.append(timed(["dd", f"if={full}", "of=/dev/null", "bs=1M"]))
    validate.append(timed([wbdump, full]))
p, v = statistics.median(plain), statistics.median(validate)
print(f"2 GiB image in page cache, medians of {rounds} interleaved rounds: plain read {size / p / 2**30:.2f} GiB/s, "
      f"wbdump validation {size / v / 2**30:.2f} GiB/s, ratio {p / v:.2f} (goal >= 0.90); load {load()}")
print(f"  per round: {' '.join(f'{a / b:.2f}' for a, b in zip(plain, validate))}")
print(f"peak RSS: wbdump on 2 GiB image {peak_rss_kib([wbdump, full]) / 1024:.1f} MiB, "
      f"on 16 GiB sparse image {peak_rss_kib([wbdump, sparse]) / 1024:.1f} MiB")
PY
