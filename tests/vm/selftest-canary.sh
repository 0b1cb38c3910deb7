#!/usr/bin/env bash
# Self-test of the harness's failure patterns (VM_FAIL_PATTERNS), not a
# scenario: make test-vm runs it after the suite. The guest loads a module
# that raises one kernel warning (tests/vm/canary/canary.c) and then erases
# the kernel log with dmesg -c, as scenarios that look at their own log
# lines do; its script exits 0. vm_run must still fail the run (125): the
# warning reached the console when it was raised, not only in the dump at
# the end. A harness that passes this run would pass a module that warns.
#   bash tests/vm/selftest-canary.sh        (VM_KVER, VM_KERNEL: another kernel)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

vm_prepare
VM_TIMEOUT=${SELFTEST_TIMEOUT:-180}
kdir=${VM_KDIR:-/lib/modules/$VM_KVER/build}
[ -d "$kdir" ] || { echo "FAILED: no kernel headers for $VM_KVER ($kdir) to build the canary"; exit 1; }

work=$(mktemp -d "$VM_WORK/selftest-canary.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$VM_DIR/canary/canary.c" "$VM_DIR/canary/Kbuild" "$work/"
make -s -C "$kdir" M="$work" modules >"$work/build.log" 2>&1 || {
	echo "FAILED: the canary module does not build:"
	tail -n 20 "$work/build.log"
	exit 1
}
# The module travels on a raw disk of its own: its size, then its bytes.
vm_image "$work/mod.img" 4M
stat -c %s "$work/canary.ko" | dd of="$work/mod.img" conv=notrunc status=none
dd if="$work/canary.ko" of="$work/mod.img" bs=4096 seek=1 conv=notrunc status=none

rc=0
vm_run - "$work/mod.img" <<'GUEST' 2>"$work/vm_run.err" || rc=$?
. /lib/wbguest.sh
size=$(head -c 64 /dev/vda | tr -d '\000\n ')
$DD if=/dev/vda of=/tmp/canary.ko bs=4096 skip=1 iflag=count_bytes count=$size status=none
insmod /tmp/canary.ko || wb_fail "insmod of the canary failed"
dmesg -c >/dev/null
wb_report canary_loaded yes
GUEST
cat "$work/vm_run.err" >&2
failed=0
[ "$(vm_result canary_loaded)" = yes ] || { echo "FAILED: the guest did not load the canary"; failed=1; }
if [ "$rc" = 125 ] && grep -q "kernel reported a problem" "$work/vm_run.err"; then
	echo "ok: vm_run failed the run on the canary's warning (125)"
else
	echo "FAILED: vm_run returned $rc on a guest whose kernel warned: the harness would pass a module that warns"
	failed=1
fi
tr -d '\r' <"$VM_LOG" | grep "wbkit canary: this warning must fail the VM run" >/dev/null ||
	{ echo "FAILED: the canary's warning is not in the console log"; failed=1; }
echo "log: $VM_LOG (${VM_ELAPSED}s)"
exit $failed
