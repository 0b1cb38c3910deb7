#!/usr/bin/env bash
# Records every write a writeboost target issues, with dm-log-writes, while a
# stamped workload runs on it; the log is the input of the crash-state
# enumeration (wbcrash). One VM boot per recording.
#
#   record.sh TARGET MODE OUTDIR [SEED]
#     TARGET  wbkit (kmod/dm-wbkit.ko) or upstream (Debian's dm-writeboost);
#             in mode both also the kernel's own caches (tests/crash/peers.sh):
#             writecache, bcache, dmcache, built by the guest's
#             wb_cache_create (tests/vm/guest-lib.sh) on an empty cache
#     MODE    cache: the log covers the cache device only; the cache is big
#                    enough that nothing is written back, so the backing
#                    device stays zero (checked) and needs no log.
#             both:  backing and cache are two linear parts of one logged
#                    device, so one log orders the writes of both (the cache
#                    is small: the log wraps and the target writes back).
#                    Each flush entry keeps the sector of the part it went
#                    to, so wbcrash treats each part as a disk with its own
#                    volatile cache (a flush of one makes nothing on the
#                    other durable).
#             cache-writeback: the log covers the cache device only, and the
#                    target writes back to an unlogged backing device: every
#                    other group of writes is not flushed but followed by
#                    drop_caches and a record interval, so writeback meets
#                    segments that are written but not yet durable. The
#                    backing device's content at a crash is not known, so
#                    wbcrash checks only the cache's log in these states (its
#                    superblock record never names a segment the log lacks);
#                    (mode both keeps the two flush domains apart too; this
#                    mode is kept for the drop_caches-and-wait pattern.)
#             detach, replace-cache (wbkit and upstream): as both, plus (for
#                    replace-cache) a third linear part, the new cache; after
#                    CRASH_CTL_AFTER groups of writes `wbctl detach wb` (or
#                    `wbctl replace-cache wb --cache` the new part) runs in
#                    the background while the workload goes on writing to
#                    /dev/mapper/wb, and CRASH_CTL_TAIL more groups follow
#                    its end (the workload stops there, at most CRASH_OPS
#                    writes). Marks ctl-start and ctl-done bracket wbctl.
#
# A mark "f<N>" follows every completed fsync of the workload: from that
# point on, stamped writes 1..N are acknowledged as flushed.
#
# Environment: CRASH_TABLE_ARGS, optional arguments of the writeboost table
# line (e.g. "2 update_sb_record_interval 1"); CRASH_RESTART_EVERY=K removes
# the target after every K-th group of writes (after 1.2 s, so that a record
# interval of 1 s writes the record first) and creates it again, so the log
# also holds what shutdown and replay write (restart sequences).
# CRASH_OPS and CRASH_FLUSH_EVERY set the number of stamped writes and the
# writes per fsync group; CRASH_CACHE_BYTES the cache device's size in mode
# both (default 3 MiB for dm-wbkit: 1 MiB superblock + 4 segments of 512
# KiB, 6 MiB (10 segments) for the others; e.g. $((8 << 20)) for 14
# segments). dm-wbkit's recording in mode both fails unless its ring
# wrapped. CRASH_REGION_BYTES: the cached device the
# workload writes (default 4 MiB); the backing device is that, plus 8 KiB for
# bcache, whose superblock comes before the data (make-bcache's default
# offset). CRASH_PARTIAL_PCT: the share of 512-byte writes (default 20; 0 for
# dm-writecache, whose 4 KiB blocks make it refuse smaller direct writes).
# CRASH_BACKING_DELAY_MS (mode both): dm-delay above the backing part, so
# writeback batches are slow (the superblock record, written meanwhile,
# shows what it names while the batch's data is not yet durable).
# CRASH_BCACHE_BUCKET and CRASH_DMCACHE_META_SECTORS size bcache's buckets
# (16k) and dm-cache's metadata slice at the start of the cache (2048).
# OUTDIR gets log.img (the log device), final-data.img (the logged device as
# the VM left it, to check the replayer against) and meta.kv.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../vm/lib.sh"
source "$here/target.inc"

target=${1:?target: wbkit|upstream}
mode=${2:?mode: cache|both}
out=${3:?output directory}
seed=${4:-11}

crash_prepare_target "$target"

region_bytes=${CRASH_REGION_BYTES:-$((4 << 20))}
backing_bytes=$region_bytes
case $target in
wbkit | upstream) peer=0 ;;
*)
	peer=1
	[ "$mode" = both ] || { echo "record.sh: $target records in mode both only" >&2; exit 2; }
	[ "${CRASH_RESTART_EVERY:-0}" = 0 ] || { echo "record.sh: CRASH_RESTART_EVERY is for the writeboost targets" >&2; exit 2; }
	[ "$target" = bcache ] && backing_bytes=$((region_bytes + (8 << 10)))
	;;
esac
case $mode in
cache) cache_bytes=$((128 << 20)); ops=${CRASH_OPS:-480}; flush_every=${CRASH_FLUSH_EVERY:-6} ;;
both)
	# dm-wbkit appends an fsync's writes to the open segment, so its ring
	# advances a slot per 127 blocks, not per fsync: four slots and 1,096
	# writes wrap it twice, and the writeback whose backing flush the
	# states check reuses slots (checked after the recording).
	if [ "$target" = wbkit ]; then
		cache_bytes=${CRASH_CACHE_BYTES:-$((3 << 20))}; ops=${CRASH_OPS:-1096}
	else
		cache_bytes=${CRASH_CACHE_BYTES:-$((6 << 20))}; ops=${CRASH_OPS:-720}
	fi
	flush_every=${CRASH_FLUSH_EVERY:-8}
	;;
cache-writeback)
	cache_bytes=${CRASH_CACHE_BYTES:-$((6 << 20))}; ops=${CRASH_OPS:-720}; flush_every=${CRASH_FLUSH_EVERY:-8}
	# The groups that end in drop_caches instead of an fsync: 136 writes
	# fill the segment the fsynced group appended to and go on into a new
	# one that no append made durable, so writeback meets a segment whose
	# header is not durable yet (dm-wbkit appends an fsync's writes in
	# place: with 8 a group, every segment written back had a durable
	# header from an earlier append, and a writeback that skipped the
	# cache flush passed every state).
	unflushed_group=${CRASH_UNFLUSHED_GROUP:-136}
	;;
detach | replace-cache)
	[ $peer = 0 ] || { echo "record.sh: mode $mode is for the writeboost targets" >&2; exit 2; }
	source "$here/../vm/scenarios/wbkit-lib.inc"
	wbkit_need_guest_tool wbctl
	cache_bytes=${CRASH_CACHE_BYTES:-$((6 << 20))}; ops=${CRASH_OPS:-1600}; flush_every=${CRASH_FLUSH_EVERY:-8}
	;;
*) echo "record.sh: unknown mode $mode" >&2; exit 2 ;;
esac
partial_pct=${CRASH_PARTIAL_PCT:-20}
# Discards of 1..8 blocks among the ops (wbstamp --discard-pct): a durable
# discard must read zeros (mode both: the passdown reaches the logged
# backing part, which dm-log-writes replays as zeros), never older data.
discard_pct=${CRASH_DISCARD_PCT:-0}
unflushed_group=${unflushed_group:-$flush_every}
workload="--seed $seed --size $region_bytes --partial-pct $partial_pct"
[ "$discard_pct" = 0 ] || workload="$workload --discard-pct $discard_pct"
table_args=${CRASH_TABLE_ARGS:-}
# The record must be written between a drop_caches and the next writes.
[ "$mode" != cache-writeback ] || table_args=${CRASH_TABLE_ARGS:-2 update_sb_record_interval 1}
restart_every=${CRASH_RESTART_EVERY:-0}
# Mode both: every read, write and flush of the backing device waits this
# long (dm-delay above its logged part), so a writeback batch lasts a
# second or more and what happens meanwhile on the cache shows in the log.
backing_delay_ms=${CRASH_BACKING_DELAY_MS:-0}
[ "$backing_delay_ms" = 0 ] || [ "$mode" = both ] || { echo "record.sh: CRASH_BACKING_DELAY_MS is for mode both" >&2; exit 2; }
# The modes that run wbctl: in which group it starts, how many follow its end.
ctl=
case $mode in detach | replace-cache) ctl=$mode ;; esac
ctl_after=${CRASH_CTL_AFTER:-12}
ctl_tail=${CRASH_CTL_TAIL:-12}
cache2_bytes=0
[ "$mode" != replace-cache ] || cache2_bytes=$cache_bytes

mkdir -p "$out"
rm -f "$out"/log.img "$out"/final-data.img "$out"/final-backing.img "$out"/meta.kv
vm_image "$out/log.img" 1G
if [ -n "$ctl" ]; then
	vm_image "$out/final-data.img" $((backing_bytes + cache_bytes + cache2_bytes))
	disks=("$out/final-data.img" "$out/log.img")
elif [ "$mode" != both ]; then
	vm_image "$out/final-backing.img" "$backing_bytes"
	vm_image "$out/final-data.img" "$cache_bytes"
	disks=("$out/final-backing.img" "$out/final-data.img" "$out/log.img")
else
	vm_image "$out/final-data.img" $((backing_bytes + cache_bytes))
	disks=("$out/final-data.img" "$out/log.img")
fi

VM_TIMEOUT=${CRASH_VM_TIMEOUT:-900}
backing_sectors=$((backing_bytes / 512))
cache_sectors=$((cache_bytes / 512))
cache2_sectors=$((cache2_bytes / 512))
guest=$(cat <<GUEST
WB_BCACHE_BUCKET=${CRASH_BCACHE_BUCKET:-16k}
WB_DMCACHE_META_SECTORS=${CRASH_DMCACHE_META_SECTORS:-2048}
. /lib/wbguest.sh
if [ $peer = 1 ]; then
	wb_cache_modules $target
else
	wb_load_target $target
fi
if [ -n "$ctl" ]; then
	wb_dm_create lw "0 $((backing_sectors + cache_sectors + cache2_sectors)) log-writes /dev/vda /dev/vdb"
	wb_dm_create bk "0 $backing_sectors linear /dev/mapper/lw 0"
	wb_dm_create cc "0 $cache_sectors linear /dev/mapper/lw $backing_sectors"
	[ $cache2_sectors = 0 ] || wb_dm_create cn "0 $cache2_sectors linear /dev/mapper/lw $((backing_sectors + cache_sectors))"
	table="0 $backing_sectors writeboost /dev/mapper/bk /dev/mapper/cc $table_args"
elif [ $mode != both ]; then
	wb_dm_create lw "0 $cache_sectors log-writes /dev/vdb /dev/vdc"
	table="0 $backing_sectors writeboost /dev/vda /dev/mapper/lw $table_args"
else
	wb_dm_create lw "0 $((backing_sectors + cache_sectors)) log-writes /dev/vda /dev/vdb"
	wb_dm_create bk "0 $backing_sectors linear /dev/mapper/lw 0"
	wb_dm_create cc "0 $cache_sectors linear /dev/mapper/lw $backing_sectors"
	backing=/dev/mapper/bk
	if [ $backing_delay_ms != 0 ]; then
		wb_dm_create bkd "0 $backing_sectors delay /dev/mapper/bk 0 $backing_delay_ms"
		backing=/dev/mapper/bkd
	fi
	table="0 $backing_sectors writeboost \$backing /dev/mapper/cc $table_args"
fi
dev=/dev/mapper/wb
if [ $peer = 1 ]; then
	wb_cache_create $target /dev/mapper/bk /dev/mapper/cc format 2>/tmp/create.err ||
		wb_fail "$target: \$(tr '\n' ' ' </tmp/create.err)"
	dev=\$WB_CACHE_DEV
else
	wb_dm_create wb "\$table"
fi
first=1
group=0
ctl_done_group=
ctl_start() {
	[ -x /usr/local/bin/wbctl ] || wb_fail "wbctl is not in the initramfs"
	\$DMSETUP message lw 0 mark ctl-start || wb_fail "mark ctl-start failed"
	if [ $mode = detach ]; then
		set -- detach wb
	else
		set -- replace-cache wb --cache /dev/mapper/cn
	fi
	( rc=0; /usr/local/bin/wbctl "\$@" >/tmp/ctl.out 2>&1 || rc=\$?
	  \$DMSETUP message lw 0 mark ctl-done
	  echo \$rc >/tmp/ctl.rc ) &
	ctl_pid=\$!
}
while [ \$first -le $ops ]; do
	last=\$((first + $flush_every - 1))
	if [ $mode = cache-writeback ] && [ \$((group % 2)) = 1 ]; then
		last=\$((first + $unflushed_group - 1))
		[ \$last -le $ops ] || last=$ops
		\$WBSTAMP write \$dev $workload --first \$first --ops \$last --flush-every 0 >/tmp/w.out 2>&1 || { cat /tmp/w.out; wb_fail "workload failed at \$first"; }
		\$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches after \$last failed"
		sleep 1.2
	else
		\$WBSTAMP write \$dev $workload --first \$first --ops \$last --flush-every $flush_every >/tmp/w.out 2>&1 || { cat /tmp/w.out; wb_fail "workload failed at \$first"; }
		grep -q "^last_flushed=\$last\$" /tmp/w.out || { cat /tmp/w.out; wb_fail "write \$last not flushed"; }
		\$DMSETUP message lw 0 mark f\$last || wb_fail "mark f\$last failed"
	fi
	first=\$((last + 1))
	group=\$((group + 1))
	if [ -n "$ctl" ]; then
		[ \$group != $ctl_after ] || ctl_start
		[ -n "\$ctl_done_group" ] || [ ! -f /tmp/ctl.rc ] || ctl_done_group=\$group
		[ -z "\$ctl_done_group" ] || [ \$group -lt \$((ctl_done_group + $ctl_tail)) ] || break
	fi
	if [ $restart_every -gt 0 ] && [ \$((group % $restart_every)) = 0 ] && [ \$first -le $ops ]; then
		sleep 1.2
		\$DMSETUP remove wb || wb_fail "restart: remove wb failed"
		wb_dm_create wb "\$table"
	fi
done
if [ -n "$ctl" ]; then
	wait \$ctl_pid
	sed 's/^/wbctl: /' /tmp/ctl.out
	[ "\$(cat /tmp/ctl.rc)" = 0 ] || wb_fail "wbctl $ctl failed (exit \$(cat /tmp/ctl.rc))"
	[ -n "\$ctl_done_group" ] || wb_fail "the workload ended before wbctl: raise CRASH_OPS"
	wb_report ops \$((first - 1))
	wb_report ctl_groups "$ctl_after \$ctl_done_group \$group"
	wb_report ctl_table "\$(\$DMSETUP table wb | cut -d' ' -f3-)"
	wb_report_stall ctl /tmp/ctl.out
	wb_report status "\$(\$DMSETUP status wb | cut -d' ' -f3-)"
elif [ $target = bcache ]; then
	sys=/sys/block/\${dev#/dev/}/bcache
	wb_report status "state=\$(cat \$sys/state) dirty_data=\$(cat \$sys/dirty_data)"
else
	wb_report status "\$(wb_dm_status wb)"
fi
if [ $peer = 1 ]; then
	wb_cache_remove $target || wb_fail "remove $target failed"
else
	\$DMSETUP remove wb || wb_fail "remove wb failed"
fi
[ $backing_delay_ms = 0 ] || \$DMSETUP remove --retry bkd || wb_fail "remove bkd failed"
[ $mode != both ] || \$DMSETUP remove --retry bk cc || wb_fail "remove bk cc failed"
[ -z "$ctl" ] || \$DMSETUP remove --retry bk cc || wb_fail "remove bk cc failed"
[ $cache2_sectors = 0 ] || \$DMSETUP remove --retry cn || wb_fail "remove cn failed"
wb_report log_status "\$(\$DMSETUP status lw | cut -d' ' -f4-)"
\$DMSETUP remove lw || wb_fail "remove lw failed"
wb_report recorded yes
GUEST
)
# A discard must zero what it reaches, as wbcrash's replay of the log
# models it: qemu punches the range out of the sparse image.
if [ "$discard_pct" != 0 ]; then
	export VM_DRIVE_OPTS_vda=discard=unmap VM_DRIVE_OPTS_vdb=discard=unmap VM_DRIVE_OPTS_vdc=discard=unmap
fi
# Under heavy load the guest kernel sometimes panics at boot ("IO-APIC + timer
# doesn't work"): that boot never reached the script, so try again.
for attempt in 1 2 3; do
	rc=0
	vm_run - "${disks[@]}" <<<"$guest" || rc=$?
	[ "$rc" = 125 ] && tr -d '\r' <"$VM_LOG" | grep "IO-APIC + timer" >/dev/null || break
	vm_log "boot panicked in the timer check, retrying"
done
if [ "$rc" != 0 ] || [ "$(vm_result recorded)" != yes ]; then
	echo "recording failed (rc $rc), log: $VM_LOG"
	exit 1
fi
[ -z "$(vm_result skip)" ] || { echo "skip: $(vm_result skip)"; exit 77; }
if [ "$mode" = cache ]; then
	# The enumeration assumes the unlogged backing device stayed zero.
	if ! cmp -s -n "$backing_bytes" "$out/final-backing.img" /dev/zero; then
		echo "the target wrote to the unlogged backing device: mode cache needs a cache that never writes back"
		exit 1
	fi
	rm -f "$out/final-backing.img"
fi
if [ "$mode" = both ] && [ "$target" = wbkit ]; then
	# Status fields 3 and 4: nr_segments, current_id. A ring that never
	# wrapped wrote nothing back over a reused slot, and a writeback that
	# skips its backing flush would pass every state (it did, from the
	# appends of 3031908 until this check).
	read -r _ _ nr_segments current_id _ <<<"$(vm_result status)"
	if [ "${current_id:-0}" -le "${nr_segments:-0}" ]; then
		echo "mode both: the ring never wrapped (current_id ${current_id:-?}, ${nr_segments:-?} slots): nothing written back was reused; raise CRASH_OPS"
		exit 1
	fi
fi
if [ "$mode" = cache-writeback ]; then
	# What writeback wrote is not in the log: only the cache's log can be checked.
	if cmp -s -n "$backing_bytes" "$out/final-backing.img" /dev/zero; then
		echo "nothing was written back: mode cache-writeback needs the target to write back"
		exit 1
	fi
	rm -f "$out/final-backing.img"
fi
{
	echo "target=$target"
	echo "mode=$mode"
	echo "seed=$seed"
	if [ -n "$ctl" ]; then echo "ops=$(vm_result ops)"; else echo "ops=$ops"; fi
	echo "flush_every=$flush_every"
	echo "partial_pct=$partial_pct"
	[ "$discard_pct" = 0 ] || echo "discard_pct=$discard_pct"
	echo "backing_bytes=$backing_bytes"
	echo "region_bytes=$region_bytes"
	if [ "$target" = bcache ]; then echo "bcache_bucket=${CRASH_BCACHE_BUCKET:-16k}"; fi
	if [ "$target" = dmcache ]; then echo "dmcache_meta_sectors=${CRASH_DMCACHE_META_SECTORS:-2048}"; fi
	echo "cache_bytes=$cache_bytes"
	echo "table_args=$table_args"
	echo "backing_delay_ms=$backing_delay_ms"
	echo "restart_every=$restart_every"
	[ "$mode" != cache-writeback ] || echo "backing_unlogged_writes=1"
	if [ -n "$ctl" ]; then
		echo "ctl=$ctl"
		echo "ctl_groups=$(vm_result ctl_groups)"
		echo "ctl_table=$(vm_result ctl_table)"
		echo "ctl_stall_ms=$(vm_result ctl_stall_ms)"
		echo "cache2_bytes=$cache2_bytes"
		echo "log_backing_offset=0"
		echo "log_cache_offset=$backing_bytes"
		[ "$cache2_bytes" = 0 ] || echo "log_cache2_offset=$((backing_bytes + cache_bytes))"
	elif [ "$mode" != both ]; then
		echo "log_backing_offset=none"
		echo "log_cache_offset=0"
	else
		echo "log_backing_offset=0"
		echo "log_cache_offset=$backing_bytes"
	fi
	echo "status=$(vm_result status)"
	echo "log_status=$(vm_result log_status)"
	echo "vm_seconds=$VM_ELAPSED"
} >"$out/meta.kv"
echo "recorded $target/$mode in ${VM_ELAPSED}s: $(vm_result log_status) (log entries, last sector)"
