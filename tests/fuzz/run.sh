#!/usr/bin/env bash
# A short, bounded libFuzzer run over the parsers, seeded from the fixtures'
# segment headers. Any crash, leak or sanitizer report fails the run.
# Usage: tests/fuzz/run.sh FUZZ_BUILD_DIR [SECONDS]
set -euo pipefail
build=$(realpath "${1:?usage: $0 FUZZ_BUILD_DIR [SECONDS]}")
seconds=${2:-${WBKIT_FUZZ_SECONDS:-45}}
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

echo "fuzz: $n fixtures seeded the corpus; running for ${seconds}s"
"$build/tests/fuzz/fuzz_parsers" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$work/" "$work/corpus" 2>"$work/log" || {
	tail -50 "$work/log"
	mkdir -p "$root/build-fuzz/crashes" && cp "$work"/crash-* "$work"/leak-* "$root/build-fuzz/crashes/" 2>/dev/null || true
	echo "fuzz: FAILED (artifacts in build-fuzz/crashes)"
	exit 1
}
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/log" || true
echo "fuzz: 1 passed, 0 failed"
