#!/usr/bin/env bash
# Runs the VM scenarios on the sanitizer kernel (make test-vm-debug, issue 24).
#
#   scripts/test-vm-debug.sh BUILD_DIR [SCENARIO...]
#
# The kernel comes from scripts/build-kdebug.sh (built on first use, cached
# outside the clone). dm-wbkit.ko and upstream's dm-writeboost.ko are built
# against its tree into BUILD_DIR/kdebug/, from copies of the sources, so
# kmod/dm-wbkit.ko (built for Debian's kernel) stays as it is. The scenarios
# then run with tests/vm/run-all.sh, which fails a scenario on any KASAN,
# UBSAN, lockdep, WARNING, BUG, hung-task or RCU-stall report in the guest's
# log (VM_FAIL_PATTERNS in tests/vm/lib.sh, plus RCU stalls here).
#
# The scenarios' dm-wbkit checks (tests/vm/scenarios/wbkit-lib.inc) rebuild
# kmod/dm-wbkit.ko for Debian's kernel when it is stale: `make test-vm-debug`
# runs `make kmod` first so that they do not try to build it for this one.
#
# Environment: VM_TIMEOUT_SCALE (default 3: a KASAN guest runs about that much
# slower), KDEBUG_JOBS, WBKIT_KDEBUG_CACHE (scripts/build-kdebug.sh).
set -euo pipefail

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [SCENARIO...]" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
shift
out=$build/kdebug

kdir=$("$root/scripts/build-kdebug.sh" | tail -n 1)
VM_KERNEL='' VM_KVER='' VM_MODROOT='' KDIR=''
# shellcheck source=/dev/null
. "$kdir/kdebug.env"
if [ ! -r "$VM_KERNEL" ] || [ ! -d "$KDIR" ]; then
	echo "test-vm-debug: $kdir/kdebug.env names no kernel" >&2
	exit 1
fi

log() { echo "test-vm-debug: $*" >&2; }

# wbkit-lib.inc rebuilds a stale kmod/dm-wbkit.ko against the headers of
# VM_KVER, which this kernel does not have in /lib/modules: build it for
# Debian's kernel first (what `make kmod` does), as the plain VM tests would.
for f in "$root"/kmod/*.[ch] "$root"/kmod/Kbuild "$root"/format/wbkit_format.h "$root"/format/wbkit_contract.h; do
	if [ ! -f "$root/kmod/dm-wbkit.ko" ] || [ "$f" -nt "$root/kmod/dm-wbkit.ko" ]; then
		log "kmod/dm-wbkit.ko is missing or stale: make -C kmod"
		nice -n 15 make -s -C "$root/kmod" >&2
		break
	fi
done

# shellcheck source=scripts/vm-kernel-modules.inc
. "$root/scripts/vm-kernel-modules.inc"
vm_build_modules "$root" "$KDIR" "$VM_KVER" "$out"
# Upstream builds on this kernel (6.1): a failure is an error here, and
# without its sources the scenarios that need it skip whole, as on the
# default kernel (VM_UPSTREAM_WHY stays unexported).
if [ "$VM_UPSTREAM_BUILD_FAILED" = 1 ]; then
	cat "$out/upstream-build.log" >&2
	exit 1
fi
[ -z "$VM_UPSTREAM_WHY" ] || log "$VM_UPSTREAM_WHY: the scenarios that need upstream skip"

export VM_KERNEL VM_KVER VM_MODROOT VM_UPSTREAM_KO
# Own initramfs and logs: the Debian kernel's stay usable next to these.
export VM_WORK=$out/vm-work
export VM_LOG_DIR=$out/vm-logs
export VM_TIMEOUT_SCALE=${VM_TIMEOUT_SCALE:-3}
# KASAN's shadow and quarantine: the 300 GiB cache of scenario 76 runs the
# guest out of memory in its 3.5 GiB.
export WBKIT_LARGE_CACHE_MEM=${WBKIT_LARGE_CACHE_MEM:-6144}
# acpi=noirq: the KASAN kernel's ACPI interpreter is so slow under TCG that
# the PCI routing method (_PRT) runs into ACPI's 30 s loop timeout at every
# boot; the BIOS's PIR table does the same job at once (virtio uses MSI-X).
# no5lvl: -cpu max under TCG offers 5-level paging, and on it this KASAN
# kernel sometimes reports a "wild-memory-access" in an interrupt during
# identify_cpu at boot, before any module loads (an irq descriptor at a
# 5-level direct-map address, ff11...); seen in 1 of 4 boots with 2 GiB,
# and in 0 of 6 with no5lvl.
export VM_KERNEL_ARGS=${VM_KERNEL_ARGS:-acpi=noirq no5lvl}
export VM_FAIL_PATTERNS_EXTRA=${VM_FAIL_PATTERNS_EXTRA:-'rcu: INFO: .*detected stall'}
log "kernel $VM_KVER ($VM_KERNEL), logs in $VM_LOG_DIR"
exec "$root/tests/vm/run-all.sh" "$build" "$@"
