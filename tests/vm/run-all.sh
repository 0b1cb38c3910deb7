#!/usr/bin/env bash
# Runs every tests/vm/scenarios/*.sh (exit 0 pass, 77 skip, else fail) and
# prints one line per scenario and a summary. A skip fails the suite unless
# tests/vm/skips-allowed lists the scenario (or WBKIT_VM_SKIPS_OK=1).
# Usage: run-all.sh BUILD_DIR [SCENARIO...]
# The scenarios get BUILD_DIR as WBKIT_BUILD_DIR (for the host tools) and
# write their console logs under BUILD_DIR/vm-logs (or VM_LOG_DIR if set).
# SCENARIO names (e.g. 00-upstream-smoke) run only those. WBKIT_VM_QUICK=1
# (make test) leaves out the scenarios tests/vm/long-scenarios lists.
set -euo pipefail

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [SCENARIO...]" >&2
	exit 2
fi
mkdir -p "$1"
WBKIT_BUILD_DIR=$(cd "$1" && pwd)
shift
export WBKIT_BUILD_DIR
export VM_LOG_DIR=${VM_LOG_DIR:-$WBKIT_BUILD_DIR/vm-logs}
mkdir -p "$VM_LOG_DIR"

source "$(dirname "$0")/lib.sh"

scenarios=()
long_left_out=0
# A name there that is no scenario (renamed, removed) fails: it would leave
# out nothing and still read as a choice made.
while read -r listed _; do
	case $listed in '' | '#'*) continue ;; esac
	[ -f "$VM_DIR/scenarios/$listed.sh" ] || {
		echo "tests/vm/long-scenarios names $listed, which is no scenario of $VM_DIR/scenarios" >&2
		exit 2
	}
done <"$VM_DIR/long-scenarios"
if [ $# -eq 0 ]; then
	for scenario in "$VM_DIR"/scenarios/*.sh; do
		if [ "${WBKIT_VM_QUICK:-0}" = 1 ] &&
			grep -q "^$(basename "$scenario" .sh) " "$VM_DIR/long-scenarios"; then
			long_left_out=$((long_left_out + 1))
			continue
		fi
		scenarios+=("$scenario")
	done
else
	for name in "$@"; do
		name=$(basename "$name" .sh)
		[ -f "$VM_DIR/scenarios/$name.sh" ] || { echo "no scenario $name in $VM_DIR/scenarios" >&2; exit 2; }
		scenarios+=("$VM_DIR/scenarios/$name.sh")
	done
fi

# Only a machine that cannot run qemu at all skips the suite, and not when
# the suite is required (make test-vm sets WBKIT_VM_REQUIRED=1: its
# dependencies are installed, so a missing one is a failure, not a pass).
if ! why=$(vm_available) || ! qemu-system-x86_64 --version >/dev/null 2>&1; then
	if [ "${WBKIT_VM_REQUIRED:-0}" = 1 ]; then
		echo "VM tests cannot run: ${why:-qemu-system-x86_64 does not run}"
		echo "0 passed, 1 failed, 0 skipped"
		exit 1
	fi
	echo "VM tests skipped: ${why:-qemu-system-x86_64 does not run}"
	exit 0
fi

# A skip is a failure unless tests/vm/skips-allowed names the scenario with
# its reason (or WBKIT_VM_SKIPS_OK=1, for a machine without some tool): a
# check that did not run must not read as one that passed.
skip_allowed() {
	[ "${WBKIT_VM_SKIPS_OK:-0}" = 1 ] && return 0
	grep -q "^$1 always " "$VM_DIR/skips-allowed" && return 0
	# A run on a kernel upstream does not build on says so (VM_UPSTREAM_WHY).
	[ -n "${VM_UPSTREAM_WHY:-}" ] && grep -q "^$1 without-upstream " "$VM_DIR/skips-allowed"
}
vm_prepare

passed=0 failed=0 skipped=0
suite_start=$SECONDS
for scenario in "${scenarios[@]}"; do
	[ -e "$scenario" ] || continue
	name=$(basename "$scenario" .sh)
	out=$VM_LOG_DIR/$name.out
	start=$SECONDS
	rc=0
	bash "$scenario" >"$out" 2>&1 </dev/null || rc=$?
	took=$((SECONDS - start))
	case $rc in
	0)
		passed=$((passed + 1))
		# A scenario that ran only some of its parts says why in a
		# "PARTIAL: <reason>" line (wbkit_upstream_parts).
		partial=$(sed -n 's/^PARTIAL: //p' "$out" | tail -n 1)
		echo "PASS $name (${took}s)${partial:+ partial: $partial}"
		;;
	77)
		if skip_allowed "$name"; then
			skipped=$((skipped + 1))
			echo "SKIP $name (${took}s): $(tail -n 1 "$out")"
		else
			failed=$((failed + 1))
			echo "FAIL $name (${took}s, skipped, not in tests/vm/skips-allowed): $(tail -n 1 "$out")"
		fi
		;;
	*)
		failed=$((failed + 1))
		echo "FAIL $name (${took}s, exit $rc), output in $out:"
		tail -n 20 "$out" | sed 's/^/    /'
		;;
	esac
done

echo "VM suite took $((SECONDS - suite_start))s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$long_left_out" = 0 ] ||
	echo "$long_left_out long scenarios left out (WBKIT_VM_QUICK=1, tests/vm/long-scenarios): make test-vm runs them"
[ "$failed" = 0 ]
