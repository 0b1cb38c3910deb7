#!/usr/bin/env bash
# Runs the VM scenarios on a Debian kernel other than the host's (issue 37),
# taken from a debootstrap chroot (scripts/kernel-chroot.sh): the host's
# kernel packages stay as they are.
#
#   scripts/test-vm-kernel.sh BUILD_DIR KERNEL [SCENARIO...]
#
# KERNEL: bookworm-backports, trixie-backports or sid (scripts/kernel-chroot.sh),
# or bookworm: the host's own kernel, for the same summary line.
# dm-wbkit.ko and upstream's dm-writeboost.ko (the same suite's
# dm-writeboost-dkms sources) are built inside the chroot with the suite's
# compiler, into BUILD_DIR/<KERNEL>/, so kmod/dm-wbkit.ko (built for the
# host's default kernel, which the plain suite uses) stays as it is. When
# upstream's module does not build there, its parts of the scenarios are left
# out with the reason (VM_UPSTREAM_WHY) and the dm-wbkit parts still run.
# The initramfs (its own, in BUILD_DIR/<KERNEL>/vm-work) takes the kernel's
# modules from the chroot, unpacking .ko.xz (tests/vm/lib.sh).
# BUILD_DIR/<KERNEL>/summary is one row of kmod/README.md's table (markdown).
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 BUILD_DIR bookworm|bookworm-backports|trixie-backports|sid [SCENARIO...]" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
name=$2
shift 2

log() { echo "test-vm-kernel: $*" >&2; }

chroot='' kver='' kernel='' kdir='' upstream_src=''
if [ "$name" = bookworm ]; then
	# The host's own kernel, as the plain suite runs it, for the same table.
	# shellcheck source=tests/vm/lib.sh
	kver=$(. "$root/tests/vm/lib.sh" && echo "$VM_KVER")
	kernel=/boot/vmlinuz-$kver
	kdir=/lib/modules/$kver/build
else
	eval "$("$root/scripts/kernel-chroot.sh" "$name")"
fi
out=$build/$name
mkdir -p "$out"

# shellcheck source=scripts/vm-kernel-modules.inc
. "$root/scripts/vm-kernel-modules.inc"
wbkit_builds=yes
vm_build_modules "$root" "$kdir" "$kver" "$out" "$chroot" "$upstream_src" || wbkit_builds=no
# The compiler the kernel was built with, which the suite's headers use too.
compiler=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p' "$chroot$kdir/.config")
summary_line() {
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' \
		"$kver" "$name" "${compiler:-unknown}" "$wbkit_builds" "$1" "$upstream_builds" "$(date -u +%Y-%m-%d)" |
		tee "$out/summary"
}
upstream_builds=yes
if [ "$wbkit_builds" = no ]; then
	upstream_builds="not tried"
	summary_line "no VM run"
	exit 1
fi
if [ -n "$VM_UPSTREAM_WHY" ]; then
	upstream_builds="no: $VM_UPSTREAM_WHY"
	log "$VM_UPSTREAM_WHY: the upstream parts of the scenarios are left out"
fi
export VM_UPSTREAM_WHY

export VM_KVER=$kver VM_KERNEL=$kernel VM_MODROOT=$chroot
# Own initramfs and logs: the default kernel's stay usable next to these.
export VM_WORK=$out/vm-work
export VM_LOG_DIR=$out/vm-logs
log "kernel $VM_KVER ($VM_KERNEL), logs in $VM_LOG_DIR"
rc=0
"$root/tests/vm/run-all.sh" "$build" "$@" 2>&1 | tee "$out/run-all.log" || rc=$?
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out/run-all.log" | tail -n 1)
partial=$(grep -c '^PASS .* partial: ' "$out/run-all.log" || true)
[ -z "$summary" ] || summary="$summary ($partial of the passes without upstream's part)"
summary_line "${summary:-no summary}"
exit "$rc"
