#!/usr/bin/env bash
# The power cut of make test: the module as built now, recorded with
# dm-log-writes (record.sh, one short stamped workload in each layout), every
# crash state of each recording checked offline by wbcrash (a cut at every
# flush, plain writes in any subset, writes torn in any sector order: what
# was not flushed may be lost, nothing acknowledged may be), and the kernel
# constructing on a sample of those states (kernel-check.sh). The committed
# recordings (crash_smoke) are of older modules; this one is of the module
# under test, so a write that loses its FUA or a flush acknowledged early
# fails here (tests/mutants: no-fua-on-segment-write,
# flush-acked-before-segment-written). The third layout, cache-writeback,
# logs the cache alone while the target writes back: its states check that
# the superblock record never runs ahead of the log (tests/mutants:
# writeback-of-unflushed-segments); the backing device is not logged there,
# so its data has no expected image for the kernel check. The last two,
# detach and replace-cache, run `wbctl detach` and `wbctl replace-cache`
# in the middle of the workload, backing and caches under one log: in every
# crash state the device the rule of wbctl(8) (CRASHES) names must hold
# every fsynced write (tests/mutants: wbctl-wipe-after-resume,
# wbctl-wipe-before-writeback).
#
#   tests/crash/quick.sh BUILD_DIR
# CRASH_QUICK_OPS: stamped writes per recording (default 240; mode both
# takes record.sh's 1,096, which its ring needs to wrap, cache-writeback
# 576, four pairs of its groups; for detach
# and replace-cache CRASH_QUICK_CTL_GROUPS groups of 8 before wbctl starts
# and as many after it ends, default 6). CRASH_QUICK_MODES: the layouts
# (default all five). A failing state's images stay in
# BUILD_DIR/crash-quick-failures/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:?usage: $0 BUILD_DIR}")
wbcrash=$build/tests/support/wbcrash
[ -x "$wbcrash" ] || { echo "no $wbcrash: build first"; exit 1; }
ops=${CRASH_QUICK_OPS:-240}
out=$(mktemp -d "${TMPDIR:-/var/tmp}/wbkit-crash-quick.XXXXXX")
trap 'rm -rf "$out"' EXIT

ctl_groups=${CRASH_QUICK_CTL_GROUPS:-6}
modes=${CRASH_QUICK_MODES:-cache both cache-writeback detach replace-cache}

passed=0 failed=0 skipped=0
for mode in $modes; do
	rc=0
	case $mode in
	detach | replace-cache)
		CRASH_CTL_AFTER=$ctl_groups CRASH_CTL_TAIL=$ctl_groups \
			bash "$here/record.sh" wbkit "$mode" "$out/rec-$mode" >"$out/record-$mode.log" 2>&1 || rc=$?
		;;
	*)
		# Mode both takes record.sh's default (empty: 1,096 writes into
		# four slots), which its ring needs to wrap for writeback's
		# backing flush to be in the states; cache-writeback four pairs
		# of an fsynced group (8) and one that ends in drop_caches (136:
		# record.sh), each of the latter sealing a segment no append made
		# durable.
		# Mode both discards too (5 % of its ops, 1 to 8 blocks each): a
		# durable discard must read zeros, never older data.
		mode_ops=$ops discard_pct=0
		case $mode in both) mode_ops= discard_pct=${CRASH_QUICK_DISCARD_PCT:-5} ;; cache-writeback) mode_ops=576 ;; esac
		CRASH_OPS=$mode_ops CRASH_DISCARD_PCT=$discard_pct \
			bash "$here/record.sh" wbkit "$mode" "$out/rec-$mode" >"$out/record-$mode.log" 2>&1 || rc=$?
		;;
	esac
	if [ "$rc" = 77 ] && [ "${WBKIT_REQUIRE_ALL_TESTS:-0}" != 1 ]; then
		echo "SKIP wbkit $mode: $(tail -n 1 "$out/record-$mode.log")"
		skipped=$((skipped + 1))
		continue
	fi
	if [ "$rc" != 0 ]; then
		echo "FAIL record wbkit $mode (exit $rc):"
		tail -n 20 "$out/record-$mode.log" | sed 's/^/    /'
		failed=$((failed + 1))
		continue
	fi
	rc=0
	# The wbctl recordings are short (about 300 states): more states per
	# window, and more of them in the kernel (a share per device the rule
	# can choose), for a few seconds more.
	per_window=8 emit_max=8
	case $mode in detach | replace-cache) per_window=16 emit_max=12 ;; esac
	res=$("$wbcrash" "$out/rec-$mode" --subsets $per_window --torn $per_window --emit "$out/emit-$mode" \
		--emit-max $emit_max --emit-fraction 0.05 --recovery-every 10 \
		--keep "$build/crash-quick-failures/$mode" 2>&1) || rc=$?
	echo "$res" | tail -n 4
	if [ "$rc" != 0 ] || ! echo "$res" | grep -q " failures=0 "; then
		echo "FAIL wbcrash wbkit $mode (exit $rc)"
		failed=$((failed + 1))
		continue
	fi
	if [ "$mode" = cache-writeback ]; then
		echo "PASS crash states of wbkit $mode (the cache's log)"
		passed=$((passed + 1))
		continue
	fi
	rc=0
	res=$(bash "$here/kernel-check.sh" wbkit "$out/emit-$mode" 2>&1) || rc=$?
	echo "$res" | tail -n 3
	if [ "$rc" != 0 ]; then
		echo "FAIL the kernel on wbkit $mode's crash states (exit $rc)"
		failed=$((failed + 1))
		continue
	fi
	echo "PASS crash states of wbkit $mode"
	passed=$((passed + 1))
done
echo "crash-quick: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
