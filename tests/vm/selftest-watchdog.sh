#!/usr/bin/env bash
# Self-test of the harness's hang watchdog (issue 25), not a scenario:
# run-all.sh does not run it. The guest writes to a suspended dm device, so
# dd hangs in D state for good; the run must end as a timeout (124) with the
# watchdog's dump in the console log: the kernel log, the blocked tasks
# (sysrq w) naming dd, and every task's stack (sysrq t).
#   bash tests/vm/selftest-watchdog.sh            on the Debian kernel
#   VM_KERNEL=... VM_KVER=... VM_MODROOT=... VM_KERNEL_ARGS=acpi=noirq \
#   SELFTEST_TIMEOUT=240 bash tests/vm/selftest-watchdog.sh
# (the variables scripts/build-kdebug.sh writes to kdebug.env) on the debug one.
# The time limit must leave the guest time to boot and reach dd before the
# watchdog fires (VM_WATCHDOG_MARGIN before it): on a busy host Debian's
# kernel needs ~50 s, the debug kernel ~120 s.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

vm_prepare
VM_TIMEOUT=${SELFTEST_TIMEOUT:-120}

work=$(mktemp -d "$VM_WORK/selftest-watchdog.XXXXXX")
trap 'rm -rf "$work"' EXIT
vm_image "$work/disk.img" 16M

rc=0
vm_run - "$work/disk.img" <<'GUEST' 2>"$work/vm_run.err" || rc=$?
. /lib/wbguest.sh
wb_dm_create hang "0 $(wb_sectors /dev/vda) linear /dev/vda 0"
$DMSETUP suspend hang || wb_fail "suspend failed"
echo "selftest: writing to a suspended device, this never returns" >/dev/kmsg
$DD if=/dev/zero of=/dev/mapper/hang bs=4096 count=1 oflag=direct
wb_report not_hung yes
GUEST
cat "$work/vm_run.err" >&2

failed=0
check() {
	if tr -d '\r' <"$VM_LOG" | sed -n "${3:-p}" | grep -E "$2" >/dev/null; then
		echo "ok: $1"
	else
		echo "FAILED: $1 (no /$2/ in $VM_LOG)"
		failed=1
	fi
}
if [ "$rc" = 124 ]; then echo "ok: vm_run returned 124 (timeout)"; else echo "FAILED: vm_run returned $rc, not 124"; failed=1; fi
check "the watchdog fired" 'wbwatchdog: the script still runs'
check "sysrq w ran" 'sysrq: Show Blocked State'
check "dd was writing when the watchdog fired" 'selftest: writing to a suspended device' '1,/wbwatchdog: the script/p'
check "sysrq w lists dd, blocked (state D)" 'task:dd +state:D' '/sysrq: Show Blocked State/,/sysrq: Show State/p'
check "sysrq t ran" 'sysrq: Show State'
check "the dump finished before the kill" 'wbwatchdog: dump done'
if grep -q 'watchdog dump in the log' "$work/vm_run.err"; then
	echo "ok: vm_run summarised the dump"
else
	echo "FAILED: vm_run printed no summary of the dump"
	failed=1
fi
echo "log: $VM_LOG (${VM_ELAPSED}s)"
exit $failed
