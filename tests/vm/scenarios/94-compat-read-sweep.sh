#!/usr/bin/env bash
# shows: upstream's REPRO_150, upstream first: a 100 MiB direct-I/O sweep,
#   three passes, threshold by message and by table; upstream's hits come from
#   its threshold applying only after a generation of cells; dm-wbkit stages no
#   sweep
#
# Upstream's REPRO_150 ("with device file"), upstream first, then dm-wbkit,
# in one boot: a 100 MiB backing device full of random data, a 10 MiB
# cache, table `2 write_around_mode 1`, then `dmsetup message wb 0
# read_cache_threshold 127`; the whole device read three times with
# `dd bs=1M iflag=direct`, and every pass must return the backing data.
# Per pass: full-size read hits (status counters 5 and 7), what the pass
# wrote to the cache device (/sys/block/<disk>/stat), and its time.
#
# Upstream keeps a second copy of the threshold in its cells
# (cells->threshold), set to UINT_MAX ("cache every read") at construction
# and taken from read_cache_threshold only when a whole batch of
# nr_read_cache_cells (2048) staged reads has been injected. Set by message
# after construction, the threshold therefore does not apply to the first
# 2048 blocks read: upstream stages the first 8 MiB of the sweep, though
# the sweep is one sequential run far beyond 127 blocks, and the later
# passes hit those. The same table with read_cache_threshold 127 in the
# table line (second case, both modules) applies the threshold from the
# start, and upstream then stages nothing either. dm-wbkit applies the
# threshold from the moment it is set, by table or message: a sequential
# run beyond it is not staged, so the sweep costs the cache no writes and
# evicts nothing. There is no setting under which dm-wbkit stages a 1 MiB
# sweep; upstream's hits here depend on how the threshold was set, not on
# the reads. Required of dm-wbkit: the data, no hits and no cache writes in
# every pass of both cases; upstream's figures are reported.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=900

make_devices backing 100M cache-up 10M cache-wb 10M
# The backing device full of random data.
head -c $((100 << 20)) /dev/urandom >"$work/backing.img"
digest=$(sha256sum "$work/backing.img" | cut -d' ' -f1)

run_guest <<GUEST
BACKING_DIGEST=$digest
backing_sectors=\$(wb_sectors /dev/vda)
# cache_written <disk>: sectors written to it so far
cache_written() { awk '{ print \$7 }' /sys/block/\$1/stat; }
# sweep <tag> <cache disk> <message|table>: three passes; reports
# <tag>_<how>_<pass>=hits,cache KiB written,seconds,data
sweep() {
	wb_zero_cache /dev/\$2
	if [ \$3 = message ]; then
		wb_dm_create wb "0 \$backing_sectors writeboost /dev/vda /dev/\$2 2 write_around_mode 1"
		\$DMSETUP message wb 0 read_cache_threshold 127 || wb_fail "\$1: message read_cache_threshold 127"
	else
		wb_dm_create wb "0 \$backing_sectors writeboost /dev/vda /dev/\$2 4 write_around_mode 1 read_cache_threshold 127"
	fi
	for pass in 1 2 3; do
		echo 3 >/proc/sys/vm/drop_caches
		\$DMSETUP message wb 0 clear_stat
		w0=\$(cache_written \$2)
		t0=\$(cut -d' ' -f1 /proc/uptime)
		got=\$(\$DD if=/dev/mapper/wb bs=1M iflag=direct 2>/dev/null | wb_digest)
		t1=\$(cut -d' ' -f1 /proc/uptime)
		sleep 2	# staged reads are injected in the background
		data=ok
		[ "\$got" = "\$BACKING_DIGEST" ] || data=differs
		hits=\$(wb_counters | awk -F, '{ print \$6 + \$8 }')
		kib=\$(((\$(cache_written \$2) - w0) / 2))
		wb_report "\${1}_\${3}_\$pass" "\$hits,\$kib,\$(echo "\$t0 \$t1" | awk '{ printf "%.1f", \$2 - \$1 }'),\$data"
	done
	\$DMSETUP remove wb || wb_fail "\$1: remove failed"
}
# sweeps <cache disk> <tag>: both cases on one module.
sweeps() {
	sweep \$2 \$1 message
	sweep \$2 \$1 table
}
wb_on_both_modules sweeps vdb vdc
wb_report done yes
GUEST
[ "$rc" = 0 ] || { echo "guest failed: $(vm_result fail) (log: $VM_LOG)"; exit 1; }
require_all yes done
fail=0
echo "per pass: full-size read hits, KiB written to the cache device, seconds, data"
for how in message table; do
	for tag in $(modules_ran upstream wbkit); do
		line="$tag, threshold by $how:"
		for pass in 1 2 3; do
			line="$line pass $pass $(vm_result "${tag}_${how}_$pass");"
		done
		echo "$line"
	done
	for pass in 1 2 3; do
		IFS=, read -r hits kib _ data <<<"$(vm_result "wbkit_${how}_$pass")"
		if [ "$data" != ok ] || [ "$hits" != 0 ] || [ "$kib" != 0 ]; then
			echo "dm-wbkit, threshold by $how, pass $pass: $hits hits, $kib KiB written to the cache, data $data" \
				"(a sweep beyond the threshold must read the backing data and stage nothing)"
			fail=1
		fi
	done
done
if [ "$with_upstream" = 1 ]; then
	for how in message table; do
		for pass in 1 2 3; do
			IFS=, read -r _ _ _ data <<<"$(vm_result "upstream_${how}_$pass")"
			[ "$data" = ok ] || echo "upstream, threshold by $how, pass $pass: the data differs (upstream's defect)"
		done
	done
fi
[ "$fail" = 0 ] && echo "read sweep: dm-wbkit stages no sequential sweep beyond the threshold, however it was set"
exit $fail
