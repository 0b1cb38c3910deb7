#!/usr/bin/env bash
# shows: upstream, then dm-wbkit: `wbctl create`, `detach`, `attach` and
#   `flush` on a mounted ext4 that fio writes and verifies the whole time: no
#   verify error, each command's stall under a second, a second device over the
#   held backing device refused, the file system clean after a re-create
#
# wbctl on a mounted, busy ext4 (issue 36): a writeboost device over a
# backing and a cache disk, ext4 on it, fio writing files with crc32c verify
# (verify_backlog: every block it wrote is read back and checked while it
# runs; fsync every 8 writes) for the whole time, made by `wbctl create`
# (a second device over the held backing device is refused; at the end,
# after the remove, `wbctl create` again must replay the cache's log and
# e2fsck find the file system clean); meanwhile `wbctl detach` (the table
# must be linear after it), `wbctl attach` of the same cache (writeboost again: detach wiped it, so the target formats it)
# and `wbctl flush`. Then fio stops: no verify error (err=0) and exit 0;
# a file written and checksummed before detach reads back the same; the
# device is remounted and fio's read phase (--verify_only with the state
# the writer saved) checks every block it wrote; unmounted, `e2fsck -fn`
# finds it clean. Each command's stall (suspend to resume, wbctl's own
# figure) is reported and must stay under a second, but for upstream's
# detach: its writeback thread looks for work once a second
# (do_writeback_proc sleeps 1000 ms when it has none), so the write-back of
# what came in after the flush waits up to a second for it while the device
# is suspended; that one must stay under 2 s. (Both limits times
# VM_TIMEOUT_SCALE, for the sanitizer kernel.) Upstream's dm-writeboost
# first, then dm-wbkit, in one boot; without upstream's module dm-wbkit's
# part runs alone (PARTIAL).
set -euo pipefail
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
wbkit_need_guest_tool wbctl
VM_TIMEOUT=300

work=$(mktemp -d "$VM_WORK/wbctl.XXXXXX")
trap 'rm -rf "$work"' EXIT
for m in up wk; do
	vm_image "$work/backing-$m.img" 256M
	vm_image "$work/cache-$m.img" 64M
done

rc=0
vm_run - "$work/backing-up.img" "$work/cache-up.img" "$work/backing-wk.img" "$work/cache-wk.img" <<'GUEST' || rc=$?
. /lib/wbguest.sh
WBCTL=/usr/local/bin/wbctl
[ -x $WBCTL ] || wb_skip "wbctl is not in the initramfs"
modprobe ext4 || wb_fail "modprobe ext4 failed"
mkdir -p /mnt

# run_module <module> <tag> <backing> <cache>
run_module() {
	mod=$1 tag=$2 B=$3 C=$4
	wb_load_target "$mod"
	$WBCTL create wb --backing "$B" --cache "$C" >/tmp/create.$tag 2>&1 ||
		{ cat /tmp/create.$tag; wb_fail "$tag: wbctl create failed"; }
	sed "s/^/$tag create: /" /tmp/create.$tag
	$DMSETUP mknodes
	wb_report "${tag}_created" "$(wb_target_type wb)"
	# The backing device is the target's now: a second device over it is refused.
	crc=0
	$WBCTL create wb2 --backing "$B" >/tmp/create2.$tag 2>&1 || crc=$?
	sed "s/^/$tag create over a held device: /" /tmp/create2.$tag
	$DMSETUP info wb2 >/dev/null 2>&1 && crc=made
	wb_report "${tag}_create_held_rc" "$crc"
	/sbin/mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 /dev/mapper/wb ||
		wb_fail "$tag: mkfs.ext4 failed"
	mount -t ext4 -o noinit_itable /dev/mapper/wb /mnt || wb_fail "$tag: mount failed"
	wb_busy_ext4_start $tag
	fio_pid=$WB_FIO_PID
	sleep 6

	$WBCTL detach wb >/tmp/detach.$tag 2>&1 || { cat /tmp/detach.$tag; wb_fail "$tag: wbctl detach failed"; }
	sed "s/^/$tag detach: /" /tmp/detach.$tag
	wb_report_stall ${tag}_detach /tmp/detach.$tag
	wb_report "${tag}_after_detach" "$(wb_target_type wb)"
	sleep 3
	kill -0 $fio_pid 2>/dev/null || { cat /tmp/fio.$tag; wb_fail "$tag: fio stopped during detach"; }

	$WBCTL attach wb --cache "$C" -o writeback_threshold=0 >/tmp/attach.$tag 2>&1 ||
		{ cat /tmp/attach.$tag; wb_fail "$tag: wbctl attach failed"; }
	sed "s/^/$tag attach: /" /tmp/attach.$tag
	wb_report_stall ${tag}_attach /tmp/attach.$tag
	wb_report "${tag}_after_attach" "$(wb_target_type wb)"
	sleep 4
	kill -0 $fio_pid 2>/dev/null || { cat /tmp/fio.$tag; wb_fail "$tag: fio stopped during attach"; }

	dirty=$($DMSETUP status wb | cut -d' ' -f10)
	wb_report "${tag}_dirty_before_flush" "$dirty"
	$WBCTL flush wb >/tmp/flush.$tag 2>&1 || { cat /tmp/flush.$tag; wb_fail "$tag: wbctl flush failed"; }
	sed "s/^/$tag flush: /" /tmp/flush.$tag
	kill -0 $fio_pid 2>/dev/null || { cat /tmp/fio.$tag; wb_fail "$tag: fio stopped during flush"; }
	sleep 2

	wb_busy_ext4_finish $tag
	$DMSETUP remove wb || wb_fail "$tag: dmsetup remove failed"

	# The cache holds the log since attach: create again replays it.
	$WBCTL create wb --backing "$B" --cache "$C" --json >/tmp/recreate.$tag 2>&1 ||
		{ cat /tmp/recreate.$tag; wb_fail "$tag: wbctl create over the log failed"; }
	$DMSETUP mknodes
	wb_report "${tag}_recreate_start" "$(sed -n 's/.*"start": "\([a-z]*\)".*/\1/p' /tmp/recreate.$tag)"
	/sbin/e2fsck -fn /dev/mapper/wb >/tmp/fsck2.$tag 2>&1
	wb_report "${tag}_fsck2_rc" "$?"
	$DMSETUP remove wb || wb_fail "$tag: dmsetup remove failed"
}

if wb_has_upstream; then
	run_module upstream up /dev/vda /dev/vdb
	rmmod dm_writeboost || wb_fail "rmmod dm_writeboost failed"
fi
run_module wbkit wk /dev/vdc /dev/vdd
wb_report finished 1
GUEST
[ "$rc" = 0 ] || { echo "guest failed (rc $rc): $(vm_result fail) (log: $VM_LOG)"; exit 1; }
[ -z "$(vm_result skip)" ] || { echo "$(vm_result skip)"; exit 77; }
fail=0
tags=wk
[ "$with_upstream" = 1 ] && tags="up wk"
for t in $tags; do
	wbkit_expect ${t}_created writeboost || fail=1
	wbkit_expect ${t}_create_held_rc 4 || fail=1
	wbkit_expect ${t}_recreate_start replayed || fail=1
	wbkit_expect ${t}_fsck2_rc 0 || fail=1
	wbkit_expect ${t}_after_detach linear || fail=1
	wbkit_expect ${t}_after_attach writeboost || fail=1
	wbkit_expect ${t}_fio_rc 0 || fail=1
	wbkit_expect ${t}_fio_err 0 || fail=1
	wbkit_expect ${t}_verify_rc 0 || fail=1
	wbkit_expect ${t}_verify_err 0 || fail=1
	wbkit_expect ${t}_static ok || fail=1
	wbkit_expect ${t}_fsck_rc 0 || fail=1
	for c in detach attach; do
		ms=$(vm_result ${t}_${c}_stall_ms)
		# A slower kernel (the sanitizer one: VM_TIMEOUT_SCALE=3) gets
		# as much more time.
		limit=$((1000 * VM_TIMEOUT_SCALE))
		[ "$t$c" = updetach ] && limit=$((2000 * VM_TIMEOUT_SCALE))
		echo "$t $c: I/O held ${ms} ms (limit $limit ms)"
		if ! [ -n "$ms" ] || [ "$ms" -ge $limit ]; then
			echo "$t $c: stall '${ms}' ms, not under $limit ms (log: $VM_LOG)"
			fail=1
		fi
	done
	echo "$t flush: $(vm_result ${t}_dirty_before_flush) dirty blocks before it"
	echo "$t fio, its slowest I/Os over the run (latency bucket, upper bound): $(vm_result ${t}_fio_slowest)"
done
wbkit_expect finished 1 || fail=1
exit $fail
