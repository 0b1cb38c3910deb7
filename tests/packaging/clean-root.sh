#!/usr/bin/env bash
# The Debian packages on a clean Debian 12: install them with apt into a fresh
# minimal root (debootstrap --variant=minbase bookworm), use them, purge them,
# and check that nothing stays behind. Also checks that a kernel the module
# does not build for still installs: a stand-in kernel package, whose "headers"
# fail every build, must configure with dm-wbkit-dkms installed.
#
#   tests/packaging/clean-root.sh DEB_DIR     (make test-deb-root)
#
# Needs root and the Debian archive. The minimal system is made once and kept
# in $WBKIT_BOOKWORM_BASE (default /var/tmp/wbkit-bookworm-minbase); each run
# works on a copy of it, $WBKIT_DEB_ROOT (default /var/tmp/deb-root), made anew.
set -euo pipefail

debs=$(realpath "${1:?usage: clean-root.sh DEB_DIR}")
base=${WBKIT_BOOKWORM_BASE:-/var/tmp/wbkit-bookworm-minbase}
root=${WBKIT_DEB_ROOT:-/var/tmp/deb-root}
mirror=${WBKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'clean-root: FAIL: %s\n' "$*" >&2; exit 1; }
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
apt_root() { in_root apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends "$@"; }

[ "$(id -u)" -eq 0 ] || fail "needs root (chroot)"
shopt -s nullglob
tools_deb=("$debs"/wbkit_*.deb)
python_deb=("$debs"/python3-wbkit_*.deb)
dkms_deb=("$debs"/dm-wbkit-dkms_*.deb)
[ ${#tools_deb[@]} -eq 1 ] && [ ${#python_deb[@]} -eq 1 ] && [ ${#dkms_deb[@]} -eq 1 ] ||
	fail "want one each of wbkit, python3-wbkit and dm-wbkit-dkms .deb in $debs (make deb)"
version=$(dpkg-deb -f "${tools_deb[0]}" Version)

if [ ! -x "$base/usr/bin/apt-get" ]; then
	step "debootstrap --variant=minbase bookworm $base"
	rm -rf "$base"
	debootstrap --variant=minbase bookworm "$base" "$mirror"
fi

cleanup() {
	umount "$root/proc" 2>/dev/null || true
}
trap cleanup EXIT
umount "$root/proc" 2>/dev/null || true
rm -rf "$root"
cp -a "$base" "$root"
mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No daemons start in the root.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mkdir -p "$root/tmp/debs"
cp "${tools_deb[0]}" "${python_deb[0]}" "${dkms_deb[0]}" "$root/tmp/debs/"
# Their paths inside the root.
in_root_debs=()
for deb in "${tools_deb[0]}" "${python_deb[0]}" "${dkms_deb[0]}"; do
	in_root_debs+=("/tmp/debs/$(basename "$deb")")
done

step "apt-get update"
apt_root update

# What the packages leave outside dpkg's and apt's own records.
snapshot() {
	in_root find / -xdev \( -path /proc -o -path /tmp -o -path /var/lib/dpkg -o -path /var/lib/apt \
		-o -path /var/cache -o -path /var/log \) -prune -o -print | sort
}
leftovers() {
	local found=0 path
	for path in /usr/sbin/wbdump /usr/sbin/wbreplay /usr/sbin/wbrecover /usr/sbin/wbstat \
		/usr/share/man/man8/wbdump.8.gz /usr/share/man/man4/dm-wbkit.4.gz \
		/usr/share/bash-completion/completions/wbdump \
		/usr/share/doc/wbkit /usr/share/doc/python3-wbkit /usr/share/doc/dm-wbkit-dkms /usr/share/wbkit \
		/usr/lib/python3/dist-packages/wbkit "/usr/lib/python3/dist-packages/wbkit-$version.dist-info" \
		"/usr/src/dm-wbkit-$version" /var/lib/dkms/dm-wbkit \
		/etc/kernel/postinst.d/dm-wbkit-dkms /etc/kernel/header_postinst.d/dm-wbkit-dkms; do
		if [ -e "$root$path" ] || [ -L "$root$path" ]; then
			echo "left behind: $path" >&2
			found=1
		fi
	done
	return $found
}

step "install wbkit, python3-wbkit, dm-wbkit-dkms (and man-db to read the pages)"
apt_root install man-db "${in_root_debs[@]}"

step "use them"
for tool in wbdump wbreplay wbrecover wbstat; do
	out=$(in_root "$tool" --version)
	echo "$out"
	[ "$(echo "$out" | cut -d' ' -f1-2)" = "$tool $version" ] || fail "$tool --version: $out"
	in_root man -P cat "$tool" >"$root/tmp/man.txt"
	grep -q "^NAME" "$root/tmp/man.txt" || fail "man $tool"
done
in_root man -P cat 4 dm-wbkit >"$root/tmp/man.txt"
grep -q "^NAME" "$root/tmp/man.txt" || fail "man 4 dm-wbkit"
in_root test -f /usr/share/doc/wbkit/schemas/wbdump-1.schema.json || fail "no JSON schema"
in_root test -f /usr/share/wbkit/grafana/wbkit-dashboard.json || fail "no Grafana dashboard"
out=$(in_root python3 -c 'import importlib.metadata as m, wbkit; print(wbkit.__version__, m.version("wbkit"), wbkit.__file__)')
echo "python3: $out"
[ "$out" = "$version $version /usr/lib/python3/dist-packages/wbkit/__init__.py" ] || fail "import wbkit: $out"
in_root test -d /usr/lib/python3/dist-packages/wbkit/__pycache__ || fail "python3-wbkit was not byte-compiled (py3compile)"
status=$(in_root dkms status -m dm-wbkit -v "$version")
echo "dkms: $status"
[ -n "$status" ] || fail "dm-wbkit is not registered with DKMS"
in_root dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' wbkit python3-wbkit dm-wbkit-dkms | grep -v '^ii ' &&
	fail "a package is not configured"

step "a kernel whose module build fails still configures"
# A stand-in for linux-image-X + linux-headers-X: its "headers" make every
# build fail, and its postinst runs the kernel hooks as Debian's kernels do.
kver=9.9.9-wbkit-fails
pkgdir=$root/tmp/fake-kernel
mkdir -p "$pkgdir/DEBIAN" "$pkgdir/usr/lib/wbkit-fake-kernel/$kver/build/include" "$pkgdir/boot"
# DKMS's common.postinst finds the newest kernel by its /boot/config-*.
: >"$pkgdir/boot/config-$kver"
printf 'modules clean:\n\t@echo "this stand-in kernel builds nothing"; exit 1\n' \
	>"$pkgdir/usr/lib/wbkit-fake-kernel/$kver/build/Makefile"
cat >"$pkgdir/DEBIAN/control" <<CONTROL
Package: wbkit-fake-kernel
Version: 1
Architecture: all
Maintainer: wbkit developers <wbkit-devel@lists.wbkit.org>
Description: stand-in kernel for the packaging test
CONTROL
cat >"$pkgdir/DEBIAN/postinst" <<POSTINST
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
	mkdir -p /lib/modules/$kver
	ln -sfn /usr/lib/wbkit-fake-kernel/$kver/build /lib/modules/$kver/build
	run-parts --report --exit-on-error --arg=$kver --arg=/boot/vmlinuz-$kver /etc/kernel/postinst.d
	run-parts --report --exit-on-error --arg=$kver /etc/kernel/header_postinst.d
fi
POSTINST
cat >"$pkgdir/DEBIAN/postrm" <<POSTRM
#!/bin/sh
set -e
if [ "\$1" = remove ] || [ "\$1" = purge ]; then
	rm -rf /lib/modules/$kver
fi
POSTRM
chmod 755 "$pkgdir/DEBIAN/postinst" "$pkgdir/DEBIAN/postrm"
dpkg-deb -b --root-owner-group "$pkgdir" "$root/tmp/wbkit-fake-kernel.deb" >/dev/null
apt_root install /tmp/wbkit-fake-kernel.deb >"$root/tmp/fake-kernel.log" 2>&1 || {
	cat "$root/tmp/fake-kernel.log"
	fail "installing the stand-in kernel failed"
}
cat "$root/tmp/fake-kernel.log"
grep -q "could not be built for kernel $kver" "$root/tmp/fake-kernel.log" || fail "the hook did not try (and fail) to build for $kver"
in_root dpkg-query -W -f='${db:Status-Abbrev}\n' wbkit-fake-kernel | grep -q '^ii ' || fail "the kernel package is not configured"
echo "ok: the stand-in kernel configured, with a warning"

step "dm-wbkit-dkms configures when the module fails to build for the newest kernel"
# On an upgrade (here a reinstall), common.postinst builds for the newest kernel.
apt_root install --reinstall "${in_root_debs[2]}" >"$root/tmp/reinstall.log" 2>&1 || {
	cat "$root/tmp/reinstall.log"
	fail "reinstalling dm-wbkit-dkms failed"
}
cat "$root/tmp/reinstall.log"
grep -q "could not be built for every kernel" "$root/tmp/reinstall.log" || fail "no build for the newest kernel was tried"
in_root dpkg-query -W -f='${db:Status-Abbrev}\n' dm-wbkit-dkms | grep -q '^ii ' || fail "dm-wbkit-dkms is not configured"
apt_root purge wbkit-fake-kernel
echo "ok: dm-wbkit-dkms configured, with a warning"

step "purge"
apt_root purge wbkit python3-wbkit dm-wbkit-dkms
leftovers || fail "files left after purge"
before=$(snapshot)

step "install and purge again: the root must be as it was"
apt_root install "${in_root_debs[@]}"
in_root python3 -c 'import wbkit' || fail "import wbkit (second install)"
apt_root purge wbkit python3-wbkit dm-wbkit-dkms
after=$(snapshot)
if [ "$before" != "$after" ]; then
	diff <(echo "$before") <(echo "$after") >&2 || true
	fail "the root differs after install and purge"
fi
leftovers || fail "files left after purge"

echo
echo "clean-root: ok: wbkit, python3-wbkit and dm-wbkit-dkms $version install on a clean Debian 12, work, purge without leftovers; a kernel the module fails to build for still configures"
