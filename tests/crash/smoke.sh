#!/usr/bin/env bash
# The bounded part of the crash-consistency enumeration, for `make test`
# (ctest crash_smoke): the committed recordings under fixtures/crash/ are
# replayed to their crash states (every flush point, subsets, torn writes)
# and each state is checked offline with the library's replay. No VM.
# Recordings that start from a crash state (base.img: the target's replay at
# construction) are checked the same way; ext4 recordings (workload=ext4)
# with e2fsck and debugfs on fewer states (ext4-check.sh).
# Also checks that wbcrash's copy of the stamped workload equals wbstamp's.
#   smoke.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?build dir}" && pwd)
wbcrash=$build/tests/support/wbcrash
[ -x "$wbcrash" ] || { echo "no $wbcrash"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/wbcrash-smoke.XXXXXX")
keep=$build/crash-failures
# e2fsck writes and syncs the image of every ext4 state: memory is much faster.
scratch=$work
[ -d /dev/shm ] && [ -w /dev/shm ] && scratch=$(mktemp -d /dev/shm/wbcrash-smoke.XXXXXX)
trap 'rm -rf "$work" "$scratch"' EXIT

# The in-process workload must be wbstamp's, or every verdict is meaningless.
cc -O2 -o "$work/wbstamp" "$root/tests/vm/wbstamp.c"

failed=0 total=0
# Recordings to check with in-order tears only (none now: with the
# torn-rewrite rule, docs/FORMAT.md replay step 2, every recording keeps its
# flushed writes under tears in any sector order, upstream's included).
PREFIX_ONLY=${CRASH_PREFIX_ONLY-}
# count_states NAME MIN OUTPUT: adds the states a wbcrash run checked to
# total; a recording with fewer than MIN proves too little.
count_states() {
	local n
	n=$(sed -n 's/^states_checked_a=\([0-9]*\).*/\1/p' <<<"$3")
	total=$((total + ${n:-0}))
	[ "${n:-0}" -ge "$2" ] || { echo "FAIL $1: only ${n:-0} states"; failed=1; }
}
for fixture in "$root"/fixtures/crash/*/; do
	name=$(basename "$fixture")
	rec=$work/$name
	mkdir -p "$rec"
	cp "$fixture/meta.kv" "$rec/"
	zstd -d -q "$fixture/log.img.zst" -o "$rec/log.img"
	zstd -d -q "$fixture/final-data.img.zst" -o "$rec/final-data.img"
	[ ! -f "$fixture/base.img.zst" ] || zstd -d -q "$fixture/base.img.zst" -o "$rec/base.img"

	if grep -q '^workload=ext4' "$rec/meta.kv"; then
		# About 0.1 s per state (e2fsck twice, debugfs): a few dozen of them.
		out=$("$wbcrash" "$rec" --subsets 1 --torn 1 --seed 1 --max-windows "${CRASH_EXT4_WINDOWS:-30}" \
			--recovery-every 5 --keep "$keep" --state-check "$here/ext4-check.sh" --work-dir "$scratch") || failed=1
		echo "$out"
		count_states "$name" 20 "$out"
		rm -rf "$rec"
		continue
	fi

	seed=$(sed -n 's/^seed=//p' "$rec/meta.kv")
	ops=$(sed -n 's/^ops=//p' "$rec/meta.kv")
	size=$(sed -n 's/^backing_bytes=//p' "$rec/meta.kv")
	pct=$(sed -n 's/^partial_pct=//p' "$rec/meta.kv")
	dpct=$(sed -n 's/^discard_pct=//p' "$rec/meta.kv")
	"$work/wbstamp" image "$work/stamp-ref.img" --seed "$seed" --size "$size" --partial-pct "$pct" \
		--discard-pct "${dpct:-0}" --upto "$ops" --ops "$ops"
	"$wbcrash" "$rec" --stamp-image "$work/stamp-ours.img"
	if ! cmp "$work/stamp-ref.img" "$work/stamp-ours.img"; then
		echo "FAIL $name: wbcrash's stamped workload differs from wbstamp's"
		failed=1
		continue
	fi

	# A recording that starts from a crash state has few flushes, with many
	# writes between them: more subsets per window.
	subsets=${CRASH_SUBSETS:-2}
	[ -f "$rec/base.img" ] && subsets=${CRASH_SUBSETS:-16}
	# Tears in any sector order, except on recordings listed in
	# PREFIX_ONLY (fixtures/crash/README.md says why each is there).
	tears=()
	[[ " $PREFIX_ONLY " != *" $name "* ]] || tears=(--torn-prefix-only)
	out=$("$wbcrash" "$rec" "${tears[@]}" --subsets "$subsets" --torn "${CRASH_TORN:-3}" --seed 1 \
		--max-windows "${CRASH_WINDOWS:-50}" --recovery-every 10 --keep "$keep") || failed=1
	echo "$out"
	# A recording where every state is trivially empty would prove nothing.
	count_states "$name" 50 "$out"
	rm -rf "$rec"
done
[ "$total" -gt 0 ] || { echo "FAIL: no recordings under fixtures/crash"; exit 1; }
echo "crash smoke: $total crash states checked offline, $([ $failed = 0 ] && echo no || echo some) failures"
exit $failed
