#!/usr/bin/env bash
# The Debian 12 root that tests/initramfs/boot-guard.sh boots with systemd:
# debootstrap minbase, then linux-image-<kver> (the kernel of the VM tests),
# systemd as init, udev, dmsetup, e2fsprogs and initramfs-tools, and an
# initramfs made by update-initramfs without wbkit's hook (the systemd path
# is the one under test, not the initramfs one). Kept in
# $WBKIT_BOOT_GUARD_CACHE (default /var/cache/wbkit/boot-guard-root) between
# runs; made again when <kver> or this script's package list changes.
#
#   tests/initramfs/boot-guard-root.sh     (root; prints the root's path)
#
# Needs debootstrap and Debian's archive the first time.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# VM_KVER.
source "$here/../vm/lib.sh"
kver=$VM_KVER
cache=${WBKIT_BOOT_GUARD_CACHE:-/var/cache/wbkit/boot-guard-root}
root=$cache/root
mirror=${WBKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${WBKIT_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
packages="linux-image-$kver systemd systemd-sysv udev kmod dmsetup e2fsprogs initramfs-tools util-linux"
want="kver=$kver packages=$packages"

fail() {
	printf 'boot-guard-root: FAIL: %s\n' "$*" >&2
	exit 1
}
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot)"
if [ "$(cat "$cache/.wbkit-boot-guard-root" 2>/dev/null)" = "$want" ] && [ -r "$cache/initrd.img" ]; then
	echo "$root"
	exit 0
fi

cleanup() { umount "$root/proc" 2>/dev/null || true; }
trap cleanup EXIT
mkdir -p "$cache"
umount "$root/proc" 2>/dev/null || true
rm -rf "$root" "$cache/initrd.img" "$cache/.wbkit-boot-guard-root"
t0=$SECONDS
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$cache/debootstrap.log" >&2; fail "debootstrap failed (log $cache/debootstrap.log)"; }
echo "boot-guard-root: debootstrap took $((SECONDS - t0)) s" >&2
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security_mirror bookworm-security main
SOURCES
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No services start in the chroot while packages are installed.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
# The host's copy of the kernel package, if apt kept it, saves the download.
cp /var/cache/apt/archives/linux-image-"$kver"_*.deb "$root/var/cache/apt/archives/" 2>/dev/null || true
mount -t proc proc "$root/proc"
t1=$SECONDS
# shellcheck disable=SC2086 # the list is words
{ in_root apt-get -q update && in_root apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends install $packages; } \
	>"$cache/apt.log" 2>&1 || { tail -n 40 "$cache/apt.log" >&2; fail "apt-get install in the root failed (log $cache/apt.log)"; }
in_root apt-get clean
echo "boot-guard-root: apt-get install took $((SECONDS - t1)) s" >&2
# The initramfs only has to find the root (virtio, ext4): MODULES=dep would
# look at the chroot's host, so the default (most) stays.
[ -r "$root/boot/initrd.img-$kver" ] || in_root update-initramfs -c -k "$kver" >"$cache/update-initramfs.log" 2>&1 ||
	{ cat "$cache/update-initramfs.log" >&2; fail "update-initramfs failed"; }
umount "$root/proc"
rm -f "$root/usr/sbin/policy-rc.d"
cp "$root/boot/initrd.img-$kver" "$cache/initrd.img"
cp "$root/boot/vmlinuz-$kver" "$cache/vmlinuz"
echo wbguard >"$root/etc/hostname"
echo "$want" >"$cache/.wbkit-boot-guard-root"
echo "boot-guard-root: made in $((SECONDS - t0)) s" >&2
echo "$root"
