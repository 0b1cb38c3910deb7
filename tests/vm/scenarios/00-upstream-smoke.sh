#!/usr/bin/env bash
# shows: the harness works: fio with crc32c verify through the upstream target
#
# Proves the harness end to end on the target we did not write: the upstream
# dm-writeboost on fresh images, data through fio with checksums, a clean
# remove. If this fails, later scenarios' failures say nothing about wbkit.
source "$(dirname "$0")/wbkit-lib.inc"

vm_prepare
vm_has_upstream || { echo "skip: $(vm_upstream_why)"; exit 77; }

# A 16 MiB cache: 30 segments, less than fio writes, so the target must also
# write back.
make_devices backing 64M cache 16M

run_guest <<'GUEST'
wb_load_target upstream
wb_dm_create wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
wb_report status_created "$(wb_dm_status wb)"
$FIO --name=smoke --filename=/dev/mapper/wb --ioengine=psync --direct=1 \
	--rw=randwrite --bsrange=512-16k --size=24M --fsync=32 \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --randseed=1 \
	--output-format=terse --terse-version=3 >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; wb_fail "fio failed"; }
wb_report fio_verify ok
wb_report status_after_fio "$(wb_dm_status wb)"
$DMSETUP remove wb || wb_fail "dmsetup remove failed"
wb_report removed yes
GUEST

echo "upstream smoke: boot+test ${VM_ELAPSED}s, status after fio: $(vm_result status_after_fio)"
guest_passed
wbkit_expect fio_verify ok && wbkit_expect removed yes
