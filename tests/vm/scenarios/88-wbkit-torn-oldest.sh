#!/usr/bin/env bash
# shows: crash states with a torn rewrite of the oldest slot, from both
#   modules: dm-wbkit keeps every acknowledged write (upstream loses them:
#   reported)
#
# A torn write into the oldest slot is a rewrite in progress, not the end of
# the log (format/wbkit_format.h, wb_torn_rewrite_of_oldest). The crash states
# of fixtures/crash-findings/*-torn-stale-header were cut while a segment was
# being written into the slot the replay walk starts at: the slot kept its
# old header and its checksum fails. Upstream's replay stops there and drops
# every newer segment, flushed ones included; dm-wbkit's construction must
# skip the slot and keep every acknowledged write.
#
# Each state is constructed by upstream's dm-writeboost (the reference: it
# loses writes, reported as upstream's defect), then by dm-wbkit, each on a
# fresh copy, and the logical device is checked with wbstamp verify against
# the writes the recording had acknowledged.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=600

make_devices	# the disks are copies of the fixtures, made below
disks=()
for state in upstream:48 wbkit:80; do
	name=${state%%:*}
	src=$WBKIT_ROOT/fixtures/crash-findings/$name-torn-stale-header
	for who in up wb; do
		zstd -q -d "$src/backing.img.zst" -o "$work/$name-$who-backing.img"
		zstd -q -d "$src/cache.img.zst" -o "$work/$name-$who-cache.img"
		disks+=("$work/$name-$who-backing.img" "$work/$name-$who-cache.img")
	done
done

run_guest "${disks[@]}" <<'GUEST'
wb_load_both_targets
W="--seed 11 --size 4194304 --partial-pct 20 --ops 720"
# check <tag> <backing> <cache> <flushed> <target>
check() {
	if ! $DMSETUP create t --table "0 $(wb_sectors $2) $5 $2 $3"; then
		wb_report "$1" construct-failed
		return
	fi
	$DMSETUP mknodes t
	if $WBSTAMP verify /dev/mapper/t $W --flushed "$4" >/tmp/v.out 2>&1; then
		wb_report "$1" kept
	else
		wb_report "$1" lost
		head -3 /tmp/v.out | sed "s/^/$1: /"
	fi
	$DMSETUP remove t
}
wb_on_both_targets check "upstream_state_on_upstream /dev/vda /dev/vdb 48" "upstream_state_on_wbkit /dev/vdc /dev/vdd 48"
wb_on_both_targets check "wbkit_state_on_upstream /dev/vde /dev/vdf 80" "wbkit_state_on_wbkit /dev/vdg /dev/vdh 80"
dmesg | grep -i 'torn rewrite' | head -3
GUEST
[ "$rc" = 0 ] || exit 1
fail=0
for s in upstream wbkit; do
	up=$(vm_result "${s}_state_on_upstream")
	echo "$s-made state: upstream ${up:-not run}, dm-wbkit $(vm_result "${s}_state_on_wbkit")"
	[ "$with_upstream" = 0 ] || [ "$up" = kept ] || echo "  upstream's defect: its replay stops at the torn oldest slot"
	wbkit_expect "${s}_state_on_wbkit" kept || fail=1
done
[ "$fail" = 0 ] && echo "torn oldest slot: dm-wbkit keeps every acknowledged write"
exit $fail
