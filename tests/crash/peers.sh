#!/usr/bin/env bash
# Durability after a power cut, for every cache the kernel has and for the
# writeboost targets: each records the same stamped workload under
# dm-log-writes (record.sh, mode both: one log orders the writes of the
# backing and the cache device; a cache small enough to wrap), wbcrash
# --no-replay enumerates the crash states of the log (a cut at every flush,
# unflushed writes in any subset, a write torn in any sector order) and
# samples them evenly, and peer-check.sh builds the cache on each sampled
# state in the kernel, reads the whole device back and counts the writes
# acknowledged by an fsync that are gone. Prints a table: per cache, states
# checked, states losing fsynced writes, writes lost (summed over the
# states), and writes it to bench/results/crash-peers-<date>.md.
#
# A peer losing writes is a finding, reported; dm-wbkit losing one is a
# failure (exit 1), as is a recording or a check that did not complete.
#
#   tests/crash/peers.sh BUILD_DIR
# CRASH_PEERS ("wbkit upstream writecache bcache dmcache"), CRASH_PEERS_STATES
# (states checked per cache, 100), CRASH_PEERS_SEED (11), CRASH_OPS (1440
# stamped writes, an fsync after every CRASH_FLUSH_EVERY=8), CRASH_RESULTS
# (bench/results; "-" writes no file), CRASH_PEERS_KEEP=1 keeps the
# recordings (in CRASH_PEERS_WORK, default a directory under /var/tmp).
#
# Every cache writes 4 KiB blocks (CRASH_PARTIAL_PCT=0: dm-writecache's
# 4 KiB blocks refuse 512-byte direct writes) over a 16 MiB device. Cache
# sizes, each well below the 5.6 MiB written: dm-wbkit and upstream 6 MiB
# (1 MiB superblock, 10 segments of 512 KiB); dm-writecache 2 MiB; bcache
# 4 MiB of 4 KiB buckets (the kernel refuses fewer than 513 buckets);
# dm-cache 1 MiB of metadata and 2 MiB of data in 32 KiB blocks.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(realpath "${1:?usage: $0 BUILD_DIR}")
source "$here/../vm/lib.sh"
wbcrash=$build/tests/support/wbcrash
[ -x "$wbcrash" ] || { echo "no $wbcrash: build first (cmake --build $build --target wbcrash)"; exit 1; }

peers=${CRASH_PEERS:-wbkit upstream writecache bcache dmcache}
nr_states=${CRASH_PEERS_STATES:-100}
seed=${CRASH_PEERS_SEED:-11}
export CRASH_OPS=${CRASH_OPS:-1440}
export CRASH_FLUSH_EVERY=${CRASH_FLUSH_EVERY:-8}
export CRASH_REGION_BYTES=$((16 << 20))
export CRASH_PARTIAL_PCT=0
export CRASH_BCACHE_BUCKET=4k
export CRASH_DMCACHE_META_SECTORS=2048
results=${CRASH_RESULTS:-$root/bench/results}
work=${CRASH_PEERS_WORK:-$(mktemp -d /var/tmp/wbkit-crash-peers.XXXXXX)}
mkdir -p "$work"
[ "${CRASH_PEERS_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

cache_bytes_of() {
	case $1 in
	wbkit | upstream) echo $((6 << 20)) ;;
	writecache) echo $((2 << 20)) ;;
	bcache) echo $((4 << 20)) ;;
	dmcache) echo $((3 << 20)) ;;
	esac
}
label_of() {
	case $1 in
	wbkit) echo dm-wbkit ;;
	upstream) echo "dm-writeboost (upstream)" ;;
	writecache) echo "dm-writecache (SSD mode)" ;;
	bcache) echo "bcache (writeback)" ;;
	dmcache) echo "dm-cache (smq, writeback)" ;;
	esac
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
failed=0
rows=()
details=()
for kind in $peers; do
	rec=$work/rec-$kind
	echo "== $kind: recording"
	rc=0
	CRASH_CACHE_BYTES=$(cache_bytes_of "$kind") bash "$here/record.sh" "$kind" both "$rec" "$seed" >"$work/record-$kind.log" 2>&1 || rc=$?
	if [ "$rc" = 77 ]; then
		rows+=("| $(label_of "$kind") | not run: $(tail -n 1 "$work/record-$kind.log") | | | | | | |")
		continue
	fi
	if [ "$rc" != 0 ]; then
		echo "FAIL record $kind (exit $rc):"
		tail -n 20 "$work/record-$kind.log" | sed 's/^/    /'
		rows+=("| $(label_of "$kind") | recording failed: $(grep -m1 'WB: fail=' "$work/record-$kind.log" | cut -c1-200) | | | | | | |")
		failed=1
		continue
	fi
	tail -n 1 "$work/record-$kind.log"
	# Every state once, to sample nr_states of them evenly over the log.
	total=$("$wbcrash" "$rec" --no-replay | sed -n 's/^states_checked_a=\([0-9]*\).*/\1/p')
	fraction=$(awk -v n="$nr_states" -v t="$total" 'BEGIN { f = t ? n / t : 1; if (f > 1) f = 1; printf "%.6f", f }')
	emit=(--seed "$seed" --emit "$rec/emit" --emit-max "$nr_states" --emit-fraction "$fraction")
	case $kind in
	wbkit | upstream)
		# The writeboost format is also replayed offline by the library on
		# every state of the log (what wbreplay does): all states, not a
		# sample, and the sample's torn states whose replay skipped a torn
		# rewrite come out as kind torn-rewrite (the known loss of
		# upstream's replay, docs/comparison.md).
		offline=$("$wbcrash" "$rec" "${emit[@]}" --keep "$work/offline-failures-$kind" | tail -n 1) || true
		details+=("$(label_of "$kind"): the library's offline replay on every state: $offline")
		echo "offline: $offline"
		if [ "$kind" = wbkit ] && ! grep -q " failures=0 " <<<"$offline"; then
			echo "FAIL the offline replay of dm-wbkit's crash states"
			failed=1
		fi
		;;
	*) "$wbcrash" "$rec" --no-replay "${emit[@]}" | tail -n 1 ;;
	esac
	echo "== $kind: building the cache on $(wc -l <"$rec/emit/manifest.tsv") of $total crash states"
	rc=0
	bash "$here/peer-check.sh" "$kind" "$rec/emit" "$rec" >"$work/check-$kind.log" 2>&1 || rc=$?
	grep '^peer ' "$work/check-$kind.log" | tail -n 12 || true
	summary=$(grep "^peer $kind: checked=" "$work/check-$kind.log" | tail -n 1 || true)
	if [ "$rc" != 0 ] || [ -z "$summary" ]; then
		echo "FAIL the check of $kind (exit $rc):"
		tail -n 20 "$work/check-$kind.log" | sed 's/^/    /'
		rows+=("| $(label_of "$kind") | check incomplete (exit $rc) | | | | | | |")
		failed=1
		continue
	fi
	field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$summary"; }
	checked=$(field checked) losing=$(field losing) lost=$(field writes_lost)
	not_built=$(field not_built) not_built_acked=$(field not_built_acked)
	foreign=$(field foreign) foreign_sectors=$(field foreign_sectors)
	rows+=("| $(label_of "$kind") | $(cache_bytes_of "$kind" | awk '{ printf "%g MiB", $1 / 1048576 }') | $total | $checked | $losing | $lost | $foreign ($foreign_sectors sectors) | $not_built ($not_built_acked with acknowledged writes) |")
	while read -r line; do details+=("$(label_of "$kind"): ${line#peer "$kind": }"); done < <(grep -E "^peer $kind: state " "$work/check-$kind.log" || true)
	if grep -q "^peer $kind: the guest kernel reported" "$work/check-$kind.log"; then
		details+=("$(label_of "$kind"): the guest kernel reported: $(grep -A1 "the guest kernel reported" "$work/check-$kind.log" | tail -n 1 | sed 's/^ *//')")
	fi
	if [ "$kind" = wbkit ] && [ "$losing" != 0 ]; then
		echo "FAIL dm-wbkit lost fsynced writes on $losing crash states"
		failed=1
	fi
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

report=$work/report.md
{
	echo "# Crash durability of the kernel's caches, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "\`tests/crash/peers.sh\` at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), load average $load_start at the start, $load_end at the end."
	echo "Workload: wbstamp seed $seed, $CRASH_OPS writes of 4 KiB over a 16 MiB device, an fsync after every $CRASH_FLUSH_EVERY;"
	echo "dm-log-writes under both devices (one log); states: a cut at every flush, unflushed writes in any subset,"
	echo "one write torn in any sector order; $nr_states sampled evenly per cache, the cache built on each in the kernel"
	echo "($VM_KVER under qemu TCG), the whole device read back."
	echo
	echo "| cache | cache size | crash states in the log | states checked | states losing fsynced writes | fsynced writes lost (sum) | other states returning data never written there | not built on the state |"
	echo "|---|---|---|---|---|---|---|---|"
	printf '%s\n' "${rows[@]}"
	echo
	echo "A write is lost when an fsync that returned before the state covered it and one of its sectors holds"
	echo "neither it nor a later write of that sector. A cache that cannot be built on a state with acknowledged"
	echo "writes loses all of them. A peer's losses are a finding; dm-wbkit's would be a failure. Data never"
	echo "written: a sector where no acknowledged write went that holds neither zeros nor a write of the workload"
	echo "that may have been issued by then (counted apart when the state lost no write)."
	if [ ${#details[@]} -gt 0 ]; then
		echo
		echo "Details (each state that lost writes; the offline replay of the writeboost format):"
		echo
		printf -- '- %s\n' "${details[@]}"
	fi
} >"$report"
cat "$report"
if [ "$results" != - ]; then
	mkdir -p "$results"
	out=$results/crash-peers-$(date -u +%Y-%m-%d-%H%M).md
	cp "$report" "$out"
	echo "table written to $out"
fi
exit $failed
