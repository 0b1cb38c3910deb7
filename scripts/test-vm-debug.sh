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
for f in "$root"/kmod/*.[ch] "$root"/kmod/Kbuild "$root"/format/wbkit_format.h; do
	if [ ! -f "$root/kmod/dm-wbkit.ko" ] || [ "$f" -nt "$root/kmod/dm-wbkit.ko" ]; then
		log "kmod/dm-wbkit.ko is missing or stale: make -C kmod"
		nice -n 15 make -s -C "$root/kmod" >&2
		break
	fi
done

# dm-wbkit: kmod/, format/ and VERSION side by side, as Kbuild expects them.
wbkit=$out/wbkit
rm -rf "$wbkit"
mkdir -p "$wbkit/kmod" "$wbkit/format"
cp "$root"/kmod/Kbuild "$root"/kmod/Makefile "$root"/kmod/*.[ch] "$wbkit/kmod/"
cp "$root"/format/*.h "$wbkit/format/"
cp "$root/VERSION" "$wbkit/VERSION"
log "building dm-wbkit.ko against $KDIR"
nice -n 15 make -s -C "$wbkit/kmod" KDIR="$KDIR" >&2

# Upstream dm-writeboost, from the dm-writeboost-dkms sources.
upstream_src=$(printf '%s\n' /usr/src/dm-writeboost-*/ | sort -V | tail -n 1)
upstream_src=${upstream_src%/}
[ -d "$upstream_src" ] || upstream_src=
upstream=$out/upstream
rm -rf "$upstream"
VM_UPSTREAM_KO=$upstream/dm-writeboost.ko
if [ -n "$upstream_src" ]; then
	mkdir -p "$upstream"
	cp "$upstream_src"/*.[ch] "$upstream_src/Makefile" "$upstream/"
	log "building $(basename "$upstream_src") against $KDIR"
	nice -n 15 make -s -C "$KDIR" M="$upstream" modules >&2
else
	log "no /usr/src/dm-writeboost-*: the scenarios that need upstream skip (apt-get install dm-writeboost-dkms)"
fi

export VM_KERNEL VM_KVER VM_MODROOT VM_UPSTREAM_KO
export VM_WBKIT_KO=$wbkit/kmod/dm-wbkit.ko
# Own initramfs and logs: the Debian kernel's stay usable next to these.
export VM_WORK=$out/vm-work
export VM_LOG_DIR=$out/vm-logs
export VM_TIMEOUT_SCALE=${VM_TIMEOUT_SCALE:-3}
export VM_FAIL_PATTERNS_EXTRA=${VM_FAIL_PATTERNS_EXTRA:-'rcu: INFO: .*detected stall'}
log "kernel $VM_KVER ($VM_KERNEL), logs in $VM_LOG_DIR"
exec "$root/tests/vm/run-all.sh" "$build" "$@"
