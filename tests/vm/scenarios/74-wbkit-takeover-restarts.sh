#!/usr/bin/env bash
# shows: every takeover fixture (fixtures/upstream, the crash-findings states
#   with a torn rewrite or a segment lost in flight) on two copies: three
#   constructions in a row, with no write and with fsynced writes between them;
#   the first gives the fixture's expected data, each later one the same plus
#   the writes. The module of 845bb85 refuses the second construction of the
#   torn-rewrite state (no writes between): its first replay wrote the trust
#   record over a log only another writer's rules accept
#
# Taking over a cache another writer left must hold across restarts (issue
# 57, item 2). The first construction on such a log may read slots by the
# rules for another writer's log only (a torn rewrite near the oldest slot,
# a segment lost in flight over a lap-old one: docs/FORMAT.md, replay step
# 2), and then writes the trust record, after which the same slots would read
# as damage. So what the first replay leaves on disk must be a log the same
# module accepts: it zeroes those slots before the trust record
# (wb_replay_plan's drop_slot). The module of 845bb85 did not: a second
# construction on fixtures/crash-findings/upstream-torn-stale-header with no
# write in between was refused (`a damaged segment among the oldest`).
#
# Every takeover fixture (the upstream-made images under fixtures/ that the
# kernel constructs on, and the older dm-wbkit's torn state, which has no
# trust record either), on two fresh copies: three constructions in a row,
# with no write between them on one copy and with writes (fsynced, some
# 4 KiB blocks and a partial sector run) between them on the other. The
# first construction must give the fixture's expected data (upstream's
# recorded logical sha256, or wbstamp verify at the acknowledged level of
# the crash state); each later one the same data, plus the writes made
# since.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
command -v zstd >/dev/null || { echo "zstd not installed"; exit 77; }
VM_TIMEOUT=900

work=$(mktemp -d "$VM_WORK/takeover-restarts.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The fixtures, each with how its first construction's data is checked.
fixtures=()
for dir in "$WBKIT_ROOT"/fixtures/upstream/*/; do
	dir=${dir%/}
	[ -f "$dir/logical.sha256" ] && fixtures+=("$dir")
done
for name in upstream-torn-stale-header upstream-lost-in-flight wbkit-torn-stale-header; do
	dir=$WBKIT_ROOT/fixtures/crash-findings/$name
	[ -f "$dir/cache.img.zst" ] && fixtures+=("$dir")
done

letters=abcdefghijklmnopqrstuvwxyz
guest=$work/guest.sh
cat >"$guest" <<'GUEST'
. /lib/wbguest.sh
wb_load_target wbkit
# restarts <tag> <backing> <cache> <writes 0|1> <expected sha256 or ""> <wbstamp verify args or "">
restarts() {
	tag=$1 backing=$2 cache=$3 writes=$4 sha=$5 verify=$6
	table="0 $(wb_sectors "$backing") writeboost $backing $cache"
	n=1
	while [ $n -le 3 ]; do
		if ! $DMSETUP create t --table "$table"; then
			wb_report "$tag" "refused-at-$n"
			dmesg | grep -E 'slot [0-9]+' | tail -n 2 | sed "s/^/$tag: /"
			return
		fi
		$DMSETUP mknodes t
		if [ $n = 1 ]; then
			if [ -n "$sha" ]; then
				got=$($SHA256SUM </dev/mapper/t | cut -d' ' -f1)
				if [ "$got" != "$sha" ]; then
					wb_report "$tag" "data-differs-at-1"
					$DMSETUP remove t
					return
				fi
			elif ! $WBSTAMP verify /dev/mapper/t $verify >/tmp/v.out 2>&1; then
				wb_report "$tag" "lost-at-1"
				head -n 3 /tmp/v.out | sed "s/^/$tag: /"
				$DMSETUP remove t
				return
			fi
			cat /dev/mapper/t >/tmp/ref
		else
			if ! $CMP -s /dev/mapper/t /tmp/ref; then
				wb_report "$tag" "data-differs-at-$n"
				$CMP /dev/mapper/t /tmp/ref 2>&1 | head -n 1 | sed "s/^/$tag: /"
				$DMSETUP remove t
				return
			fi
		fi
		if [ "$writes" = 1 ] && [ $n -lt 3 ]; then
			# A few 4 KiB blocks spread over the device and a run of 512-byte
			# sectors, fsynced, into the device and into the reference alike.
			size=$(wb_sectors /dev/mapper/t)
			for k in 1 2 3 4 5 6; do
				off=$(( (size / 8) / 7 * k + n * 16 ))
				dd if=/dev/urandom of=/tmp/blk bs=4096 count=1 status=none
				$DD if=/tmp/blk of=/dev/mapper/t bs=4096 seek=$off oflag=direct conv=notrunc,fsync status=none
				dd if=/tmp/blk of=/tmp/ref bs=4096 seek=$off conv=notrunc status=none
			done
			dd if=/dev/urandom of=/tmp/blk bs=512 count=3 status=none
			$DD if=/tmp/blk of=/dev/mapper/t bs=512 seek=$((n * 1000 + 1)) oflag=direct conv=notrunc,fsync status=none
			dd if=/tmp/blk of=/tmp/ref bs=512 seek=$((n * 1000 + 1)) conv=notrunc status=none
		fi
		$DMSETUP remove t
		n=$((n + 1))
	done
	wb_report "$tag" intact
}
GUEST

disks=()
tags=()
i=0
for dir in "${fixtures[@]}"; do
	name=$(basename "$dir")
	sha= verify=
	if [ -f "$dir/logical.sha256" ]; then
		sha=$(cut -d' ' -f1 "$dir/logical.sha256")
	else
		verify=$(sed -n 's/.*wbstamp verify BACKING \(.*\)\.$/\1/p' "$dir/DESCRIPTION")
		[ -n "$verify" ] || { echo "$name: no wbstamp verify line in its DESCRIPTION"; exit 1; }
	fi
	for writes in 0 1; do
		zstd -q -d "$dir/backing.img.zst" -o "$work/b$i.img"
		zstd -q -d "$dir/cache.img.zst" -o "$work/c$i.img"
		disks+=("$work/b$i.img" "$work/c$i.img")
		backing=/dev/vd${letters:$((2 * i)):1} cache=/dev/vd${letters:$((2 * i + 1)):1}
		tag="$name.writes$writes"
		tags+=("$tag")
		echo "restarts '$tag' $backing $cache $writes '$sha' '$verify'" >>"$guest"
		i=$((i + 1))
	done
done
[ $((2 * i)) -le 26 ] || { echo "too many fixtures for one boot ($i copies)"; exit 1; }

rc=0
vm_run "$guest" "${disks[@]}" || rc=$?
guest_passed
fail=0
for tag in "${tags[@]}"; do
	got=$(vm_result "$tag")
	echo "$tag: ${got:-no result}"
	[ "$got" = intact ] || fail=1
done
[ "$fail" = 0 ] && echo "takeovers: three constructions in a row, with and without writes, all data intact (${#tags[@]} copies)"
exit $fail
