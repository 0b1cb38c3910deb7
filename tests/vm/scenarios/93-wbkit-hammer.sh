#!/usr/bin/env bash
# shows: wbhammer: writers and readers on the same blocks of the open segment
#   while RWF_DSYNC writes seal it, 4 guest CPUs on 2 host cores; online checks,
#   after the storm and after a restart
#
# The lock drops of the write path, driven on purpose (tests/vm/wbhammer.c):
# four writers and two readers on the same four blocks of the open segment,
# so that writes copy into one block at once, reads wait for those copies,
# and writes wait for the reads (seg->nr_read_waiters), while a fifth
# thread's RWF_DSYNC writes seal the open segment over and over. A write
# that goes on after such a wait with what it saw before it lands in a
# segment that is sealed, maybe already written, maybe reused. Every read
# is checked online (a stamp of its own block), each block after the storm
# (the write no other followed), and everything again after a remove and
# create (the replay of the log). The guest has four CPUs on the host's
# two, so the host preempts them anywhere, a copy included: that makes the
# windows wide (tests/mutants: no-recheck-after-lock-drop). A second round
# puts dm-delay under the cache, so the sealed segments wait for their
# write. WBKIT_HAMMER_SECONDS per round (20).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
seconds=${WBKIT_HAMMER_SECONDS:-20}
VM_TIMEOUT=$((300 + 6 * seconds))
VM_SMP=4

# A 6 MiB cache, 1 MiB superblock + 10 segments: the ring wraps and buffers
# are reused.
make_devices backing 64M cache 6M
wbkit_guest_program wbhammer.c "$work/prog.img"

run_guest "$work/prog.img" <<GUEST
wb_load_program /dev/vdc /tmp/wbhammer
wb_load_target wbkit
backing_sectors=\$(wb_sectors /dev/vda)
cache_sectors=\$(wb_sectors /dev/vdb)
# round <name> <cache device>: the storm, then the restart check
round() {
	table="0 \$backing_sectors writeboost /dev/vda \$2"
	wb_dm_create wb "\$table"
	result=ok
	timeout $((seconds + 120)) /tmp/wbhammer run /dev/mapper/wb --state /tmp/state --seconds $seconds \
		>/tmp/run.out 2>&1 || result=storm-failed
	cat /tmp/run.out
	wb_report "\${1}_run" "\$(tail -n 1 /tmp/run.out)"
	timeout 120 \$DMSETUP remove wb || result=remove-failed
	if [ \$result = ok ]; then
		if \$DMSETUP create wb --table "\$table"; then
			\$DMSETUP mknodes wb
			timeout 120 /tmp/wbhammer check /dev/mapper/wb --state /tmp/state >/tmp/check.out 2>&1 ||
				result=changed-across-restart
			cat /tmp/check.out
			timeout 120 \$DMSETUP remove wb || result=remove-failed
		else
			result=restart-refused
		fi
	fi
	wb_report "\$1" "\$result"
	wb_zero_cache /dev/vdb
}
round plain /dev/vdb
wb_dm_create cdelay "0 \$cache_sectors delay /dev/vdb 0 2"
round delayed /dev/mapper/cdelay
\$DMSETUP remove cdelay
wb_report warnings "\$(dmesg | grep -ciE 'BUG:|WARNING:|blocked for more than')"
GUEST
[ "$rc" = 0 ] || { echo "the VM failed (rc $rc, log: $VM_LOG)"; exit 1; }
fail=0
for r in plain delayed; do
	echo "$r: $(vm_result "${r}_run"): $(vm_result "$r")"
	[ "$(vm_result "$r")" = ok ] || fail=1
done
[ "$(vm_result warnings)" = 0 ] || { echo "kernel warnings: $(vm_result warnings)"; fail=1; }
[ "$fail" = 0 ] && echo "hammer: every read, every block after the storm and after the restart as written"
exit $fail
