#!/usr/bin/env bash
# shows: fio crc32c verify: 4 KiB, 512 B, unaligned mixed sizes, 4 concurrent
#   writers; partial blocks merged over random backing data, live, replayed, and
#   written back
#
# dm-wbkit data integrity: fio with crc32c verification over 4 KiB random
# writes, 512-byte writes, unaligned mixed sizes (split at 4 KiB, merged
# with older dirty sectors) and four concurrent writers, read back through
# the target; a cache smaller than the data so writeback runs underneath;
# partial blocks over a backing device full of random data, compared with a
# model file byte for byte.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420
# An 8 MiB cache: 14 segments, far less than the data written.
make_devices backing 64M cache 8M

run_guest <<'GUEST'
wb_load_target wbkit
wb_dm_create wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb 4 writeback_threshold 50 nr_max_batched_writeback 4"
dev=/dev/mapper/wb
fio_run() {
	name=$1; shift
	$FIO --name="$name" --filename=$dev --ioengine=psync --direct=1 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --randseed=7 \
		--output-format=terse --terse-version=3 "$@" >/tmp/fio.out 2>&1 ||
		{ cat /tmp/fio.out; wb_fail "fio $name failed"; }
	wb_report "fio_$name" ok
}
up() { wb_report "t_$1" "$(cut -d' ' -f1 /proc/uptime)"; }
up start
fio_run rand4k --rw=randwrite --bs=4k --size=6M --fsync=64
fio_run rand512 --rw=randwrite --bs=512 --size=1M --fsync=128
fio_run mixed --rw=randwrite --bsrange=512-16k --blockalign=512 --size=4M --fsync=32
fio_run seq --rw=write --bs=64k --offset=40M --size=8M
# Four writers at queue depth 8: the bio worker, flusher and writeback race.
fio_run concurrent --ioengine=libaio --iodepth=8 --numjobs=4 --size=2M \
	--offset_increment=4M --rw=randwrite --bsrange=512-16k --blockalign=512 --fsync=50
up fio
wb_report status_fio "$(wb_dm_status wb)"
$DMSETUP remove wb || wb_fail "remove failed"

# Partial blocks over non-zero backing data: the target must merge them.
# The backing device changes behind the cache's back, so start a new cache
# (zero its first and last MiB: the next target formats it) instead of
# replaying the old.
wb_zero_cache /dev/vdb
$DD if=/dev/urandom of=/dev/vda bs=1M count=2 oflag=direct 2>/dev/null
$DD if=/dev/vda of=/tmp/model bs=1M count=2 2>/dev/null
wb_dm_create wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
# Sectors 0..4095 only, so blocks get several partial writes each. busybox
# dd (static, quick to start) for the files, coreutils dd for O_DIRECT.
dd if=/dev/urandom of=/tmp/rand bs=512 count=256 2>/dev/null
i=0
while [ $i -lt 60 ]; do
	s=$(( (RANDOM * 32768 + RANDOM) % 512 ))
	n=$(( RANDOM % 3 + 1 ))
	r=$(( i % 250 ))
	dd if=/tmp/rand of=/tmp/chunk bs=512 skip=$r count=$n 2>/dev/null
	$DD if=/tmp/chunk of=$dev bs=512 seek=$s count=$n oflag=direct conv=notrunc 2>/dev/null || wb_fail "write $i"
	dd if=/tmp/chunk of=/tmp/model bs=512 seek=$s count=$n conv=notrunc 2>/dev/null
	i=$((i + 1))
done
up partial
check() {
	$DD if=$1 of=/tmp/got bs=1M count=2 iflag=direct 2>/dev/null
	$CMP -s /tmp/got /tmp/model && wb_report "merge_$2" ok || wb_report "merge_$2" mismatch
}
check $dev live
wb_report status_merge "$(wb_dm_status wb)"
$DMSETUP remove wb || wb_fail "remove failed"
wb_dm_create wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
check $dev replayed
$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
$DMSETUP remove wb || wb_fail "remove failed"
check /dev/vda backing
GUEST

echo "integrity: ${VM_ELAPSED}s; status after fio: $(vm_result status_fio)"
echo "status after partial writes: $(vm_result status_merge)"
guest_passed
fail=0
expect_all ok fio_rand4k fio_rand512 fio_mixed fio_seq fio_concurrent merge_live merge_replayed merge_backing
exit $fail
