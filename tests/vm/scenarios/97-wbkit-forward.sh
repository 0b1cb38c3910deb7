#!/usr/bin/env bash
# shows: a block's older copy alone in the oldest segment, its newer one in a
#   full segment: the move must not copy the superseded copy (the block reads
#   its newest data live and after every replay, and the dirty count stays
#   within the cache's blocks); small segments (two blocks a commit, each
#   sealed by a suspend) wrap an 8 MiB cache dozens of times and move
#   forward (`forward_counts`),
#   every fsynced write reads back live, fio's verify holds with `O_DSYNC`
#   writers racing the moves; the log left dirty passes `wbdump`, replays
#   offline with `wbreplay`, and replays to the same data in upstream's module
#   (dm-wbkit's without it); `drop_caches` leaves the backing device equal to
#   the offline replay
#
# dm-wbkit moves small segments forward (kmod/README "Small segments move
# forward"): an 8 MiB cache (15 segments) takes fsync-heavy writes, two
# blocks per commit: first spread over a region four times its size (an
# fsync appends to the open segment, so these fill whole segments), then
# over one smaller than the blocks the moves keep in the cache, with partial
# blocks (one sector of five writes), each commit followed by a suspend and
# resume, which seals the open segment: so most blocks are written again
# while an older copy still waits in a small segment, and the ring wraps
# dozens of times with segments of one commit each. The oldest segments'
# blocks are copied into the open segment instead of written back, and
# count as written back once that segment is durable.
#
# First, before the stamped writes, a block whose older copy sits alone in
# the ring's oldest segment, another block alone in the next, and the first
# block's newer copy in a full segment after them (one the moves leave to
# writeback): the move of the two small segments must copy the second
# block only; a copy of the superseded one would be newest, live and in the
# log.
#
# Checked: those blocks read back their newest data, live and after every
# replay; the move happened (the forward_counts message); every fsynced
# write reads back live; fio's verify of O_DSYNC writers racing the moves;
# the log left dirty (removed without drop_caches) replays offline with
# wbreplay and wbdump finds nothing wrong in it; the kernel replays it (on
# Debian's dm-writeboost when it is built: the moved copies are plain newer
# entries of the format) to the same data; drop_caches then leaves the
# backing device equal to the offline replay.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_need_tool wbreplay
wbkit_need_tool wbdump
wbkit_prepare
VM_TIMEOUT=420

make_devices backing 48M cache 8M

# 38 MiB: between B's region and fio's, 512 KiB aligned.
SUPERSEDED_BLOCK=9728
A="--seed 97 --ops 3000 --size 32M"
B_OPS=400
B="--seed 98 --ops $B_OPS --offset 32M --size 6M --partial-pct 20"
run_guest <<GUEST
wb_load_target wbkit
table="0 \$(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
dev=/dev/mapper/wb
wb_dm_create wb "\$table"
# The superseded copy: block $SUPERSEDED_BLOCK alone in a committed
# segment, block $((SUPERSEDED_BLOCK + 128)) alone in the next, then block
# $SUPERSEDED_BLOCK again with the 127 blocks after it, flushed.
\$DD if=/dev/urandom of=/tmp/older bs=4k count=1 2>/dev/null
\$DD if=/dev/urandom of=/tmp/newer bs=4k count=129 2>/dev/null
# A suspend seals the open segment (an fsync alone appends to it).
seal() { \$DMSETUP suspend wb && \$DMSETUP resume wb || wb_fail "suspend and resume"; }
\$DD if=/tmp/older of=\$dev bs=4k seek=$SUPERSEDED_BLOCK oflag=direct,dsync 2>/dev/null || wb_fail "older copy"
seal
\$DD if=/tmp/newer of=\$dev bs=4k skip=128 seek=$((SUPERSEDED_BLOCK + 128)) count=1 oflag=direct,dsync 2>/dev/null || wb_fail "second block"
seal
\$DD if=/tmp/newer of=\$dev bs=4k seek=$SUPERSEDED_BLOCK count=128 oflag=direct conv=fsync 2>/dev/null || wb_fail "newer copy"
newer_sum=\$(wb_digest </tmp/newer)
wb_report newer_sum "\$newer_sum"
wb_report older_sum "\$(wb_digest </tmp/older)"
wb_stamp write_a write \$dev $A --flush-every 2 --final-flush
first=1
while [ \$first -le $B_OPS ]; do
	\$WBSTAMP write \$dev $B --first \$first --ops \$((first + 1)) --flush-every 2 >/tmp/w.out 2>&1 ||
		{ cat /tmp/w.out; wb_fail "write_b at \$first"; }
	seal
	first=\$((first + 2))
done
wb_report write_b ok
wb_report forward_written "\$(\$DMSETUP message wb 0 forward_counts)"
wb_report status_written "\$(wb_dm_status wb)"
\$DD if=\$dev of=/tmp/live bs=4k skip=$SUPERSEDED_BLOCK count=129 iflag=direct 2>/dev/null || wb_fail "read back"
live_sum=\$(wb_digest </tmp/live)
wb_report newer_live "\$([ "\$live_sum" = "\$newer_sum" ] && echo ok || echo "failed: \$live_sum")"
wb_report first_block_live "\$(\$DD if=/tmp/live bs=4k count=1 2>/dev/null | wb_digest)"
wb_stamp verify_a_live verify \$dev $A --flushed 3000
wb_stamp verify_b_live verify \$dev $B --flushed $B_OPS
if \$FIO --direct=1 --ioengine=libaio --iodepth=1 --sync=1 --rw=randwrite \\
	--verify=crc32c --verify_backlog=8 --verify_fatal=1 --filename=\$dev \\
	--name=dsync --bs=4k --size=4M --offset=40M --numjobs=2 \\
	--offset_increment=4M --loops=2 >/tmp/fio.out 2>&1; then
	wb_report race ok
else
	tail -n 5 /tmp/fio.out; wb_report race failed
fi
wb_report forward_race "\$(\$DMSETUP message wb 0 forward_counts)"
\$SHA256SUM <\$dev | cut -d' ' -f1 >/tmp/sum
wb_report sum_live "\$(cat /tmp/sum)"
\$DMSETUP remove wb || wb_fail "remove failed"
GUEST
echo "forward: ${VM_ELAPSED}s"
echo "status after writing: $(vm_result status_written)"
echo "moved after the stamped writes: $(vm_result forward_written)"
echo "moved after the fio race: $(vm_result forward_race)"
[ "$rc" = 0 ] || exit 1
if [ "$(vm_result newer_live)" != ok ]; then
	echo "the blocks written before the stamps read back other data after the moves: $(vm_result newer_live)"
	[ "$(vm_result first_block_live)" = "$(vm_result older_sum)" ] &&
		echo "block $SUPERSEDED_BLOCK reads its older, superseded copy"
	exit 1
fi
require_all ok write_a write_b verify_a_live verify_b_live race
# Status fields 2 and 7: nr_cache_blocks, nr_dirty_cache_blocks. A move
# that unhashes an entry twice drives the count below zero (a huge number).
vm_result status_written | awk 'NF >= 7 && $7 <= $2 { ok = 1 } END { exit !ok }' ||
	{ echo "more dirty blocks than cache blocks after the moves: $(vm_result status_written | cut -d' ' -f2,7)"; exit 1; }
moved=$(vm_result forward_written | awk '$1 == "segments" { print $2 }')
[ "${moved:-0}" -gt 0 ] || { echo "no segment moved forward: $(vm_result forward_written)"; exit 1; }

dump_rc=0
"$wbdump" "$work/cache.img" >"$work/wbdump.txt" 2>&1 || dump_rc=$?
if [ "$dump_rc" != 0 ]; then
	echo "wbdump reports findings on the cache dm-wbkit left (exit $dump_rc):"
	grep -iE "finding|error|warn|bad|stale" "$work/wbdump.txt" | head -10
	exit 1
fi
replay_offline || exit 1
# shellcheck disable=SC2086
"$VM_WBSTAMP" verify "$work/offline.img" $A --flushed 3000 || { echo "offline replay fails verification"; exit 1; }
# shellcheck disable=SC2086
"$VM_WBSTAMP" verify "$work/offline.img" $B --flushed $B_OPS || { echo "offline replay fails verification"; exit 1; }
offline_newer=$(dd if="$work/offline.img" bs=4k skip=$SUPERSEDED_BLOCK count=129 status=none | sha256sum | cut -d' ' -f1)
[ "$offline_newer" = "$(vm_result newer_sum)" ] || { echo "offline replay: the blocks written before the stamps are not their newest data"; exit 1; }
offline_sum=$(sha256sum <"$work/offline.img" | cut -d' ' -f1)
[ "$offline_sum" = "$(vm_result sum_live)" ] || { echo "offline replay differs from the live device"; exit 1; }

replayer=wbkit
vm_has_upstream && replayer=upstream
run_guest <<GUEST
wb_load_target $replayer
dev=/dev/mapper/wb
wb_dm_create wb "0 \$(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
wb_report status_replayed "\$(wb_dm_status wb)"
wb_report sum_replayed "\$(\$SHA256SUM <\$dev | cut -d' ' -f1)"
\$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
\$DMSETUP remove wb || wb_fail "remove failed"
wb_report done yes
GUEST
[ "$rc" = 0 ] || exit 1
require_all yes done
echo "replayed by $replayer: $(vm_result status_replayed)"
[ "$(vm_result sum_replayed)" = "$offline_sum" ] || { echo "$replayer's replay differs from the live device"; exit 1; }
images_equal "$work/backing.img" "$work/offline.img" "the backing device after drop_caches differs from the offline replay" ||
	exit 1
echo "live == offline replay == $replayer's replay == written back"
