#!/usr/bin/env bash
# shows: a 6-segment (3 MiB) cache under ~25 MiB of writes, replay of the
#   wrapped log, `drop_caches`: the backing device alone holds the data
#
# dm-wbkit ring wrap-around: a 4 MiB cache (6 segments) takes many times its
# size; the ring must wait for writeback instead of overwriting dirty
# segments. The wrapped log is replayed after a remove, then drop_caches
# writes everything back and the backing device alone holds the data.
# Last, fio verifies what it wrote while it writes (verify_backlog) with
# several jobs, 4 KiB and 512-byte writes, on that wrapping cache: read hits
# remapped to the cache device, reads out of RAM buffers and partial writes
# that merge an older copy race with writeback reusing the slots.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420

make_devices backing 48M cache 4M

W="--seed 21 --ops 8000 --size 48M"
run_guest <<GUEST
wb_load_target wbkit
wb_start 2 nr_max_batched_writeback 2
dev=/dev/mapper/wb
wb_stamp write write \$dev $W --flush-every 200 --final-flush
wb_report status_written "\$(wb_dm_status wb)"
wb_stamp verify_live verify \$dev $W --flushed 8000
wb_recreate status_replayed
wb_stamp verify_replayed verify \$dev $W --flushed 8000
\$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
st=\$(wb_dm_status wb)
wb_report status_dropped "\$st"
set -- \$st
# last_flushed_id == last_writeback_id and no dirty block left
[ "\$5" = "\$6" ] && [ "\$7" = 0 ] && wb_report clean yes || wb_report clean no
\$DMSETUP remove wb || wb_fail "remove failed"
wb_stamp verify_backing verify /dev/vda $W --flushed 8000
wb_dm_create wb "\$WB_TABLE"
if \$FIO --direct=1 --ioengine=libaio --iodepth=8 --rw=randwrite --loops=2 \\
	--verify=crc32c --verify_backlog=16 --verify_fatal=1 --filename=\$dev \\
	--name=b4k --bs=4k --size=4M --numjobs=3 --offset_increment=8M \\
	--name=b512 --bs=512 --size=1M --offset=32M >/tmp/fio.out 2>&1; then
	wb_report race ok
else
	tail -n 5 /tmp/fio.out; wb_report race failed
fi
wb_report status_race "\$(wb_dm_status wb)"
\$DMSETUP remove wb || wb_fail "remove failed"
GUEST
echo "wrap-around: ${VM_ELAPSED}s"
echo "status after writing: $(vm_result status_written)"
echo "status after drop_caches: $(vm_result status_dropped)"
echo "status after the fio race: $(vm_result status_race)"
guest_passed
require_all ok write verify_live verify_replayed verify_backing race
wbkit_expect clean yes
