#!/usr/bin/env bash
# The kernel check of crash states for any cache, by the stamp rule alone:
# boots once with the states `wbcrash --no-replay --emit` sampled from a
# recording (tests/crash/record.sh), builds the cache on each state as it
# would be built after a reboot (wb_cache_create without format: the
# writeboost targets replay their log, dm-writecache and dm-cache read their
# metadata, bcache registers both devices), reads the whole cached device
# back and counts the acknowledged writes it lost (wbstamp verify: a write
# acknowledged by an fsync that returned before the state is lost when one of
# its sectors holds neither it nor a later write over that sector).
# kernel-check.sh compares with the offline replay instead, which only the
# writeboost format has.
#
#   peer-check.sh KIND EMITDIR RECORDING
#     KIND  wbkit, upstream, writecache, bcache, dmcache (record.sh's targets)
# Prints one line per state that lost writes or could not be built, then
#   peer <kind>: checked=N not_built=N not_built_acked=N losing=N writes_lost=N foreign=N foreign_sectors=N vm_seconds=N
# not_built: states the cache could not be built on (before its format was
# complete: nothing acknowledged yet); not_built_acked: of those, states with
# acknowledged writes, which count as losing all of them. foreign: states
# that lost no acknowledged write but returned, where nothing acknowledged
# was written, data that no write of the workload wrote there (zeros or a
# later write are allowed). Exit 0 when the
# guest checked every state (losses are a measurement, not a failure: the
# caller decides), 1 when it did not, 77 when the cache is not available.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../vm/lib.sh"
source "$here/target.inc"

kind=${1:?kind: wbkit|upstream|writecache|bcache|dmcache}
dir=${2:?emit directory}
rec=${3:?recording directory}
crash_prepare_target "$kind"
[ -s "$dir/manifest.tsv" ] || { echo "peer $kind: no states emitted in $dir"; exit 1; }

meta() { sed -n "s/^$1=//p" "$rec/meta.kv"; }
seed=$(meta seed)
flush_every=$(meta flush_every)
partial_pct=$(meta partial_pct)
region_bytes=$(meta region_bytes)
region_bytes=${region_bytes:-$(meta backing_bytes)}
dmcache_meta_sectors=$(meta dmcache_meta_sectors)
stamp="--seed $seed --size $region_bytes --partial-pct $partial_pct --flush-every $flush_every"

guest=$(mktemp "$VM_WORK/peercheck.XXXXXX")
trap 'rm -f "$guest"' EXIT
{
	echo "WB_DMCACHE_META_SECTORS=${dmcache_meta_sectors:-2048}"
	echo '. /lib/wbguest.sh'
	case $kind in
	wbkit | upstream) echo "wb_load_target $kind" ;;
	*) echo "wb_cache_modules $kind" ;;
	esac
	echo "kind=$kind"
	echo "stamp='$stamp'"
	echo 'while read -r idx state_kind entry c_off c_len b_off e_off b_len level limit; do'
	cat <<'GUEST'
	$DMSETUP create c$idx --table "0 $c_len linear /dev/vda $c_off" || wb_fail "linear c$idx"
	$DMSETUP create b$idx --table "0 $b_len linear /dev/vda $b_off" || wb_fail "linear b$idx"
	$DMSETUP mknodes
	wb_report "st$idx.begin" "$state_kind level=$level"
	if ! wb_cache_create $kind /dev/mapper/b$idx /dev/mapper/c$idx 2>/tmp/err; then
		wb_report "st$idx" "not_built:$(tr ' \n' '__' </tmp/err | cut -c1-300)"
		$DMSETUP remove --retry c$idx b$idx || wb_fail "remove c$idx b$idx"
		continue
	fi
	# shellcheck disable=SC2086 # $stamp is a list of options
	$WBSTAMP verify $WB_CACHE_DEV $stamp --ops $limit --flushed $level >/tmp/verify.out 2>&1
	lost=$(sed -n 's/^verify_lost_writes=//p' /tmp/verify.out)
	bad=$(sed -n 's/^verify_mismatches=//p' /tmp/verify.out)
	if [ -z "$lost" ]; then
		wb_report "st$idx" "unreadable:$(tail -n 1 /tmp/verify.out | tr ' ' _)"
	elif [ "$bad" = 0 ]; then
		wb_report "st$idx" ok
	else
		grep '^wbstamp: sector' /tmp/verify.out | head -n 3
		wb_report "st$idx" "lost:$lost:$bad"
	fi
	wb_cache_remove $kind || wb_fail "removing $kind on state $idx failed"
	# --retry: bcache lets go of its devices a moment after its sysfs entries go.
	$DMSETUP remove --retry c$idx b$idx || wb_fail "remove c$idx b$idx"
done <<'MANIFEST'
GUEST
	cat "$dir/manifest.tsv"
	echo 'MANIFEST'
	echo 'wb_report peer_check done'
} >"$guest"

n=$(wc -l <"$dir/manifest.tsv")
VM_TIMEOUT=${CRASH_VM_TIMEOUT:-$((300 + n * 20))}
# Upstream keeps about 16 MiB per construction (kernel-check.sh).
[ "$kind" = upstream ] && VM_MEM=${VM_MEM_UPSTREAM:-$((1024 + 24 * n))}
for attempt in 1 2 3; do
	rc=0
	vm_run "$guest" "$dir/states.img" || rc=$?
	# A boot that panicked in the timer check never reached the script.
	[ "$rc" = 125 ] && tr -d '\r' <"$VM_LOG" | grep "IO-APIC + timer" >/dev/null || break
done
if [ "$(vm_result skip)" != "" ]; then echo "skip: $(vm_result skip)"; exit 77; fi
# A kernel warning on a crash state of another cache is a finding, not the
# end of the count: its lines are printed and the results still read.
if [ "$rc" = 125 ] && tr -d '\r' <"$VM_LOG" | grep -E "$VM_FAIL_PATTERNS" >/dev/null; then
	echo "peer $kind: the guest kernel reported (log $VM_LOG):"
	tr -d '\r' <"$VM_LOG" | grep -E -m 5 "$VM_FAIL_PATTERNS" | sed 's/^/    /'
fi
# What a cache that cannot be built on a state loses: every acknowledged write
# that is the newest over one of its sectors (wbstamp verify on zeros).
zeros=$(mktemp "$VM_WORK/peerzeros.XXXXXX")
trap 'rm -f "$guest" "$zeros"' EXIT
truncate -s "$region_bytes" "$zeros"
acked_writes() {
	# shellcheck disable=SC2086 # $stamp is a list of options
	# It exits 1 when something is missing: here, always.
	{ "$VM_WBSTAMP" verify "$zeros" $stamp --ops "$2" --flushed "$1" 2>/dev/null || true; } | sed -n 's/^verify_lost_writes=//p'
}
checked=0 not_built=0 not_built_acked=0 losing=0 writes_lost=0 foreign=0 foreign_sectors=0 missing=0
while read -r idx state_kind entry _ _ _ _ _ level limit; do
	r=$(vm_result "st$idx")
	case $r in
	ok) checked=$((checked + 1)) ;;
	lost:0:*)
		checked=$((checked + 1))
		foreign=$((foreign + 1))
		foreign_sectors=$((foreign_sectors + ${r#lost:0:}))
		echo "peer $kind: state $idx ($state_kind, entry $entry, writes 1..$level acknowledged) lost none but returned ${r#lost:0:} sectors no write put there"
		;;
	lost:*)
		checked=$((checked + 1))
		losing=$((losing + 1))
		lost=${r#lost:}
		writes_lost=$((writes_lost + ${lost%%:*}))
		echo "peer $kind: state $idx ($state_kind, entry $entry, writes 1..$level acknowledged) lost ${lost%%:*} of them (${lost#*:} sectors wrong)"
		;;
	not_built:*)
		checked=$((checked + 1))
		not_built=$((not_built + 1))
		if [ "$level" -gt 0 ]; then
			not_built_acked=$((not_built_acked + 1))
			losing=$((losing + 1))
			lost=$(acked_writes "$level" "$limit")
			writes_lost=$((writes_lost + lost))
			echo "peer $kind: state $idx ($state_kind, entry $entry, writes 1..$level acknowledged) could not be built: ${r#not_built:}"
		fi
		;;
	*)
		missing=$((missing + 1))
		echo "peer $kind: state $idx ($state_kind, entry $entry): ${r:-no result}"
		;;
	esac
done <"$dir/manifest.tsv"
echo "peer $kind: checked=$checked not_built=$not_built not_built_acked=$not_built_acked losing=$losing writes_lost=$writes_lost foreign=$foreign foreign_sectors=$foreign_sectors unchecked=$missing vm_seconds=$VM_ELAPSED"
[ "$(vm_result peer_check)" = "done" ] && [ "$missing" = 0 ]
