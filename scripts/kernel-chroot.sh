#!/usr/bin/env bash
# A Debian kernel other than the host's, in a debootstrap chroot (issue 37):
# its image, modules and headers, the suite's own compiler, and upstream's
# dm-writeboost sources of the same suite, unpacked (not installed: DKMS
# would try to build them there). The host's packages stay as they are.
#
#   scripts/kernel-chroot.sh KERNEL [headers]
#
# KERNEL is one of:
#   bookworm-backports   6.12 (Debian 12's backports)
#   trixie-backports     trixie's backports (7.x)
#   sid                  sid's newest
# "headers" leaves the image out (the build check of make test needs only
# the headers and the compiler).
#
# The chroot is kept in $WBKIT_CHROOT_DIR (default /var/cache/wbkit/chroots),
# outside the clone, and reused; after WBKIT_CHROOT_MAX_AGE days (default 7)
# apt updates it, so "newest" stays true. On success it prints shell
# assignments for the caller to eval:
#   chroot=DIR kver=RELEASE kernel=DIR/boot/vmlinuz-RELEASE (empty: headers only)
#   kdir=/usr/src/linux-headers-RELEASE (inside the chroot) upstream_src=... (inside)
set -euo pipefail

usage() { echo "usage: $0 bookworm-backports|trixie-backports|sid [headers]" >&2; exit 2; }
[ $# -ge 1 ] || usage
name=$1
want_image=1
[ "${2:-}" = headers ] && want_image=0
mirror=${WBKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
case "$name" in
bookworm-backports) suite=bookworm target=bookworm-backports ;;
trixie-backports) suite=trixie target=trixie-backports ;;
sid) suite=sid target=sid ;;
*) usage ;;
esac

log() { echo "kernel-chroot: $*" >&2; }
[ "$(id -u)" -eq 0 ] || { log "needs root (debootstrap, chroot)"; exit 1; }
command -v debootstrap >/dev/null || { log "debootstrap not installed (apt-get install debootstrap)"; exit 1; }

base=${WBKIT_CHROOT_DIR:-/var/cache/wbkit/chroots}
dir=$base/$name
mkdir -p "$base"
# One user of a chroot at a time: make test and make test-kernels may meet.
exec 9>"$base/$name.lock"
flock 9

# sid's Release file can be past its Valid-Until date.
apt_opts=(-o Acquire::Check-Valid-Until=false -o APT::Install-Recommends=false -o Dpkg::Use-Pty=0 -q -y)
in_chroot() {
	chroot "$dir" env DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
# Builds in the chroot need /proc (objtool reads it); mounted for the
# duration of this script only when it is not already.
mounted_proc=0
cleanup() {
	[ "$mounted_proc" = 0 ] || umount "$dir/proc" 2>/dev/null || true
}
trap cleanup EXIT
mount_proc() {
	if ! mountpoint -q "$dir/proc"; then
		mount -t proc proc "$dir/proc"
		mounted_proc=1
	fi
}

if [ ! -e "$dir/.wbkit-bootstrapped" ]; then
	! mountpoint -q "$dir/proc" || umount "$dir/proc"
	rm -rf "$dir"
	log "debootstrap $suite into $dir (a few minutes, once)"
	debootstrap --variant=minbase "$suite" "$dir" "$mirror" >"$base/$name.debootstrap.log" 2>&1 ||
		{ log "debootstrap failed: $base/$name.debootstrap.log"; tail -n 5 "$base/$name.debootstrap.log" >&2; exit 1; }
	{
		echo "deb $mirror $suite main"
		[ "$target" = "$suite" ] || echo "deb $mirror $target main"
	} >"$dir/etc/apt/sources.list"
	touch "$dir/.wbkit-bootstrapped"
	rm -f "$dir/.wbkit-updated"
fi

mount_proc
stamp=$dir/.wbkit-updated
max_age=${WBKIT_CHROOT_MAX_AGE:-7}
pkgs=(linux-headers-amd64 binutils make)
[ "$want_image" = 0 ] || pkgs+=(linux-image-amd64)
missing=0
for p in "${pkgs[@]}"; do
	in_chroot dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing=1
done
if [ "$missing" = 1 ] || [ ! -e "$stamp" ] || [ -n "$(find "$stamp" -mtime +"$max_age")" ]; then
	log "apt in $dir: ${pkgs[*]} from $target"
	{
		in_chroot apt-get "${apt_opts[@]}" update &&
			in_chroot apt-get "${apt_opts[@]}" -t "$target" install "${pkgs[@]}" &&
			in_chroot apt-get "${apt_opts[@]}" -t "$target" upgrade &&
			in_chroot apt-get "${apt_opts[@]}" clean
	} >"$base/$name.apt.log" 2>&1 || { log "apt failed: $base/$name.apt.log"; tail -n 5 "$base/$name.apt.log" >&2; exit 1; }
	# Upstream's sources, unpacked where they would be installed.
	rm -rf "$dir/opt/dm-writeboost"
	mkdir -p "$dir/opt/dm-writeboost"
	if (cd "$dir/tmp" && rm -f dm-writeboost-dkms_*.deb &&
		in_chroot sh -c "cd /tmp && apt-get ${apt_opts[*]} -t $target download dm-writeboost-dkms") >>"$base/$name.apt.log" 2>&1; then
		dpkg-deb -x "$dir"/tmp/dm-writeboost-dkms_*.deb "$dir/opt/dm-writeboost"
		rm -f "$dir"/tmp/dm-writeboost-dkms_*.deb
	else
		log "no dm-writeboost-dkms in $target"
	fi
	touch "$stamp"
fi

# The release the meta package depends on: the suite's newest kernel.
kver=$(in_chroot dpkg-query -W -f='${Depends}' linux-headers-amd64 | grep -o 'linux-headers-[^ ,]*' | head -n 1)
kver=${kver#linux-headers-}
[ -n "$kver" ] && [ -d "$dir/usr/src/linux-headers-$kver" ] || { log "no linux-headers for the suite's kernel in $dir"; exit 1; }
kernel=
if [ "$want_image" = 1 ]; then
	kernel=$dir/boot/vmlinuz-$kver
	[ -r "$kernel" ] || { log "no $kernel"; exit 1; }
fi
upstream_src=$(cd "$dir" && printf '%s\n' opt/dm-writeboost/usr/src/dm-writeboost-*/ 2>/dev/null | sort -V | tail -n 1)
upstream_src=${upstream_src%/}
if [ -n "$upstream_src" ] && [ -d "$dir/$upstream_src" ]; then upstream_src=/$upstream_src; else upstream_src=; fi
printf 'chroot=%q kver=%q kernel=%q kdir=%q upstream_src=%q\n' "$dir" "$kver" "$kernel" "/usr/src/linux-headers-$kver" "$upstream_src"
