#!/usr/bin/env bash
# Installs every build and test dependency of wbkit from Debian's archive.
# Idempotent: packages already present are left alone, and apt-get update runs
# only when something is missing.
set -euo pipefail

# Host build and test of the library, the tools and the Python module.
BUILD_PACKAGES=(
	build-essential cmake pkg-config
	libcli11-dev libfmt-dev libcrypto++-dev libisal-dev libgtest-dev nlohmann-json3-dev
	# wbctl names what a cache device holds with libblkid (util-linux).
	libblkid-dev
	pybind11-dev python3-dev python3-pytest python3-matplotlib
	zstd clang libclang-rt-14-dev clang-format-14 util-linux xxd time strace
	linux-source-6.1
	scdoc man-db bash-completion dpkg-dev python3-jsonschema
	# wbstat --prometheus is checked with the Prometheus client library's parser.
	python3-prometheus-client
	# The Grafana dashboard's queries run on a real Prometheus
	# (tests/cli/test_grafana_dashboard.py). With its web UI's JavaScript: 23 MB
	# to fetch, 325 MB installed (218 MB of it libjs-moment-timezone), seconds.
	prometheus
	# The Debian packages (make deb) and their checks (lintian; make test-deb-root).
	debhelper dh-dkms dh-python lintian debootstrap
)
# Kernel module build and the in-VM tests.
VM_PACKAGES=(
	linux-image-amd64 linux-headers-amd64 qemu-system-x86 qemu-utils
	busybox-static dmsetup fio kmod cpio dm-writeboost-dkms dkms dbench e2fsprogs
	# The hard-disk model of the benchmarks (bench/hdd), an nbdkit filter.
	nbdkit nbdkit-plugin-dev
	# make-bcache for the guest: bcache in tests/crash/peers.sh and bench/vm-peers.sh.
	bcache-tools
	# The foreign devices the format guard must refuse
	# (tests/vm/scenarios/99-wbkit-format-guard-all.sh, the probe_signature
	# tests): each made with its own tool on the host.
	xfsprogs btrfs-progs f2fs-tools nilfs-tools jfsutils reiserfsprogs xorriso
	cryptsetup-bin lvm2 fdisk
	# Other Debian kernels come in debootstrap chroots (scripts/kernel-chroot.sh:
	# make test-kernel-build, make test-kernels); their modules are .ko.xz.
	debootstrap xz-utils
)

want=("${BUILD_PACKAGES[@]}")
if [ "${WBKIT_NO_VM:-0}" != 1 ]; then
	want+=("${VM_PACKAGES[@]}")
fi

missing=()
for pkg in "${want[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$pkg")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: need root to install: ${missing[*]}" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
