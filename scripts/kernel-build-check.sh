#!/usr/bin/env bash
# make test-kernel-build (part of make test, issue 37): dm-wbkit builds,
# without a VM, against the newest kernel headers Debian has, with that
# suite's compiler, so a kernel API change fails CI the day it reaches Debian.
#
#   scripts/kernel-build-check.sh BUILD_DIR [KERNEL]
#
# Without KERNEL: whichever of sid and trixie-backports has the newer
# linux-headers-amd64 (backports can be ahead of sid), read from the
# archive's indexes without touching the host's apt state. The chroot is
# scripts/kernel-chroot.sh's, headers only; upstream's module is built too
# and its result printed, not judged (it stopped building on 7.2).
set -euo pipefail

if [ $# -lt 1 ]; then
	echo "usage: $0 BUILD_DIR [sid|trixie-backports|bookworm-backports]" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
name=${2:-}
mirror=${WBKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

log() { echo "kernel-build-check: $*" >&2; }

# The version of linux-headers-amd64 in SUITE, from a private apt state.
headers_version() {
	local suite=$1 tmp
	tmp=$(mktemp -d)
	mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
	: >"$tmp/status"
	echo "deb $mirror $suite main" >"$tmp/sources.list"
	local opts=(-o Dir::Etc::SourceList="$tmp/sources.list" -o Dir::Etc::SourceParts=/nonexistent
		-o Dir::State::Lists="$tmp/lists" -o Dir::State::status="$tmp/status" -o Dir::Cache="$tmp/cache"
		-o Acquire::Check-Valid-Until=false -o Acquire::Languages=none -o APT::Get::List-Cleanup=false -q)
	apt-get "${opts[@]}" update >"$tmp/update.log" 2>&1 || { cat "$tmp/update.log" >&2; rm -rf "$tmp"; return 1; }
	apt-cache "${opts[@]}" show linux-headers-amd64 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -n 1
	rm -rf "$tmp"
}

if [ -z "$name" ]; then
	sid=$(headers_version sid) || { log "cannot read sid's index from $mirror"; exit 1; }
	bpo=$(headers_version trixie-backports) || { log "cannot read trixie-backports' index from $mirror"; exit 1; }
	log "linux-headers-amd64: sid ${sid:-none}, trixie-backports ${bpo:-none}"
	name=sid
	if [ -n "$bpo" ] && dpkg --compare-versions "$bpo" gt "${sid:-0}"; then
		name=trixie-backports
	fi
fi

# shellcheck disable=SC2034 # kernel: set by the eval, not needed here
chroot='' kver='' kernel='' kdir='' upstream_src=''
eval "$("$root/scripts/kernel-chroot.sh" "$name" headers)"
out=$build/build-check-$name
compiler=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\(.*\)"$/\1/p' "$chroot$kdir/.config")
# shellcheck source=scripts/vm-kernel-modules.inc
. "$root/scripts/vm-kernel-modules.inc"
if ! vm_build_modules "$root" "$kdir" "$kver" "$out" "$chroot" "$upstream_src"; then
	log "FAILED: dm-wbkit does not build on $name's $kver (${compiler:-compiler unknown})"
	exit 1
fi
modinfo -F vermagic "$out/dm-wbkit.ko" | grep -q "^$kver " ||
	{ log "FAILED: $out/dm-wbkit.ko is not built for $kver"; exit 1; }
log "ok: dm-wbkit builds on $name's $kver (${compiler:-compiler unknown})"
log "upstream: ${VM_UPSTREAM_WHY:-builds there too}"
