#!/usr/bin/env bash
# Installs Debian's 6.12 kernel next to the default 6.1 for make test-vm-612
# (issue 27): linux-image-<kver> and linux-headers-<kver> from bookworm's
# archive, and dwarves (pahole, for the modules' BTF).
#
#   scripts/install-k612.sh [KVER]     # e.g. 6.12.115+deb12-amd64; default: the newest in apt
#
# linux-image-amd64 stays on 6.1, and so does the harness (tests/vm/lib.sh
# boots the release that package depends on). The image's postinst runs
# every DKMS package's autoinstall: Debian's dm-writeboost-dkms 2.2.17 does
# not build on 6.12, and dkms 3.0.10 counts that (or a module excluded by
# BUILD_EXCLUSIVE_KERNEL) as a failure that leaves the package unconfigured,
# which makes every later apt-get run fail. So the install runs with DKMS
# autoinstall off (/etc/dkms/no-autoinstall, removed again after).
set -euo pipefail

kver=${1:-}
if [ -z "$kver" ]; then
	kver=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64$' |
		awk '{ print $1 }' | sed 's/^linux-image-//' | sort -V | tail -n 1)
	[ -n "$kver" ] || { echo "install-k612: no linux-image-6.12.*+deb12-amd64 in apt (apt-get update?)" >&2; exit 1; }
fi
pkgs=("linux-image-$kver" "linux-headers-$kver" dwarves)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "install-k612: $kver installed"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "install-k612: need root to install ${missing[*]}" >&2; exit 1; }

created=0
if [ ! -e /etc/dkms/no-autoinstall ]; then
	mkdir -p /etc/dkms
	touch /etc/dkms/no-autoinstall
	created=1
fi
cleanup() { [ "$created" = 0 ] || rm -f /etc/dkms/no-autoinstall; }
trap cleanup EXIT
export DEBIAN_FRONTEND=noninteractive
# -f first: an earlier install without this script left the image unconfigured.
apt-get install -y -q -f >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "install-k612: $kver installed (make test-vm-612)"
