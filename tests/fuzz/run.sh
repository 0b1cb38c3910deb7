#!/usr/bin/env bash
# A short, bounded libFuzzer run of the three targets: the parsers, seeded
# from the fixtures' segment headers, the engine (scan, plan, recovery) and
# the replay decision (against its model), each from its committed corpus.
# Any crash, leak, sanitizer report or broken invariant fails the run.
# `make fuzz-long` runs the engine target for longer, `make fuzz-replay-long`
# the replay decision's.
# Usage: tests/fuzz/run.sh FUZZ_BUILD_DIR [SECONDS]   (SECONDS per target)
set -euo pipefail
build=$(realpath "${1:?usage: $0 FUZZ_BUILD_DIR [SECONDS]}")
seconds=${2:-${WBKIT_FUZZ_SECONDS:-30}}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"

# Seeds: the first three slot headers (plus the start of slot 0's data) of every fixture.
n=0
for image in "$root"/fixtures/synthetic/*/cache.img.zst "$root"/fixtures/upstream/*/cache.img.zst; do
	[ -f "$image" ] || continue
	zstd -q -d -c "$image" >"$work/cache.img"
	for slot in 0 1 2; do
		dd if="$work/cache.img" of="$work/corpus/seed-$n-$slot" bs=4096 skip=$((256 + 128 * slot)) count=1 status=none
	done
	dd if="$work/cache.img" bs=4096 skip=256 count=3 status=none >"$work/corpus/seed-$n-slot0-data"
	n=$((n + 1))
done

echo "fuzz: $n fixtures seeded the parser corpus; running each target for ${seconds}s"
cp -r "$root/tests/fuzz/corpus/engine" "$work/engine-corpus"
cp -r "$root/tests/fuzz/corpus/replay" "$work/replay-corpus"
failed=0
for target in fuzz_parsers fuzz_engine fuzz_replay; do
	corpus="$work/corpus"
	[ "$target" = fuzz_engine ] && corpus="$work/engine-corpus"
	[ "$target" = fuzz_replay ] && corpus="$work/replay-corpus"
	if ! "$build/tests/fuzz/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$work/" "$corpus" 2>"$work/$target.log"; then
		tail -50 "$work/$target.log"
		mkdir -p "$root/build-fuzz/crashes" && cp "$work"/crash-* "$work"/leak-* "$root/build-fuzz/crashes/" 2>/dev/null || true
		echo "fuzz: $target FAILED (artifacts in build-fuzz/crashes)"
		failed=$((failed + 1))
		continue
	fi
	echo "$target: $(grep -E "stat::number_of_executed_units|stat::average_exec_per_sec" "$work/$target.log" | tr -s ' ' | tr '\n' ' ')"
done
[ "$failed" -eq 0 ] || exit 1
echo "fuzz: 3 passed, 0 failed"
