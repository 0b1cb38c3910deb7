#!/usr/bin/env bash
# The mutant gate: broken modules and decisions that the suite must catch.
#
# Each tests/mutants/*.mutant is a patch that makes one known mistake (its
# "# mistake:" line), with the tests that must catch it ("# tests:"). For
# each, a copy of the tree (tracked and untracked files, as they are) gets
# the patch, and its tests run against the copy: a mutant is caught when at
# least one of them fails. One that survives is a hole in the suite, and
# this script fails, naming it.
#
#   tests/mutants/run.sh BUILD_DIR              every mutant
#   tests/mutants/run.sh BUILD_DIR NAME...      these (the file name without .mutant)
#
# Test kinds:
#   fuzz:fuzz_replay   the replay decision's fuzzer (header only, built here),
#                      over its seed corpus and MUTANT_FUZZ_RUNS more inputs
#   vm:SCENARIO        the mutant's kmod/ built, the scenario run on it
#                      (tests/vm/run-all.sh; a skip is not a catch)
#   unit:TEST          the mutant tree's GoogleTest program TEST (tests/unit/TEST.cpp),
#                      built with its library (a few minutes) and run
#   crash:MODE         a dm-log-writes recording of the mutant module
#                      (tests/crash/record.sh wbkit MODE, MUTANT_CRASH_OPS
#                      stamped writes) and every crash state of it checked
#                      offline by wbcrash: a power cut that drops what was
#                      not flushed, torn in any order. A mutant of lib/
#                      (wbctl's sequence: modes detach and replace-cache)
#                      gets the guest's wbctl and wbstat built from the
#                      mutant tree (a few minutes: the library). Every
#                      device of the recording is its own flush domain
#                      (wbcrash: a flush of one makes nothing on another
#                      durable). MODE+record: the table sets
#                      update_sb_record_interval 1, so the superblock
#                      record is written while the workload runs;
#                      MODE+record+slow: and the backing device is behind
#                      dm-delay (500 ms), so writeback batches last long
#                      enough for the record to be written during one
#   powercut:MODE      tests/crash/powercut.sh with the mutant module (and,
#                      for a mutant of lib/, the mutant tree's wbctl and
#                      wbreplay), POWERCUT_MODE=MODE: real power cuts with
#                      a volatile cache per disk; a cut that lost an
#                      acknowledged write is a catch
# A patch that no longer applies is an error: update the mutant.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:?usage: $0 BUILD_DIR [MUTANT...]}")
shift
fuzz_runs=${MUTANT_FUZZ_RUNS:-200000}
crash_ops=${MUTANT_CRASH_OPS:-240}

mutants=()
if [ $# -gt 0 ]; then
	for name in "$@"; do mutants+=("$root/tests/mutants/$name.mutant"); done
else
	mutants=("$root"/tests/mutants/*.mutant)
fi

work=$(mktemp -d "${TMPDIR:-/var/tmp}/wbkit-mutants.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A copy of the tree as it is (the Makefile's deb target does the same).
copy_tree() {
	mkdir -p "$1"
	git -C "$root" ls-files -z --cached --others --exclude-standard |
		(cd "$root" && tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$1"
}

# tools_for TREE LOG TARGET...: prints where the guest's and host's tools
# come from: the build directory, or for a mutant of lib/ the mutant tree's
# own build of TARGETs (a few minutes: the library). Fails when it does not build.
tools_for() {
	local tree=$1 log=$2
	shift 2
	if ! grep -q '^+++ b/lib/' "$mutant"; then
		echo "$build"
		return 0
	fi
	{ cmake -S "$tree" -B "$tree/build" -DWBKIT_PYTHON=OFF >/dev/null &&
		cmake --build "$tree/build" -j "${JOBS:-2}" --target "$@"; } >>"$log" 2>&1 || return 1
	echo "$tree/build"
}

# run_test TREE KIND:NAME LOG -> 0 passed, 1 failed (caught), 2 did not run
run_test() {
	local tree=$1 kind=${2%%:*} name=${2#*:} log=$3 rc=0
	case $kind in
	fuzz)
		[ "$name" = fuzz_replay ] || { echo "unknown fuzz target $name" >>"$log"; return 2; }
		clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,undefined -fno-sanitize-recover=undefined \
			-I"$tree/format" "$tree/tests/fuzz/fuzz_replay.cpp" -o "$tree/fuzz_replay" >>"$log" 2>&1 ||
			{ echo "the fuzzer does not build" >>"$log"; return 2; }
		mkdir -p "$tree/corpus"
		cp "$tree"/tests/fuzz/corpus/replay/* "$tree/corpus/"
		(cd "$tree" && ./fuzz_replay -runs="$fuzz_runs" corpus >>"$log" 2>&1) || rc=$?
		[ "$rc" = 0 ] && return 0
		return 1
		;;
	unit)
		{ cmake -S "$tree" -B "$tree/build" -DWBKIT_PYTHON=OFF >/dev/null &&
			cmake --build "$tree/build" -j "${JOBS:-2}" --target "$name"; } >>"$log" 2>&1 ||
			{ echo "the mutant's $name does not build" >>"$log"; return 2; }
		"$tree/build/tests/unit/$name" --gtest_brief=1 >>"$log" 2>&1 || rc=$?
		[ "$rc" = 0 ] && return 0
		return 1
		;;
	vm)
		make -s -C "$tree/kmod" >>"$log" 2>&1 || { echo "the mutant module does not build" >>"$log"; return 2; }
		VM_WBKIT_KO="$tree/kmod/dm-wbkit.ko" VM_WORK="$work/vm" \
			"$tree/tests/vm/run-all.sh" "$build" "$name" >>"$log" 2>&1 || rc=$?
		grep -q "^PASS $name" "$log" && return 0
		grep -q "^FAIL $name" "$log" && return 1
		return 2
		;;
	crash)
		make -s -C "$tree/kmod" >>"$log" 2>&1 || { echo "the mutant module does not build" >>"$log"; return 2; }
		local tools ops=$crash_ops table_args= delay_ms=0
		case $name in *+slow) name=${name%+slow}; delay_ms=500 ;; esac
		case $name in *+record) name=${name%+record}; table_args="2 update_sb_record_interval 1" ;; esac
		tools=$(tools_for "$tree" "$log" wbctl wbstat) || { echo "the mutant's wbctl does not build" >>"$log"; return 2; }
		# The wbctl modes stop on their own once wbctl is done: CRASH_OPS is their cap.
		# Mode both takes record.sh's default (empty), which wraps its ring.
		case $name in detach | replace-cache) ops=1600 ;; both) ops= ;; esac
		WBKIT_BUILD_DIR="$tools" VM_WBKIT_KO="$tree/kmod/dm-wbkit.ko" VM_WORK="$work/vm" CRASH_OPS="$ops" \
			CRASH_TABLE_ARGS="$table_args" CRASH_BACKING_DELAY_MS="$delay_ms" \
			bash "$tree/tests/crash/record.sh" wbkit "$name" "$tree/rec" >>"$log" 2>&1 || return 2
		"$build/tests/support/wbcrash" "$tree/rec" --subsets 8 --torn 8 --keep "$tree/keep" >"$tree/wbcrash.out" 2>&1 || rc=$?
		cat "$tree/wbcrash.out" >>"$log"
		rm -rf "$tree/rec"
		# A state that lost acknowledged writes is a catch; any other error is not.
		grep -Eq "failures=[1-9]" "$tree/wbcrash.out" && return 1
		[ "$rc" = 0 ] && return 0
		return 2
		;;
	powercut)
		make -s -C "$tree/kmod" >>"$log" 2>&1 || { echo "the mutant module does not build" >>"$log"; return 2; }
		local pc_tools
		pc_tools=$(tools_for "$tree" "$log" wbctl wbstat wbreplay) ||
			{ echo "the mutant's tools do not build" >>"$log"; return 2; }
		WBKIT_BUILD_DIR="$pc_tools" VM_WBKIT_KO="$tree/kmod/dm-wbkit.ko" VM_WORK="$work/vm" POWERCUT_MODE="$name" \
			POWERCUT_KEEP="$tree/powercut" bash "$tree/tests/crash/powercut.sh" "$build" >"$tree/powercut.out" 2>&1 || rc=$?
		cat "$tree/powercut.out" >>"$log"
		# A cut that lost acknowledged writes is a catch; any other failure is not.
		grep '^powercut: .* lost kernel=' "$tree/powercut.out" | grep -qv 'lost kernel=0 offline=0$' && return 1
		[ "$rc" = 0 ] && return 0
		return 2
		;;
	esac
	echo "unknown test kind $kind" >>"$log"
	return 2
}

caught=0 survived=0 broken=0
survivors=()
for m in "${mutants[@]}"; do
	name=$(basename "$m" .mutant)
	[ -f "$m" ] || { echo "ERROR $name: no such mutant ($m)"; broken=$((broken + 1)); continue; }
	mistake=$(sed -n 's/^# mistake: //p' "$m")
	read -r -a tests <<<"$(sed -n 's/^# tests: //p' "$m")"
	tree=$work/$name
	log=$work/$name.log
	mutant=$m
	copy_tree "$tree"
	if ! patch -s -p1 -d "$tree" <"$m" >"$log" 2>&1; then
		echo "ERROR $name: the patch no longer applies; update tests/mutants/$name.mutant"
		sed 's/^/    /' "$log"
		broken=$((broken + 1))
		continue
	fi
	by="" ran=""
	for t in "${tests[@]}"; do
		start=$(date +%s)
		rc=0
		run_test "$tree" "$t" "$log" || rc=$?
		ran="$ran $t($(($(date +%s) - start))s)"
		if [ "$rc" = 1 ]; then
			by=$t
			break
		fi
		[ "$rc" = 2 ] && ran="$ran:not-run"
	done
	if [ -n "$by" ]; then
		echo "CAUGHT   $name by $by: $mistake"
		caught=$((caught + 1))
	else
		echo "SURVIVED $name (ran:$ran): $mistake"
		tail -n 5 "$log" | sed 's/^/    /'
		survived=$((survived + 1))
		survivors+=("$name")
	fi
	rm -rf "$tree"
done
echo "mutants: $caught passed, $((survived + broken)) failed"
if [ "$survived" -gt 0 ]; then
	echo "holes in the suite: ${survivors[*]}"
fi
[ "$survived" = 0 ] && [ "$broken" = 0 ]
