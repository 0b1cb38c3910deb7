#!/usr/bin/env bash
# Runs the VM scenarios on another Debian kernel than the default one
# (make test-vm-612, issue 27): an installed linux-image-<KVER> with its
# linux-headers-<KVER>, e.g. 6.12.115+deb12-amd64 from bookworm.
#
#   scripts/test-vm-kernel.sh BUILD_DIR KVER [SCENARIO...]
#
# dm-wbkit.ko and upstream's dm-writeboost.ko are built against
# /lib/modules/KVER/build into BUILD_DIR/k<major><minor>/ (k612), from copies
# of the sources, so kmod/dm-wbkit.ko (built for Debian's default kernel, which
# the plain suite uses) stays as it is. When upstream's module does not build
# (Debian's dm-writeboost 2.2.17 on 6.12), its parts of the scenarios skip
# with the reason (VM_UPSTREAM_WHY) and the dm-wbkit parts still run.
# The initramfs (its own, in BUILD_DIR/k612/vm-work) takes the kernel's
# modules from /lib/modules/KVER, unpacking .ko.xz (tests/vm/lib.sh).
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 BUILD_DIR KVER [SCENARIO...]" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
kver=$2
shift 2

log() { echo "test-vm-kernel: $*" >&2; }

kdir=/lib/modules/$kver/build
if [ ! -r "/boot/vmlinuz-$kver" ] || [ ! -d "$kdir" ]; then
	log "kernel $kver not installed: apt-get install linux-image-$kver linux-headers-$kver"
	exit 1
fi
# k612 for 6.12.115+deb12-amd64
tag=$(echo "$kver" | sed -E 's/^([0-9]+)\.([0-9]+).*/k\1\2/')
out=$build/$tag
mkdir -p "$out"

# shellcheck source=scripts/vm-kernel-modules.inc
. "$root/scripts/vm-kernel-modules.inc"
vm_build_modules "$root" "$kdir" "$kver" "$out"
[ -z "$VM_UPSTREAM_WHY" ] || log "$VM_UPSTREAM_WHY: the upstream parts of the scenarios skip"
export VM_UPSTREAM_WHY

export VM_KVER=$kver VM_KERNEL=/boot/vmlinuz-$kver VM_MODROOT=
# Own initramfs and logs: the default kernel's stay usable next to these.
export VM_WORK=$out/vm-work
export VM_LOG_DIR=$out/vm-logs
log "kernel $VM_KVER ($VM_KERNEL), logs in $VM_LOG_DIR"
exec "$root/tests/vm/run-all.sh" "$build" "$@"
