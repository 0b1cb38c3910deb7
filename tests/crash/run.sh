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
#     upstream's own replay must equal (a)'s (wbreplay's) image.
# Prints the workloads, the states checked per check and the failures.
#   run.sh BUILD_DIR
# Environment: CRASH_SEEDS (workload seeds, default "11 12"), CRASH_SUBSETS,
# CRASH_TORN (states per window), CRASH_EMIT (kernel-checked states per
# recording), CRASH_REUSE=1 (keep existing recordings).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?build dir}" && pwd)
wbcrash=$build/tests/support/wbcrash
[ -x "$wbcrash" ] || { echo "no $wbcrash: build first"; exit 1; }
export VM_LOG_DIR=$build/vm-logs
out=$build/crash
mkdir -p "$out/rec" "$out/emit"
keep=$out/failures
rm -rf "$keep"

seeds=${CRASH_SEEDS:-11 12}
subsets=${CRASH_SUBSETS:-16}
torn=${CRASH_TORN:-16}
emit=${CRASH_EMIT:-60}
started=$SECONDS
failures=0 states_a=0 states_b=0 states_c=0 workloads=0 skipped=()
unordered_states=0 unordered_lost=0

for target in wbkit upstream; do
	for mode in cache both; do
		for seed in $seeds; do
			name=$target-$mode-s$seed
			rec=$out/rec/$name
			if [ "${CRASH_REUSE:-0}" != 1 ] || [ ! -f "$rec/meta.kv" ]; then
				t=$SECONDS
				rc=0
				bash "$here/record.sh" "$target" "$mode" "$rec" "$seed" || rc=$?
				if [ $rc = 77 ]; then skipped+=("$name"); continue; fi
				if [ $rc != 0 ]; then
					echo "FAIL record $name"
					failures=$((failures + 1))
					continue
				fi
				echo "recorded $name in $((SECONDS - t))s"
			fi
			workloads=$((workloads + 1))
			rm -rf "$out/emit/$name"
			t=$SECONDS
			rc=0
			res=$("$wbcrash" "$rec" --subsets "$subsets" --torn "$torn" --seed "$seed" --keep "$keep" \
				--emit "$out/emit/$name" --emit-max "$emit" --emit-fraction 0.03) || rc=$?
			echo "$res"
			echo "(a) $name took $((SECONDS - t))s"
			n=$(echo "$res" | sed -n 's/^states_checked_a=\([0-9]*\).*/\1/p')
			states_a=$((states_a + ${n:-0}))
			f=$(echo "$res" | sed -n 's/.* failures=\([0-9]*\).*/\1/p')
			failures=$((failures + ${f:-0}))
			[ "$rc" != 0 ] && [ "${f:-0}" = 0 ] && failures=$((failures + 1)) # the replayer check, or an error

			# Known limitation, reported apart (tests/crash/README.md, fixtures/crash-findings/):
			# tears that skip a segment's header sector.
			res=$("$wbcrash" "$rec" --subsets 0 --torn 4 --torn-any-order --seed "$seed" --recovery-every 0 \
				--max-failures 0 --keep "$keep") || true
			n=$(echo "$res" | sed -n 's/^states_checked_a=\([0-9]*\).*/\1/p')
			f=$(echo "$res" | sed -n 's/.* failures=\([0-9]*\).*/\1/p')
			unordered_states=$((unordered_states + ${n:-0}))
			unordered_lost=$((unordered_lost + ${f:-0}))

			for module in wbkit upstream; do
				[ "$module" = upstream ] && [ "$target" != upstream ] && continue
				rc=0
				res=$(bash "$here/kernel-check.sh" "$module" "$out/emit/$name") || rc=$?
				echo "$res"
				[ $rc = 77 ] && continue
				n=$(echo "$res" | sed -n 's/.*checked=\([0-9]*\) failures=\([0-9]*\).*/\1/p')
				f=$(echo "$res" | sed -n 's/.*checked=\([0-9]*\) failures=\([0-9]*\).*/\2/p')
				if [ "$module" = wbkit ]; then states_b=$((states_b + ${n:-0})); else states_c=$((states_c + ${n:-0})); fi
				failures=$((failures + ${f:-1}))
			done
		done
	done
done

echo "crash run: workloads=$workloads (stamped, seeds: $seeds) skipped=${skipped[*]:-none}"
echo "crash run: states checked: a(offline)=$states_a b(kernel dm-wbkit)=$states_b c(upstream vs wbreplay)=$states_c"
echo "crash run: known limitation, tears that skip sectors: $unordered_lost of $unordered_states states lose acknowledged writes (fixtures/crash-findings/)"
echo "crash run: failures=$failures time=$((SECONDS - started))s${failures:+ (failing states kept under $keep)}"
[ "$failures" = 0 ]
