#!/usr/bin/env bash
# shows: upstream, then dm-wbkit: `wbctl replace-cache` and `wbctl mode` on a
#   mounted, busy ext4 under fio's verify: no verify error, the stalls bounded,
#   every block and the file system intact after a restart
#
# wbctl replace-cache and mode on a mounted, busy ext4 (issue 36), as
# scenario 95 runs detach and attach: a writeboost device over a backing and
# a cache disk, ext4 on it, fio writing files with crc32c verify
# (verify_backlog, fsync every 8 writes) the whole time, and meanwhile
# `wbctl replace-cache` to a third, blank disk (the table must name it
# after, with the same options, and the old cache's first MiB must be
# zero), `wbctl mode write-around` (the table has write_around_mode 1, no
# dirty block is left) and `wbctl mode write-back` (write_around_mode 0);
# then a refused replace-cache (the backing device as the new cache, exit
# 4) and a mode the device has already (exit 0) leave the table as it is.
# Then fio stops: no verify error and exit 0; a file written and
# checksummed before reads back the same; remounted, fio's read phase
# checks every block it wrote; unmounted, `e2fsck -fn` finds it clean.
# Each command's stall (wbctl's own figure) is reported and must stay under
# a second on dm-wbkit, and under 2 s on upstream, whose writeback thread
# looks for work once a second (see scenario 95), and for its mode commands
# its constructor runs inside the stall as well (it replays or formats the
# live cache: wbctl loads the table only once the device is suspended and
# written back; 0.7 s on the 64 MiB cache here): 3 s for write-around, the
# one that has dirty data to write back while suspended (the first run:
# 1875 ms = suspend 210 + write-back 954 + load and resume 711), and 3 s
# for replace-cache, whose new cache upstream formats at the load, which
# wbctl makes only after the write-back (a formatted new cache is what a
# recovery after a crash takes: wbctl(8), CRASHES). (All limits
# times VM_TIMEOUT_SCALE.) Upstream's dm-writeboost first, then dm-wbkit, in one
# boot; without upstream's module dm-wbkit's part runs alone (PARTIAL).
set -euo pipefail
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
wbkit_need_guest_tool wbctl
VM_TIMEOUT=420

work=$(mktemp -d "$VM_WORK/wbctl.XXXXXX")
trap 'rm -rf "$work"' EXIT
for m in up wk; do
	vm_image "$work/backing-$m.img" 256M
	vm_image "$work/cache-$m.img" 64M
	vm_image "$work/cache2-$m.img" 64M
done

rc=0
vm_run - "$work/backing-up.img" "$work/cache-up.img" "$work/cache2-up.img" \
	"$work/backing-wk.img" "$work/cache-wk.img" "$work/cache2-wk.img" <<'GUEST' || rc=$?
. /lib/wbguest.sh
WBCTL=/usr/local/bin/wbctl
[ -x $WBCTL ] || wb_skip "wbctl is not in the initramfs"
modprobe ext4 || wb_fail "modprobe ext4 failed"
mkdir -p /mnt

# devno <device>: its major:minor.
devno() {
	cat /sys/class/block/"${1#/dev/}"/dev
}

# wa_mode <name>: the table's write_around_mode (0 when absent).
wa_mode() {
	m=$($DMSETUP table "$1" | sed -n 's/.* write_around_mode \([0-9]*\).*/\1/p')
	echo "${m:-0}"
}

# step <tag> <what> <wbctl arguments...>: runs wbctl, shows its output,
# reports its stall, checks that fio still runs.
step() {
	st_tag=$1 st_what=$2
	shift 2
	$WBCTL "$@" >/tmp/$st_what.$st_tag 2>&1 || { cat /tmp/$st_what.$st_tag; wb_fail "$st_tag: wbctl $* failed"; }
	sed "s/^/$st_tag $st_what: /" /tmp/$st_what.$st_tag
	wb_report_stall ${st_tag}_$st_what /tmp/$st_what.$st_tag
}

# run_module <module> <tag> <backing> <cache> <new cache>
run_module() {
	mod=$1 tag=$2 B=$3 C=$4 C2=$5
	wb_load_target "$mod"
	wb_dm_create wb "0 $(wb_sectors "$B") writeboost $B $C 2 writeback_threshold 0"
	/sbin/mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 /dev/mapper/wb ||
		wb_fail "$tag: mkfs.ext4 failed"
	mount -t ext4 -o noinit_itable /dev/mapper/wb /mnt || wb_fail "$tag: mount failed"
	wb_busy_ext4_start $tag
	fio_pid=$WB_FIO_PID
	sleep 6

	wb_report "${tag}_dirty_before_replace" "$($DMSETUP status wb | cut -d' ' -f10)"
	step $tag replace replace-cache wb --cache "$C2"
	set -- $($DMSETUP table wb)
	if [ "$3 $5 $6 $7 $8" = "writeboost $(devno "$C2") 2 writeback_threshold 0" ]; then
		wb_report "${tag}_after_replace" ok
	else
		wb_report "${tag}_after_replace" "$(echo $($DMSETUP table wb) | tr ' ' _)"
	fi
	if $CMP -s -n 1048576 "$C" /dev/zero; then
		wb_report "${tag}_old_cache_wiped" ok
	else
		wb_report "${tag}_old_cache_wiped" no
	fi
	sleep 3
	kill -0 $fio_pid 2>/dev/null || { cat /tmp/fio.$tag; wb_fail "$tag: fio stopped during replace-cache"; }

	wb_report "${tag}_dirty_before_wa" "$($DMSETUP status wb | cut -d' ' -f10)"
	step $tag wa mode wb write-around
	wb_report "${tag}_after_wa" "$(wa_mode wb)"
	sleep 4
	# Write-around logs nothing: fio's writes went to the backing device.
	wb_report "${tag}_dirty_in_wa" "$($DMSETUP status wb | cut -d' ' -f10)"
	kill -0 $fio_pid 2>/dev/null || { cat /tmp/fio.$tag; wb_fail "$tag: fio stopped during mode write-around"; }

	step $tag wb mode wb write-back
	wb_report "${tag}_after_wb" "$(wa_mode wb)"
	sleep 4
	kill -0 $fio_pid 2>/dev/null || { cat /tmp/fio.$tag; wb_fail "$tag: fio stopped during mode write-back"; }
	wb_report "${tag}_dirty_in_wb" "$($DMSETUP status wb | cut -d' ' -f10)"
	# What is refused or has nothing to do changes nothing: the backing
	# device as the new cache (exit 4), the mode it has already (exit 0).
	before=$($DMSETUP table wb)
	rc=0
	$WBCTL replace-cache wb --cache "$B" >/tmp/refused.$tag 2>&1 || rc=$?
	sed "s/^/$tag refused: /" /tmp/refused.$tag
	wb_report "${tag}_refused_rc" "$rc"
	rc=0
	$WBCTL mode wb write-back >/tmp/same.$tag 2>&1 || rc=$?
	sed "s/^/$tag same mode: /" /tmp/same.$tag
	wb_report "${tag}_same_mode_rc" "$rc"
	if [ "$($DMSETUP table wb)" = "$before" ] && ! grep -q "I/O held" /tmp/same.$tag; then
		wb_report "${tag}_unchanged" ok
	else
		wb_report "${tag}_unchanged" no
	fi
	$DMSETUP table wb | sed "s/^/$tag table at the end: /"

	wb_busy_ext4_finish $tag
	$DMSETUP remove wb || wb_fail "$tag: dmsetup remove failed"
}

if wb_has_upstream; then
	run_module upstream up /dev/vda /dev/vdb /dev/vdc
	rmmod dm_writeboost || wb_fail "rmmod dm_writeboost failed"
fi
run_module wbkit wk /dev/vdd /dev/vde /dev/vdf
wb_report finished 1
GUEST
[ "$rc" = 0 ] || { echo "guest failed (rc $rc): $(vm_result fail) (log: $VM_LOG)"; exit 1; }
[ -z "$(vm_result skip)" ] || { echo "$(vm_result skip)"; exit 77; }
fail=0
tags=wk
[ "$with_upstream" = 1 ] && tags="up wk"
for t in $tags; do
	wbkit_expect ${t}_after_replace ok || fail=1
	wbkit_expect ${t}_old_cache_wiped ok || fail=1
	wbkit_expect ${t}_after_wa 1 || fail=1
	wbkit_expect ${t}_dirty_in_wa 0 || fail=1
	wbkit_expect ${t}_after_wb 0 || fail=1
	wbkit_expect ${t}_refused_rc 4 || fail=1
	wbkit_expect ${t}_same_mode_rc 0 || fail=1
	wbkit_expect ${t}_unchanged ok || fail=1
	wbkit_expect ${t}_fio_rc 0 || fail=1
	wbkit_expect ${t}_fio_err 0 || fail=1
	wbkit_expect ${t}_verify_rc 0 || fail=1
	wbkit_expect ${t}_verify_err 0 || fail=1
	wbkit_expect ${t}_static ok || fail=1
	wbkit_expect ${t}_fsck_rc 0 || fail=1
	for c in replace wa wb; do
		ms=$(vm_result ${t}_${c}_stall_ms)
		limit=$((1000 * VM_TIMEOUT_SCALE))
		[ "$t" = up ] && limit=$((2000 * VM_TIMEOUT_SCALE))
		[ "$t$c" = upwa ] || [ "$t$c" = upreplace ] && limit=$((3000 * VM_TIMEOUT_SCALE))
		echo "$t $c: I/O held ${ms} ms (limit $limit ms)"
		if ! [ -n "$ms" ] || [ "$ms" -ge $limit ]; then
			echo "$t $c: stall '${ms}' ms, not under $limit ms (log: $VM_LOG)"
			fail=1
		fi
	done
	echo "$t dirty blocks before replace-cache: $(vm_result ${t}_dirty_before_replace), before write-around: $(vm_result ${t}_dirty_before_wa), in write-back again: $(vm_result ${t}_dirty_in_wb)"
	echo "$t fio, its slowest I/Os over the run (latency bucket, upper bound): $(vm_result ${t}_fio_slowest)"
done
wbkit_expect finished 1 || fail=1
exit $fail
