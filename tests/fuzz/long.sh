#!/usr/bin/env bash
# A long run of the engine fuzzer (or of FUZZ_TARGET: fuzz_replay, the replay
# decision), for a given time or number of executions, from the committed
# corpus (new finds go to a scratch copy). Prints the
# executions, the rate and the coverage libFuzzer reached. With ASAN_BUILD_DIR
# (a build of the same target with AddressSanitizer), every input of the grown
# corpus is run again there at the end: the long run itself can then use a
# build without ASan, at several times the rate. The grown corpus is left in
# FUZZ_BUILD_DIR/fuzz-long-corpus (fuzz-long-corpus-replay for fuzz_replay),
# for `fuzz_engine -merge=1` into the committed one.
# Usage: tests/fuzz/long.sh FUZZ_BUILD_DIR [SECONDS] [RUNS] [ASAN_BUILD_DIR]   (RUNS 0: no limit)
# FUZZ_FORKS=N (default 1): libFuzzer's fork mode, N worker processes sharing
# one corpus, for a long run on several cores; the executions, the time and
# the limits are the run's total over its workers.
set -euo pipefail
build=$(realpath "${1:?usage: $0 FUZZ_BUILD_DIR [SECONDS] [RUNS]}")
seconds=${2:-600}
runs=${3:-0}
asan_build=${4:+$(realpath "$4")}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target=${FUZZ_TARGET:-fuzz_engine}
case "$target" in
fuzz_engine) corpus=engine kept="$build/fuzz-long-corpus" ;;
fuzz_replay) corpus=replay kept="$build/fuzz-long-corpus-replay" ;;
*) echo "long.sh: FUZZ_TARGET is fuzz_engine or fuzz_replay, not $target" >&2; exit 2 ;;
esac
cp -r "$root/tests/fuzz/corpus/$corpus" "$work/corpus"
forks=${FUZZ_FORKS:-1}
limits=(-max_total_time="$seconds")
[ "$runs" -gt 0 ] && limits=(-runs="$runs")
[ "$forks" -gt 1 ] && limits+=(-fork="$forks")
echo "fuzz-long: $target, ${limits[*]}, load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
status=0
/usr/bin/time -f "%U %S" -o "$work/cpu" "$build/tests/fuzz/$target" "${limits[@]}" -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" 2>"$work/log" || status=$?
elapsed=$(( $(date +%s) - start ))
tail -3 "$work/log" | grep -E "^#|DONE" || true
grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb" "$work/log" || true
grep -oE "cov: [0-9]+ ft: [0-9]+" "$work/log" | tail -1 | sed 's/^/coverage (edges, features): /'
echo "elapsed: ${elapsed}s"
# The rate on one core: executions per CPU-second, which a loaded machine does not skew.
units=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$work/log" | grep -oE "[0-9]+$" || true)
if [ -z "$units" ]; then # fork mode: the parent's last status line counts every worker's executions
	last_status=$(grep -E "^#[0-9]+: cov:" "$work/log" | tail -1 || true)
	units=$(echo "$last_status" | sed -n 's/^#\([0-9]*\):.*/\1/p')
	units=${units:-0}
	echo "fork mode, last status: $last_status"
fi
awk -v u="$units" '{ cpu = $1 + $2; if (cpu > 0) printf "executions per CPU-second: %.0f (%d in %.1f CPU-s)\n", u / cpu, u, cpu }' "$work/cpu"
if [ "$status" -ne 0 ]; then
	grep -B5 -A30 "ERROR\|invariant broken" "$work/log" | head -60
	mkdir -p "$root/build-fuzz/crashes" && cp "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$root/build-fuzz/crashes/" 2>/dev/null || true
	echo "fuzz-long: FAILED (artifacts in build-fuzz/crashes)"
	exit 1
fi
if [ -n "$asan_build" ]; then
	found=$(ls "$work/corpus" | wc -l)
	echo "fuzz-long: running the $found inputs of the grown corpus under ASan"
	if ! "$asan_build/tests/fuzz/$target" -runs=0 -rss_limit_mb=2048 -artifact_prefix="$work/" "$work/corpus" 2>"$work/asan.log"; then
		grep -B5 -A30 "ERROR\|invariant broken" "$work/asan.log" | head -60
		mkdir -p "$root/build-fuzz/crashes" && cp "$work"/crash-* "$work"/leak-* "$root/build-fuzz/crashes/" 2>/dev/null || true
		echo "fuzz-long: FAILED under ASan (artifacts in build-fuzz/crashes)"
		exit 1
	fi
fi
rm -rf "$kept"
cp -r "$work/corpus" "$kept"
echo "fuzz-long: no crash; grown corpus in $kept"
