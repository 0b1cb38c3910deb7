#!/usr/bin/env bash
# shows: upstream, then dm-wbkit, on 22-segment caches under 12,000 stamped
#   writes over 1 GiB: the dirty share of the segments not written back, sampled
#   while it writes (dm-wbkit's must be below 80 % and below four fifths of
#   upstream's: it wrote ahead); the data read live, after a restart and from
#   the backing device alone after `drop_caches`
#
# Writing ahead (kmod/README.md, "Writeback"): while the ring is short of
# slots, the batch is the oldest segments, and dm-wbkit also writes back
# (up to four times the batch's blocks) the dirty blocks
# of the segments behind it (up to nr_max_batched_writeback) that lie near
# the batch's blocks, and marks them clean. Upstream first (the reference,
# which writes the batch only), then dm-wbkit, in one boot, each on a 12 MiB
# cache (22 segments, default options: writeback only when the ring needs a
# slot, or runs short) over 1 GiB:
# - 12,000 stamped writes (a quarter of them 512 bytes) at random over the
#   1 GiB, a flush every 2,000 (so segments fill): the ring wraps about four
#   times, and few writes hit a block that is still in the ring;
# - meanwhile, as often as the status can be read (about once a second
#   here), the dirty blocks against what the segments not written back hold
#   (127 blocks each), averaged from the first writeback on. Upstream keeps
#   every segment's blocks dirty until its turn (about 95 % here). Each of
#   dm-wbkit's turns cleans the blocks behind the batch that lie near its
#   blocks (a quarter of them over 1 GiB): its share must be below 85 % and
#   below nine tenths of upstream's (measured: 73 % and 76 % against 94 %
#   and 93 %; 61 % before writing ahead was bounded, 82-84 % with a bound
#   of one batch's blocks; without writing ahead each segment keeps its
#   blocks dirty until its turn, as upstream's do). At
#   least 5 samples of dm-wbkit's.
# - the data, read through the live target, after a restart (replay), and
#   from the backing device alone after drop_caches: each block holds its
#   last write. A block written ahead is clean while older segments still
#   hold dirty copies of it: none of them may be written back over it. (A
#   module that left those older copies out of the write-ahead failed all
#   three checks.)
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=600

make_devices backing-up 1G cache-up 12M backing-wb 1G cache-wb 12M

W="--seed 31 --ops 12000 --size 1G --partial-pct 25"
run_guest <<GUEST
run() { # <backing> <cache> <tag>
	table="0 \$(wb_sectors \$1) writeboost \$1 \$2"
	dev=/dev/mapper/wb
	wb_dm_create wb "\$table"
	# status: 5 last_flushed_id, 6 last_writeback_id, 7 nr_dirty_cache_blocks
	( while :; do wb_dm_status wb | cut -d' ' -f5-7; sleep 0.1; done ) >/tmp/samples 2>/dev/null &
	poll=\$!
	wb_stamp "write_\$3" write \$dev $W --flush-every 2000 --final-flush
	kill \$poll
	wait \$poll 2>/dev/null || true
	# Once the first segment was written back (the ring is full); permille
	# of the blocks in segments not written back that are dirty.
	wb_report "samples_\$3" "\$(awk '\$2 > 0 && \$1 > \$2 { n++ } END { print n + 0 }' /tmp/samples)"
	wb_report "share_\$3" "\$(awk '\$2 > 0 && \$1 > \$2 { n++; s += \$3 / ((\$1 - \$2) * 127) }
		END { printf "%d", n ? 1000 * s / n : -1 }' /tmp/samples)"
	wb_stamp "verify_live_\$3" verify \$dev $W --flushed 12000
	\$DMSETUP remove wb || wb_fail "\$3: remove failed"
	wb_dm_create wb "\$table"
	wb_stamp "verify_replayed_\$3" verify \$dev $W --flushed 12000
	\$DMSETUP message wb 0 drop_caches || wb_fail "\$3: drop_caches failed"
	\$DMSETUP remove wb || wb_fail "\$3: remove failed"
	wb_stamp "verify_backing_\$3" verify \$1 $W --flushed 12000
}
wb_on_both_modules run "/dev/vda /dev/vdb" "/dev/vdc /dev/vdd"
GUEST
echo "write-ahead: ${VM_ELAPSED}s"
[ "$rc" = 0 ] || { echo "guest failed: $(vm_result fail) (log: $VM_LOG)"; exit 1; }
fail=0
for m in $(modules_ran upstream wbkit); do
	echo "$m: dirty share of the segments not written back, mean of $(vm_result "samples_$m") samples: $(vm_result "share_$m") permille"
	expect_all ok "write_$m" "verify_live_$m" "verify_replayed_$m" "verify_backing_$m"
done
share=$(vm_result share_wbkit)
if ! [ "$(vm_result samples_wbkit)" -ge 5 ] 2>/dev/null || ! [ "$share" -ge 0 ] 2>/dev/null; then
	echo "too few samples of dm-wbkit's status while it wrote"
	fail=1
elif ! [ "$share" -lt 850 ]; then
	echo "dm-wbkit did not write ahead: $share permille of its segments' blocks dirty"
	fail=1
elif [ "$with_upstream" = 1 ] && ! [ "$((share * 10))" -lt "$(($(vm_result share_upstream) * 9))" ] 2>/dev/null; then
	echo "dm-wbkit kept more than nine tenths of upstream's dirty share: $share against $(vm_result share_upstream)"
	fail=1
fi
exit $fail
