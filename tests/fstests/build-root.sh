#!/usr/bin/env bash
# The root disk of the fstests VM (issue 58): a raw ext4 image of Debian 12
# (`debootstrap --variant=minbase bookworm`) with what fstests needs to run,
# fstests itself built from ../shared/fstests/xfstests-*.tar.gz (or
# FSTESTS_SRC=, a tarball or an unpacked tree) in /opt/xfstests, its test
# users, and the modules of the VM tests' kernel (VM_KVER, tests/vm/lib.sh) in
# /lib/modules/<kver> with depmod run. tests/fstests/run.sh boots it
# read-only (qemu snapshot=on), so one image serves every run.
#
#   tests/fstests/build-root.sh        (root; prints the image's path)
#
# Built once into $WBKIT_FSTESTS_CACHE/fstests-root-<hash>/root.img (default
# /var/cache/wbkit, as scripts/build-kdebug.sh and the chroots), where <hash>
# covers this script, the fstests source and the kernel's modules; a change
# to any of them builds a new image and removes the older ones. The
# debootstrapped tree with its packages is kept beside it in
# fstests-tree-<hash of the package lists and mirrors>/ (about 1 GB), so a
# change to the script or the source only builds fstests and the image again,
# and the .debs in fstests-debs/, so a new tree downloads only what changed.
# Everything runs with nice -n 19 and ionice -c3, and fstests is built with
# make -j$FSTESTS_JOBS (default 2).
#
# FSTESTS_ROOT_STOP_AFTER=packages stops once the packages are installed
# (downloads and unpacks only, for a machine that is busy); the next run
# goes on from there.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# VM_KVER, VM_MODROOT, WBKIT_ROOT.
source "$here/../vm/lib.sh"
kver=$VM_KVER
moddir=$VM_MODROOT/lib/modules/$kver
mirror=${WBKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${WBKIT_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
base=${WBKIT_FSTESTS_CACHE:-/var/cache/wbkit}
jobs=${FSTESTS_JOBS:-2}
stop_after=${FSTESTS_ROOT_STOP_AFTER:-}

# What fstests runs with (README, "Ubuntu or Debian", less git, the kernel
# headers and the optional file systems), and what it is built with
# (../shared/fstests/README.md). udev makes the /dev/mapper links of the
# dm devices the tests create (dm-flakey, dm-log-writes, dm-thin).
RUN_PACKAGES="bash perl xfsprogs xfsdump e2fsprogs attr acl quota fio dmsetup util-linux uuid-runtime
	psmisc bc gawk sed procps kmod udev python3 dbench sqlite3 file libcap2-bin xz-utils
	liburing2 libaio1"
BUILD_PACKAGES="autoconf automake libtool libtool-bin make gcc pkg-config xfslibs-dev uuid-dev
	libattr1-dev libacl1-dev libaio-dev liburing-dev libgdbm-dev libgdbm-compat-dev libssl-dev libcap-dev"

log() { echo "fstests-root: $*" >&2; }
fail() {
	log "FAIL: $*"
	exit 1
}
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || fail "debootstrap not installed (scripts/install-deps.sh)"
[ -d "$moddir" ] || fail "no modules of $kver in $moddir"

# The fstests source: a tarball (default: the newest in ../shared/fstests)
# or a tree.
src=${FSTESTS_SRC:-}
if [ -z "$src" ]; then
	# shellcheck disable=SC2012 # the names are ours
	src=$(ls "$WBKIT_ROOT"/../shared/fstests/xfstests-*.tar.gz 2>/dev/null | sort | tail -n 1 || true)
	[ -n "$src" ] || fail "no fstests source: ../shared/fstests/xfstests-*.tar.gz missing, set FSTESTS_SRC"
fi
[ -e "$src" ] || fail "FSTESTS_SRC=$src does not exist"
src=$(cd "$(dirname "$src")" && pwd)/$(basename "$src")
if [ -d "$src" ]; then
	src_sum=$(cd "$src" && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
else
	src_sum=$(sha256sum <"$src" | cut -d' ' -f1)
fi

# The inputs: this script (package lists and steps), the source, the kernel's
# modules (a new package of the same release replaces them).
inputs="script $(sha256sum <"$0" | cut -d' ' -f1)
fstests $src_sum
kver $kver $(stat -L -c '%s %Y' "$moddir/modules.dep" "$moddir/modules.order" | tr '\n' ' ')"
hash=$(printf '%s\n' "$inputs" | sha256sum | cut -c1-16)
dir=$base/fstests-root-$hash
image=$dir/root.img
# The tree: debootstrap and the packages, then fstests and the modules.
# shellcheck disable=SC2086 # the lists are words
tree_hash=$(printf '%s\n' "$mirror $security_mirror" $RUN_PACKAGES $BUILD_PACKAGES | sha256sum | cut -c1-16)
tree=$base/fstests-tree-$tree_hash

mkdir -p "$base"
exec 9>"$base/fstests-root.lock"
flock 9
if [ -r "$image" ] && [ "$(cat "$dir/inputs" 2>/dev/null)" = "$inputs" ]; then
	echo "$image"
	exit 0
fi

debs=$base/fstests-debs
mkdir -p "$dir" "$debs/partial"
low() { nice -n 19 ionice -c3 "$@"; }
in_root() { low chroot "$tree" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }
cleanup() {
	umount "$tree/proc" 2>/dev/null || true
	umount "$tree/var/cache/apt/archives" 2>/dev/null || true
}
trap cleanup EXIT
cleanup
t0=$SECONDS

# 1. debootstrap (restarted from scratch when it did not finish).
if [ ! -e "$tree/.wbkit-debootstrap" ]; then
	# Never through a mount that the cleanup left (the deb cache).
	! mountpoint -q "$tree/var/cache/apt/archives" 2>/dev/null || fail "$tree/var/cache/apt/archives still mounted"
	rm -rf "$tree"
	log "debootstrap bookworm into $tree (debs cached in $debs)"
	low debootstrap --variant=minbase --cache-dir="$debs" bookworm "$tree" "$mirror" >"$tree.debootstrap.log" 2>&1 ||
		{ tail -n 20 "$tree.debootstrap.log" >&2; fail "debootstrap failed (log $tree.debootstrap.log)"; }
	touch "$tree/.wbkit-debootstrap"
	log "debootstrap took $((SECONDS - t0)) s"
fi

# 2. The packages; apt's archive is the shared deb cache.
if [ ! -e "$tree/.wbkit-packages" ]; then
	t1=$SECONDS
	cat >"$tree/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security_mirror bookworm-security main
SOURCES
	cp /etc/resolv.conf "$tree/etc/resolv.conf"
	# No services start in the chroot while packages are installed.
	printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"
	chmod 755 "$tree/usr/sbin/policy-rc.d"
	mount -t proc proc "$tree/proc"
	mount --bind "$debs" "$tree/var/cache/apt/archives"
	# shellcheck disable=SC2086 # the lists are words
	{ in_root apt-get -q update &&
		in_root apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends install $RUN_PACKAGES $BUILD_PACKAGES; } \
		>"$tree.apt.log" 2>&1 || { tail -n 40 "$tree.apt.log" >&2; fail "apt-get install in the root failed (log $tree.apt.log)"; }
	cleanup
	rm -f "$tree/usr/sbin/policy-rc.d"
	touch "$tree/.wbkit-packages"
	log "apt-get install took $((SECONDS - t1)) s"
fi
if [ "$stop_after" = packages ]; then
	log "stopped after the packages (FSTESTS_ROOT_STOP_AFTER=packages)"
	exit 0
fi

# 3. fstests, built in place in /opt/xfstests (./check runs from there),
# again when the source or this script changed.
if [ "$(cat "$tree/.wbkit-fstests" 2>/dev/null)" != "$hash" ]; then
	t1=$SECONDS
	rm -rf "$tree/opt/xfstests"
	mkdir -p "$tree/opt/xfstests"
	if [ -d "$src" ]; then
		(cd "$src" && tar --exclude=.git -cf - .) | tar -xf - -C "$tree/opt/xfstests"
	else
		tar -xzf "$src" -C "$tree/opt/xfstests" --strip-components=1
	fi
	mount -t proc proc "$tree/proc"
	in_root sh -c "cd /opt/xfstests && make -j$jobs" >"$dir/fstests-build.log" 2>&1 ||
		{ tail -n 40 "$dir/fstests-build.log" >&2; fail "fstests build failed (log $dir/fstests-build.log)"; }
	cleanup
	if [ ! -x "$tree/opt/xfstests/check" ] || [ ! -x "$tree/opt/xfstests/ltp/fsx" ]; then
		fail "fstests built without check or ltp/fsx (log $dir/fstests-build.log)"
	fi
	echo "$src_sum $(basename "$src")" >"$tree/opt/xfstests/.wbkit-source"
	echo "$hash" >"$tree/.wbkit-fstests"
	log "fstests build took $((SECONDS - t1)) s"
fi

# 4. Users, the kernel's modules, and the image.
t1=$SECONDS
# The test users of fstests' README (step 6); names starting with a digit
# need --badname with Debian's shadow.
in_root sh -c 'id fsgqa >/dev/null 2>&1 || useradd -m fsgqa
	getent group fsgqa >/dev/null || groupadd fsgqa
	id fsgqa2 >/dev/null 2>&1 || useradd fsgqa2
	id 123456-fsgqa >/dev/null 2>&1 || useradd 123456-fsgqa 2>/dev/null || useradd --badname 123456-fsgqa' ||
	fail "adding the fsgqa users failed"
# mount and fstests read the mounts from /etc/mtab; nothing made it here.
ln -sfn ../proc/self/mounts "$tree/etc/mtab"
echo wbfstests >"$tree/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 wbfstests\n' >"$tree/etc/hosts"
rm -rf "$tree/lib/modules/$kver"
mkdir -p "$tree/lib/modules/$kver"
# The whole tree (fstests loads what its tests need: loop, scsi_debug,
# dm-thin-pool, ...), without the build and source links.
(cd "$moddir" && tar --exclude=./build --exclude=./source -cf - .) | tar -xf - -C "$tree/lib/modules/$kver"
depmod -b "$tree" "$kver"
in_root apt-get clean
size_mb=$(($(du -sm "$tree" | cut -f1) + 2048))
rm -f "$image.tmp"
truncate -s "${size_mb}M" "$image.tmp"
low mkfs.ext4 -q -F -L wbfstests -d "$tree" "$image.tmp" >"$dir/mkfs.log" 2>&1 ||
	{ cat "$dir/mkfs.log" >&2; fail "mkfs.ext4 -d failed"; }
mv -f "$image.tmp" "$image"
printf '%s\n' "$inputs" >"$dir/inputs"
log "modules and image ($size_mb MiB) took $((SECONDS - t1)) s; $image"
# The older images and trees go.
for old in "$base"/fstests-root-* "$base"/fstests-tree-*; do
	case $old in
	"$dir" | "$tree" | "$tree".*) ;;
	*)
		# A tree an interrupted build left may still have its mounts.
		umount "$old/proc" "$old/var/cache/apt/archives" 2>/dev/null || true
		if grep -q " $old/" /proc/mounts; then
			log "left $old: something is mounted in it"
		else
			rm -rf "$old"
		fi
		;;
	esac
done
log "made in $((SECONDS - t0)) s"
echo "$image"
