#!/usr/bin/env bash
# shows: upstream, then dm-wbkit, over backing disks that qemu throttles to
#   200 writes a second with blk-wbt on: the writes in flight on the backing
#   disk sampled while `drop_caches` writes back 1,500 stamped blocks
#   (dm-wbkit's must pass the throttling: more than twice upstream's depth), and
#   while dm-wbkit writes back in the background under `writeback_threshold` (no
#   deeper than upstream's); every write read back from the backing disk alone
#
# Issue 28: writeback that keeps the disk's queue full when someone waits.
#
# The backing queue's writeback throttling (blk-wbt, on by default for a
# blk-mq disk) caps plain writes at a depth it scales by their latency:
# from 8 up to 3/4 of the queue's depth (96 for these virtio disks), and
# down when latencies grow. O_DIRECT writes (REQ_SYNC | REQ_IDLE) pass it.
# On both backing disks (qemu throttles them to 200 writes a second, so
# writes queue up where the guest can see them) the same 1,500 random
# 4 KiB writes (wbstamp) go in with writeback off, then are written back by
# drop_caches while the writes in flight on the backing disk
# (/sys/block/<disk>/inflight) are sampled.
#
# 1. Upstream's dm-writeboost first: its writeback stays under the
#    throttling (its largest sample is the throttled depth here).
# 2. dm-wbkit's drop_caches (and a ring that needs a slot) is waited for:
#    its writes pass the throttling, more than twice upstream's depth.
# 3. dm-wbkit's background writeback (writeback_threshold 100, nobody
#    waits) stays throttled like buffered writeback, so foreground reads of
#    the backing disk keep their latency: no deeper than upstream's (a
#    quarter's margin for the sampling).
# Every write must read back from the backing disk alone afterwards.
# Without upstream's module (PARTIAL) dm-wbkit's background writeback is the
# throttled reference: its drop_caches must go more than twice as deep.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=600

make_devices backing-up 64M cache-up 16M backing-wb 64M cache-wb 16M

VM_DRIVE_OPTS_vda=throttling.iops-write=200 VM_DRIVE_OPTS_vdc=throttling.iops-write=200 \
run_guest <<'GUEST'
wb_load_both_targets
for d in vda vdc; do
	f=/sys/block/$d/queue/wbt_lat_usec
	# Off (0), or never set up for this queue (reading fails): writing a
	# latency target turns it on, as Debian's kernel has it by default.
	v=$(cat $f 2>/dev/null || true)
	[ -n "$v" ] && [ "$v" != 0 ] || echo 75000 >$f 2>/dev/null || true
	# Where that fails too (the sanitizer build's kernel) the data checks
	# still run; the host side says the depth checks do not apply.
	wb_report "${d}_wbt_lat_usec" "$(cat $f 2>/dev/null || echo none)"
	wb_report "${d}_nr_requests" "$(cat /sys/block/$d/queue/nr_requests)"
	wb_report "${d}_scheduler" "$(cat /sys/block/$d/queue/scheduler)"
done
# The workload: 1,500 stamped 4 KiB writes over the first 48 MiB.
# Seed 79 for part 1 and 2, 80 for part 3 (whose backing disk holds 79's).
stamp="--seed 79 --size 48M --ops 1500 --partial-pct 0 --flush-every 0"
# shellcheck disable=SC2086 # the options split on purpose
fill() { $WBSTAMP write "$1" $stamp --final-flush >/dev/null || wb_fail "wbstamp write on $1"; }
# check <dev> <name>: reports <name>=ok or wbstamp's first complaint.
check() {
	# shellcheck disable=SC2086
	if $WBSTAMP verify "$1" $stamp --flushed 1500 --base-any >/tmp/v.out 2>&1; then
		wb_report "$2" ok
	else
		wb_report "$2" "$(head -1 /tmp/v.out)"
	fi
}
# sample_inflight <disk> <command...>: runs the command in the background and
# sets max to the most writes in flight on the disk until it is done (a
# marker file, not kill -0: an unreaped child still answers that), and rc to
# its exit status.
sample_inflight() {
	d=$1
	shift
	rm -f /tmp/done
	( "$@"; echo $? >/tmp/done ) &
	max=0
	while [ ! -e /tmp/done ]; do
		w=$(cut -c9- /sys/block/$d/inflight | tr -d ' ')
		[ "$w" -gt $max ] && max=$w
		usleep 10000
	done
	wait
	rc=$(cat /tmp/done)
}
# urgent <target> <backing disk> <cache disk> <name>
urgent() {
	wb_dm_create wb "0 $(wb_sectors /dev/$2) $1 /dev/$2 /dev/$3 4 writeback_threshold 0 nr_max_batched_writeback 32"
	fill /dev/mapper/wb
	sample_inflight "$2" $DMSETUP message wb 0 drop_caches
	[ "$rc" = 0 ] || wb_fail "drop_caches on $1"
	wb_report "${4}_urgent_inflight" $max
	$DMSETUP remove wb || wb_fail "remove $1"
	check /dev/$2 "${4}_backing_data"
}
wb_has_upstream && urgent writeboost vda vdb upstream
urgent wbkit vdc vdd wbkit
# 3. dm-wbkit in the background: other writes, over a fresh cache.
stamp="--seed 80 --size 48M --ops 1500 --partial-pct 0 --flush-every 0"
wb_zero_cache /dev/vdd
wb_dm_create wb "0 $(wb_sectors /dev/vdc) wbkit /dev/vdc /dev/vdd 2 writeback_threshold 0"
fill /dev/mapper/wb
$DMSETUP message wb 0 writeback_threshold 100 || wb_fail "writeback_threshold 100"
# Until the flushed segments (status field 5) are written back (field 6);
# the open one stays for drop_caches.
settle() {
	i=0
	while [ "$(wb_status_field 5)" != "$(wb_status_field 6)" ] && [ $i -lt 1200 ]; do
		usleep 50000
		i=$((i + 1))
	done
}
sample_inflight vdc settle
wb_report wbkit_background_inflight $max
wb_report wbkit_background_left "$(($(wb_status_field 5) - $(wb_status_field 6)))"
wb_report wbkit_background_segments "$(wb_status_field 6)"
$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches after the background writeback"
$DMSETUP remove wb || wb_fail "remove wbkit (background)"
check /dev/vdc wbkit_background_data
GUEST
guest_passed
fail=0
up=$(vm_result upstream_urgent_inflight)
ours=$(vm_result wbkit_urgent_inflight)
bg=$(vm_result wbkit_background_inflight)
# The throttled depth: upstream's writeback, or else dm-wbkit's in the background.
[ "$with_upstream" = 1 ] || up=$bg
echo "blk-wbt latency target: vda $(vm_result vda_wbt_lat_usec) us, vdc $(vm_result vdc_wbt_lat_usec) us;" \
	"nr_requests $(vm_result vda_nr_requests); scheduler $(vm_result vda_scheduler)"
[ "$with_upstream" = 0 ] || echo "upstream drop_caches: at most $up writes in flight, backing data $(vm_result upstream_backing_data)"
echo "dm-wbkit drop_caches: at most $ours writes in flight, backing data $(vm_result wbkit_backing_data)"
echo "dm-wbkit background writeback: at most $bg writes in flight, $(vm_result wbkit_background_segments) segments written back, $(vm_result wbkit_background_left) left, backing data $(vm_result wbkit_background_data)"
[ "$with_upstream" = 0 ] || expect_all ok upstream_backing_data
expect_all ok wbkit_backing_data wbkit_background_data
expect_all 0 wbkit_background_left
# blk-wbt caps at 3/4 of the queue depth at most: an upstream deeper than
# that was not throttled at all, and there is nothing to pass or stay under.
nr=$(vm_result vda_nr_requests)
wbt=$(vm_result vda_wbt_lat_usec)
if [ -z "$wbt" ] || [ "$wbt" = none ] || [ "${up:-0}" -gt $((3 * ${nr:-0} / 4)) ] 2>/dev/null; then
	echo "blk-wbt did not throttle upstream's writeback on this kernel ($up in flight," \
		"nr_requests $nr): the depth checks do not apply, the data checks do"
	echo "PARTIAL: the depth checks did not run: blk-wbt did not throttle upstream ($up in flight, nr_requests $nr)"
	[ "$fail" = 0 ] && echo "writeback data intact (no writeback throttling to compare against)"
	exit $fail
fi
if ! [ "${ours:-0}" -gt $((2 * ${up:-0})) ] 2>/dev/null; then
	echo "dm-wbkit's drop_caches writeback stayed throttled: ${ours:-none} writes in flight at most, upstream ${up:-none}"
	fail=1
fi
# Both sit at the same throttled ceiling; the samples catch it give or take a
# request or two, hence a quarter's margin (unthrottled is 5 times deeper).
# Without upstream there is nothing to compare the background depth with.
if [ "$with_upstream" = 1 ] && ! [ "${bg:-999}" -le $((${up:-0} * 5 / 4)) ] 2>/dev/null; then
	echo "dm-wbkit's background writeback went deeper than upstream's throttled one: ${bg:-none} against ${up:-none}"
	fail=1
fi
if [ "$with_upstream" = 0 ]; then
	echo "PARTIAL: the background depth was not compared with upstream's (the urgent one was, with the background's)"
	[ "$fail" = 0 ] && echo "urgent writeback passes blk-wbt ($ours in flight, background $bg)"
	exit $fail
fi
[ "$fail" = 0 ] && echo "urgent writeback passes blk-wbt ($ours in flight, upstream $up), background writeback stays under it ($bg)"
exit $fail
