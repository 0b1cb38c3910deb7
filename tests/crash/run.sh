#!/usr/bin/env bash
# The full crash-consistency run (make test-crash):
#  1. records, in the VM, a stamped workload on the writeboost target with
#     dm-log-writes under the cache (mode cache) and under both devices
#     (mode both), for dm-wbkit and for the upstream module;
#  2. (a) enumerates every recording's crash states with wbcrash and checks
#     each offline (the library's replay, what wbreplay runs);
#  3. (b) boots dm-wbkit on a sample of the states of every recording: its
#     logical device must equal (a)'s image byte for byte;
#  4. (c) boots the upstream module on the states recorded under upstream:
#     upstream's own replay must equal (a)'s (wbreplay's) image, except on
#     states whose replay skipped a torn rewrite (docs/FORMAT.md, replay
#     step 2), where upstream stops and loses the log after it: those are
#     counted apart (its defect), not as failures.
# Then the same three checks on the recordings of
#  - recovery: the target constructing on the final state of each stamped
#    recording of the first seed (its replay writes the backing device),
#    then writing everything back (record-continue.sh): power cuts during
#    recovery;
#  - midlog: the final state of the first `both` recording with a damaged
#    segment in the middle of its log, so that the replay stops there,
#    then new stamped writes with flushes: crash -> replay that stops
#    mid-log -> new writes -> crash; the replay is the target's at
#    construction (upstream only: dm-wbkit refuses a log that stops
#    mid-way), or the offline one of wbreplay --mark-clean first;
#  - ext4: mkfs.ext4 and fsynced files on the target (record-ext4.sh),
#    each state checked with e2fsck and debugfs (ext4-check.sh);
#  - wbctl: `wbctl detach` and `wbctl replace-cache` in the middle of the
#    stamped workload, backing and caches under one log (record.sh modes
#    detach and replace-cache), each state on the device the rule of
#    wbctl(8) (CRASHES) names, for every seed.
# Prints the workloads, the states checked per check and the failures, per
# kind of recording and in total.
#   run.sh BUILD_DIR
# Environment: CRASH_SEEDS (workload seeds, default "11 12"), CRASH_SUBSETS,
# CRASH_TORN (states per window), CRASH_EMIT (kernel-checked states per
# recording), CRASH_REUSE=1 (keep existing recordings), CRASH_KINDS (default
# "stamped recovery midlog ext4 wbctl"), CRASH_CTL_TARGETS (the targets of
# kind wbctl, default "wbkit").
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?build dir}" && pwd)
wbcrash=$build/tests/support/wbcrash
[ -x "$wbcrash" ] || { echo "no $wbcrash: build first"; exit 1; }
export VM_LOG_DIR=$build/vm-logs
out=$build/crash
mkdir -p "$out/rec" "$out/emit" "$out/work"
keep=$out/failures
rm -rf "$keep"
# e2fsck writes and syncs the image of every ext4 state: memory is much faster.
scratch=$out/work
[ -d /dev/shm ] && [ -w /dev/shm ] && scratch=$(mktemp -d /dev/shm/wbcrash.XXXXXX) && trap 'rm -rf "$scratch"' EXIT

seeds=${CRASH_SEEDS:-11 12}
first_seed=${seeds%% *}
subsets=${CRASH_SUBSETS:-16}
torn=${CRASH_TORN:-16}
emit=${CRASH_EMIT:-60}
kinds=${CRASH_KINDS:-stamped recovery midlog ext4 wbctl}
started=$SECONDS
failures=0 skipped=() upstream_rewrite_losses=0 upstream_cross_device_losses=0
declare -A workloads=() states_a=() states_b=() states_c=() kind_failures=() kind_seconds=()
for kind in $kinds; do
	workloads[$kind]=0 states_a[$kind]=0 states_b[$kind]=0 states_c[$kind]=0 kind_failures[$kind]=0 kind_seconds[$kind]=0
done

fail() { # kind [count]
	failures=$((failures + ${2:-1}))
	kind_failures[$1]=$((${kind_failures[$1]} + ${2:-1}))
}

wanted() { [[ " $kinds " == *" $1 "* ]]; }

# record KIND NAME COMMAND...: runs the recording command unless reused;
# returns 0 when the recording is there to check.
record() {
	local kind=$1 name=$2 rc=0 t=$SECONDS
	shift 2
	if [ "${CRASH_REUSE:-0}" = 1 ] && [ -f "$out/rec/$name/meta.kv" ]; then return 0; fi
	"$@" || rc=$?
	if [ $rc = 77 ]; then skipped+=("$name"); return 1; fi
	if [ $rc != 0 ]; then
		echo "FAIL record $name"
		fail "$kind"
		return 1
	fi
	echo "recorded $name in $((SECONDS - t))s"
	kind_seconds[$kind]=$((${kind_seconds[$kind]} + SECONDS - t))
}

# check KIND NAME TARGET SUBSETS TORN [wbcrash options...]: checks a
# (offline), then b and c in the VM on the emitted sample.
check() {
	local kind=$1 name=$2 target=$3 rec=$out/rec/$2 res rc n f module t=$SECONDS
	local nr_subsets=$4 nr_torn=$5
	shift 5
	workloads[$kind]=$((${workloads[$kind]} + 1))
	rm -rf "$out/emit/$name"
	rc=0
	res=$("$wbcrash" "$rec" --subsets "$nr_subsets" --torn "$nr_torn" --keep "$keep" \
		--emit "$out/emit/$name" --emit-max "$emit" --emit-fraction 0.03 "$@") || rc=$?
	echo "$res"
	echo "(a) $name took $((SECONDS - t))s"
	n=$(echo "$res" | sed -n 's/^states_checked_a=\([0-9]*\).*/\1/p')
	states_a[$kind]=$((${states_a[$kind]} + ${n:-0}))
	f=$(echo "$res" | sed -n 's/.* failures=\([0-9]*\).*/\1/p')
	# Upstream's states may lose writes only because each device is its
	# own flush domain (an acknowledged flush whose data one device had
	# not flushed, tests/crash/README.md): its defect, reported, when the
	# same states pass with one flush domain for both devices.
	if [ "$target" = upstream ] && [ "${f:-0}" != 0 ]; then
		local one
		one=$("$wbcrash" "$rec" --subsets "$nr_subsets" --torn "$nr_torn" --keep "$keep-one-domain" \
			--one-flush-domain "$@" 2>&1 | sed -n 's/.* failures=\([0-9]*\).*/\1/p') || true
		if [ "${one:-1}" = 0 ]; then
			echo "upstream $name: $f state(s) lose acknowledged writes across the two flush domains only (none with one)"
			upstream_cross_device_losses=$((upstream_cross_device_losses + f))
			f=0 rc=0
		fi
	fi
	fail "$kind" "${f:-0}"
	[ "$rc" != 0 ] && [ "${f:-0}" = 0 ] && fail "$kind" # the replayer check, or an error

	for module in wbkit upstream; do
		[ "$module" = upstream ] && [ "$target" != upstream ] && continue
		rc=0
		res=$(bash "$here/kernel-check.sh" "$module" "$out/emit/$name") || rc=$?
		echo "$res"
		[ $rc = 77 ] && continue
		n=$(echo "$res" | sed -n 's/.*checked=\([0-9]*\) failures=\([0-9]*\).*/\1/p')
		f=$(echo "$res" | sed -n 's/.*checked=\([0-9]*\) failures=\([0-9]*\).*/\2/p')
		u=$(echo "$res" | sed -n 's/.*upstream_rewrite_losses=\([0-9]*\).*/\1/p')
		upstream_rewrite_losses=$((upstream_rewrite_losses + ${u:-0}))
		if [ "$module" = wbkit ]; then
			states_b[$kind]=$((${states_b[$kind]} + ${n:-0}))
		else
			states_c[$kind]=$((${states_c[$kind]} + ${n:-0}))
		fi
		fail "$kind" "${f:-1}"
	done
	kind_seconds[$kind]=$((${kind_seconds[$kind]} + SECONDS - t))
}

for target in wbkit upstream; do
	for mode in cache both; do
		for seed in $seeds; do
			name=$target-$mode-s$seed
			if wanted stamped || { [ "$seed" = "$first_seed" ] && { wanted recovery || wanted midlog; }; }; then
				record stamped "$name" bash "$here/record.sh" "$target" "$mode" "$out/rec/$name" "$seed" || continue
			fi
			wanted stamped || continue
			# Tears in any sector order (wbcrash's default), those that skip a
			# segment's header sector included: the torn-rewrite rule
			# (docs/FORMAT.md, replay step 2) keeps their flushed writes.
			check stamped "$name" "$target" "$subsets" "$torn" --seed "$seed"
		done
	done
done

# Power cuts while the target replays at construction and writes back.
if wanted recovery; then
	for target in wbkit upstream; do
		for mode in cache both; do
			src=$out/rec/$target-$mode-s$first_seed
			[ -f "$src/meta.kv" ] || continue
			name=$target-recover-$mode
			state=$out/work/$name-state
			"$wbcrash" "$src" --save-state final --save-to "$state" >/dev/null || { echo "FAIL saving the final state of $src"; fail recovery; continue; }
			record recovery "$name" bash "$here/record-continue.sh" "$target" "$state" "$out/rec/$name" 0 || continue
			# Few flushes with many writes between them: more subsets per window.
			check recovery "$name" "$target" $((subsets * 4)) "$torn" --seed "$first_seed"
		done
	done
fi

# Crash -> replay that stops mid-log -> new writes -> crash; the replay is the
# target's at construction (midlog) or wbreplay --mark-clean's before the
# target constructs (midlog-wbreplay).
if wanted midlog; then
	for target in wbkit upstream; do
		src=$out/rec/$target-both-s$first_seed
		[ -f "$src/meta.kv" ] || continue
		for how in midlog midlog-wbreplay; do
			# dm-wbkit refuses a log that stops mid-way (scenario 75): the
			# operator recovers offline first, which midlog-wbreplay is.
			[ "$target/$how" = wbkit/midlog ] && continue
			name=$target-$how
			state=$out/work/$name-state
			"$wbcrash" "$src" --save-state "$how" --save-to "$state" || { echo "FAIL saving a mid-log state of $src"; fail midlog; continue; }
			record midlog "$name" bash "$here/record-continue.sh" "$target" "$state" "$out/rec/$name" 160 8 || continue
			check midlog "$name" "$target" "$subsets" "$torn" --seed "$first_seed"
		done
	done
fi

# ext4: e2fsck and the fsynced files on every state.
if wanted ext4; then
	for target in wbkit upstream; do
		name=$target-ext4
		record ext4 "$name" bash "$here/record-ext4.sh" "$target" "$out/rec/$name" || continue
		# About 0.1 to 0.5 s per state (e2fsck twice, debugfs): fewer of them.
		emit=${CRASH_EXT4_EMIT:-20} check ext4 "$name" "$target" $((subsets / 2)) $((torn / 2)) --seed "$first_seed" \
			--state-check "$here/ext4-check.sh" --work-dir "$scratch"
	done
fi

# wbctl detach and replace-cache while the workload writes: every state on
# the device wbctl(8)'s rule names after a crash.
if wanted wbctl; then
	for target in ${CRASH_CTL_TARGETS:-wbkit}; do
		for mode in detach replace-cache; do
			for seed in $seeds; do
				name=$target-$mode-s$seed
				record wbctl "$name" bash "$here/record.sh" "$target" "$mode" "$out/rec/$name" "$seed" || continue
				check wbctl "$name" "$target" "$subsets" "$torn" --seed "$seed"
			done
		done
	done
fi

total_a=0 total_b=0 total_c=0 total_w=0
for kind in $kinds; do
	echo "crash run: $kind: workloads=${workloads[$kind]} states checked: a(offline)=${states_a[$kind]}" \
		"b(kernel dm-wbkit)=${states_b[$kind]} c(upstream vs wbreplay)=${states_c[$kind]}" \
		"failures=${kind_failures[$kind]} time=${kind_seconds[$kind]}s"
	total_w=$((total_w + ${workloads[$kind]}))
	total_a=$((total_a + ${states_a[$kind]}))
	total_b=$((total_b + ${states_b[$kind]}))
	total_c=$((total_c + ${states_c[$kind]}))
done
echo "crash run: workloads=$total_w (kinds: $kinds; stamped seeds: $seeds) skipped=${skipped[*]:-none}"
echo "crash run: states checked: a(offline)=$total_a b(kernel dm-wbkit)=$total_b c(upstream vs wbreplay)=$total_c"
echo "crash run: upstream's states lost acknowledged writes across the two flush domains on $upstream_cross_device_losses state(s) (its defect: tests/crash/README.md, two flush domains)"
echo "crash run: upstream's replay lost the log after a torn rewrite on $upstream_rewrite_losses state(s) (its defect; wbreplay kept them, docs/FORMAT.md replay step 2)"
echo "crash run: failures=$failures time=$((SECONDS - started))s$([ "$failures" = 0 ] || echo " (failing states kept under $keep)")"
[ "$failures" = 0 ]
