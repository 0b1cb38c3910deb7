#!/usr/bin/env bash
# Root on a writeboost device, booted by an initramfs that initramfs-tools
# made with our hook (packaging/initramfs/, installed by dm-wbkit-dkms):
#
#   1. a Debian 12 root (a copy of the debootstrap minbase of
#      make test-deb-root) gets linux-image-<kver> (the kernel the host boots
#      in its VM tests), initramfs-tools, busybox, udev and dmsetup; kept in
#      $WBKIT_INITRAMFS_CHROOT between runs;
#   2. dm-wbkit.ko is built for <kver> from the DKMS tree (make -C kmod
#      dkms-src) and installed where DKMS puts it, with the hook and the boot
#      script where the package puts them, /etc/writeboosttab (the backing
#      device by UUID=, the cache by its /dev/disk/by-id name, three
#      options; writeback_threshold=0, so the marker stays in the cache)
#      and /etc/fstab; update-initramfs -c -k <kver> in the root makes the
#      initramfs, whose file list is checked;
#   3. a small root file system (busybox, dmsetup, an init script) is made
#      in an ext4 image, the backing disk; the cache disk is all zeros, so
#      the first creation of the device formats it;
#   4. boot 1: qemu boots the root's kernel and initramfs with
#      root=/dev/mapper/wbroot; the init checks that / is that device and
#      that its table is writeboost with the writeboosttab's options, writes
#      a marker file, syncs and cuts the power (poweroff -f). The marker must
#      not be on the backing disk: it is in the cache's log only;
#   5. boot 2: the same; the target replays the log and the init finds the
#      marker;
#   6. boot 3: no cache disk. The boot script waits (the default bound,
#      max(30, rootdelay) seconds), names the missing cache device and
#      panics (panic=-1: reboot, which ends qemu); the backing disk is
#      untouched. Boot 4: the same with root=UUID=<the file system's UUID>,
#      which finds the backing disk itself: the script must panic rather
#      than let the backing disk be mounted without its cache
#      (writeboost.wait=3 shortens the wait);
#   7. with only upstream's dm-writeboost.ko built for <kver> (when the host
#      has it, VM_UPSTREAM_KO), the initramfs holds that one and boot 5
#      finds the marker through it; with a writeboosttab without entries, the
#      initramfs holds no module and no writeboosttab.
#
# Every boot has a time limit; shortly before it, the kernel is made to dump
# blocked tasks and all stacks (sysrq w and t through qemu's monitor) into
# the console log, which is kept in $WORK/logs. Prints the time of each step.
#
#   tests/initramfs/root-on-cache.sh        (make test-initramfs; root)
#
# About 4 minutes on the two shared cores (5 boots of 20-50 s, three
# update-initramfs of 25 s), and 5 more the first time, for the Debian root.
# WBKIT_INITRAMFS_BOOT_TIMEOUT (default 300 s, times VM_TIMEOUT_SCALE) limits
# each boot.
#
# Needs root (chroot), debootstrap, qemu, the headers of <kver>, and Debian's
# archive for the first run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# VM_KVER, VM_TIMEOUT_SCALE, _vm_copy_with_libs.
source "$here/../vm/lib.sh"
kver=$VM_KVER
base=${WBKIT_BOOKWORM_BASE:-/var/tmp/wbkit-bookworm-minbase}
chroot_dir=${WBKIT_INITRAMFS_CHROOT:-/var/tmp/wbkit-initramfs-chroot}
mirror=${WBKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${WBKIT_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
work=${WBKIT_INITRAMFS_WORK:-$VM_WORK/initramfs}
logs=$work/logs
boot_limit=$((${WBKIT_INITRAMFS_BOOT_TIMEOUT:-300} * VM_TIMEOUT_SCALE))
watchdog_margin=30
fs_uuid=6b1f2c1e-7a55-4c3e-9d0b-77a1ce0f0a27

test_tag=initramfs-test
source "$here/qemu-boot.inc"
in_chroot() { chroot "$chroot_dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

[ "$(id -u)" -eq 0 ] || fail "needs root (chroot)"
command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 missing"
[ -d "/lib/modules/$kver/build" ] || fail "no headers for $kver (/lib/modules/$kver/build): cannot build dm-wbkit.ko"
command -v busybox >/dev/null || fail "busybox-static missing"

cleanup() {
	umount "$chroot_dir/proc" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$work" "$logs"

step "build dm-wbkit.ko for $kver from the DKMS tree"
rm -rf "$work/kmod-src"
make -s -C "$WBKIT_ROOT/kmod" dkms-src DKMS_SRC="$work/kmod-src"
make -s -C "$work/kmod-src" KDIR="/lib/modules/$kver/build" >"$work/kmod-build.log" 2>&1 ||
	{ cat "$work/kmod-build.log"; fail "the module does not build"; }
ko=$work/kmod-src/dm-wbkit.ko
[ -f "$ko" ] || fail "no $ko"

step "Debian 12 root with linux-image-$kver, initramfs-tools, dmsetup ($chroot_dir)"
want="kver=$kver"
if [ "$(cat "$chroot_dir/.wbkit-initramfs" 2>/dev/null)" != "$want" ]; then
	if [ ! -x "$base/usr/bin/apt-get" ]; then
		rm -rf "$base"
		debootstrap --variant=minbase bookworm "$base" "$mirror"
	fi
	umount "$chroot_dir/proc" 2>/dev/null || true
	rm -rf "$chroot_dir"
	cp -a "$base" "$chroot_dir"
	cat >"$chroot_dir/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security_mirror bookworm-security main
SOURCES
	cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
	printf '#!/bin/sh\nexit 101\n' >"$chroot_dir/usr/sbin/policy-rc.d"
	chmod 755 "$chroot_dir/usr/sbin/policy-rc.d"
	# The host's copy of the kernel package, if apt kept it, saves the download.
	cp /var/cache/apt/archives/linux-image-"$kver"_*.deb "$chroot_dir/var/cache/apt/archives/" 2>/dev/null || true
	mount -t proc proc "$chroot_dir/proc"
	in_chroot apt-get -q update
	in_chroot apt-get -y -q -o Dpkg::Use-Pty=0 --no-install-recommends install \
		"linux-image-$kver" initramfs-tools busybox udev kmod dmsetup e2fsprogs >"$work/apt.log" 2>&1 ||
		{ tail -n 40 "$work/apt.log"; fail "apt-get install in the root failed"; }
	umount "$chroot_dir/proc"
	echo "$want" >"$chroot_dir/.wbkit-initramfs"
else
	echo "kept from an earlier run"
fi
[ -r "$chroot_dir/boot/vmlinuz-$kver" ] || fail "no /boot/vmlinuz-$kver in the root"

step "install the hook, the boot script, the module, writeboosttab and fstab; update-initramfs -c -k $kver"
install -D -m 0755 "$WBKIT_ROOT/packaging/initramfs/hook" "$chroot_dir/usr/share/initramfs-tools/hooks/dm-wbkit"
install -D -m 0755 "$WBKIT_ROOT/packaging/initramfs/local-top" "$chroot_dir/usr/share/initramfs-tools/scripts/local-top/dm-wbkit"
install -D -m 0644 "$WBKIT_ROOT/packaging/boot/writeboosttab.sh" "$chroot_dir/usr/lib/wbkit/writeboosttab.sh"
rm -rf "$chroot_dir/lib/modules/$kver/updates"
install -D -m 0644 "$ko" "$chroot_dir/lib/modules/$kver/updates/dkms/dm-wbkit.ko"
in_chroot depmod -a "$kver"
cat >"$chroot_dir/etc/writeboosttab" <<TAB
## name    backing (HDD)    cache (SSD)    options
wbroot  UUID=$fs_uuid  /dev/disk/by-id/virtio-wbcache  writeback_threshold=0,sync_data_interval=3600,update_sb_record_interval=60
TAB
cat >"$chroot_dir/etc/fstab" <<FSTAB
/dev/mapper/wbroot  /  ext4  errors=remount-ro  0  1
FSTAB
rm -f "$chroot_dir/boot/initrd.img-$kver"
mount -t proc proc "$chroot_dir/proc"
mkinitramfs_started=$SECONDS
in_chroot update-initramfs -c -k "$kver" 2>&1 | tee "$work/update-initramfs.log"
echo "update-initramfs took $((SECONDS - mkinitramfs_started)) s"
umount "$chroot_dir/proc"
initrd=$work/initrd.img
kernel=$work/vmlinuz
cp "$chroot_dir/boot/initrd.img-$kver" "$initrd"
cp "$chroot_dir/boot/vmlinuz-$kver" "$kernel"
grep -q '^W: dm-wbkit' "$work/update-initramfs.log" && fail "the hook warned"
lsinitramfs "$initrd" >"$work/initrd.list"
echo "initramfs: $(stat -c %s "$initrd") bytes, $(wc -l <"$work/initrd.list") entries"
for pattern in "lib/modules/$kver/updates/dkms/dm-wbkit.ko" "lib/modules/$kver/.*/dm-mod.ko" \
	"lib/modules/$kver/.*/libcrc32c.ko" "lib/modules/$kver/.*/crc32c" "sbin/dmsetup" \
	"etc/writeboosttab" "scripts/local-top/dm-wbkit" "usr/lib/wbkit/writeboosttab.sh" "conf/wbkit-module" "lib/udev/rules.d/55-dm.rules"; do
	grep -Eq "(^|/)$pattern" "$work/initrd.list" || fail "not in the initramfs: $pattern"
	echo "ok: in the initramfs: $(grep -E "(^|/)$pattern" "$work/initrd.list" | head -n 1)"
done
grep -q 'dm-writeboost' "$work/initrd.list" && fail "upstream's module is in the initramfs too"

step "root file system image (ext4 on the backing disk) and an empty cache disk"
tree=$work/rootfs
rm -rf "$tree"
mkdir -p "$tree"/{bin,sbin,usr/bin,usr/sbin,lib,etc,dev,proc,sys,run,tmp,root}
install -m 0755 "$(command -v busybox)" "$tree/bin/busybox"
for applet in $(busybox --list); do
	[ "$applet" = busybox ] || ln -s busybox "$tree/bin/$applet"
done
_vm_copy_with_libs "$tree" /usr/sbin/dmsetup
cp "$chroot_dir/etc/fstab" "$tree/etc/fstab"
cat >"$tree/sbin/wbinit" <<'INIT'
#!/bin/busybox sh
# The test's init: reports what the root file system is mounted from, then
# writes (wb.mode=write) or checks (wb.mode=check) the marker, and cuts the power.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mode=
token=
for x in $(cat /proc/cmdline); do
	case $x in
	wb.mode=*) mode=${x#wb.mode=} ;;
	wb.token=*) token=${x#wb.token=} ;;
	esac
done
echo "WB: init=running"
echo "WB: root_source=$(awk '$2 == "/" { s = $1 } END { print s }' /proc/mounts)"
echo "WB: root_devno=$(awk '$5 == "/" { d = $3 } END { print d }' /proc/self/mountinfo)"
echo "WB: wbroot_devno=$(dmsetup info -c --noheadings -o major,minor wbroot 2>&1)"
echo "WB: table=$(dmsetup table wbroot 2>&1)"
echo "WB: module=$(awk '$1 ~ /^dm_w/ { printf "%s%s", sep, $1; sep = "," }' /proc/modules)"
case $mode in
write)
	mount -o remount,rw / || echo "WB: error=remount"
	echo "$token" >/marker
	sync
	echo "WB: wrote=$(cat /marker)"
	;;
check)
	echo "WB: marker=$(cat /marker 2>/dev/null || echo missing)"
	;;
esac
echo "WB: status=$(dmsetup status wbroot 2>&1)"
echo "WB: init=done"
poweroff -f
INIT
chmod 0755 "$tree/sbin/wbinit"
rm -f "$work/backing.img" "$work/cache.img"
truncate -s 96M "$work/backing.img"
mkfs.ext4 -q -F -L wbroot -U "$fs_uuid" -d "$tree" "$work/backing.img"
truncate -s 32M "$work/cache.img"

# boot <name> <extra kernel arguments> <with cache: yes|no>: boots the root's
# kernel and initramfs (qemu_boot).
boot() {
	local drives=(-drive "file=$work/backing.img,format=raw,if=none,id=backing,cache=none"
		-device "virtio-blk-pci,drive=backing,serial=wbbacking")
	if [ "$3" = yes ]; then
		drives+=(-drive "file=$work/cache.img,format=raw,if=none,id=cache,cache=none"
			-device "virtio-blk-pci,drive=cache,serial=wbcache")
	fi
	qemu_boot "$1" "console=ttyS0 no_timer_check sysrq_always_enabled panic=-1 $2" \
		'task:|writeboost|Begin|ALERT' "${drives[@]}"
}
check_root_on_cache() {
	local table
	console_has "WB: init=running" || fail "the init did not run (log $BOOT_LOG)"
	expect root_source /dev/mapper/wbroot
	[ "$(result root_devno)" = "$(result wbroot_devno | tr -d ' ')" ] ||
		fail "/ is $(result root_devno), wbroot is $(result wbroot_devno)"
	echo "ok: / is device $(result root_devno), wbroot"
	table=$(result table)
	case $table in
	"0 196608 writeboost 25"[0-9]":0 25"[0-9]":16"*) echo "ok: table $table" ;;
	*) fail "the table of wbroot is not writeboost over vda and vdb: $table" ;;
	esac
	case $(result status) in
	*" writeback_threshold 0 "*" sync_data_interval 3600 update_sb_record_interval 60 "*) echo "ok: the options of writeboosttab are set" ;;
	*) fail "the writeboosttab options did not reach the target: $(result status)" ;;
	esac
	expect module dm_wbkit
	expect init "done"
}

token=wbkit-$(date +%s)-$RANDOM
step "boot 1: root=/dev/mapper/wbroot, the cache is formatted, a marker is written and synced, power cut"
boot boot1-write "root=/dev/mapper/wbroot init=/sbin/wbinit wb.mode=write wb.token=$token" yes || fail "boot 1 (log $BOOT_LOG)"
boot1_seconds=$BOOT_SECONDS
check_root_on_cache
expect wrote "$token"
console_has "writeboost: wbroot created" || fail "the boot script did not report the device"
[ "$(od -An -tx4 -N4 "$work/cache.img" | tr -d ' ')" = 57427374 ] || fail "the cache disk has no writeboost superblock"
echo "ok: the cache disk is formatted (magic WBst)"
if debugfs -R "cat /marker" "$work/backing.img" 2>/dev/null | grep -qF "$token"; then
	fail "the marker is on the backing disk already: the test would not show the replay"
fi
echo "ok: the marker is not on the backing disk (it is in the cache's log only)"

step "boot 2: the target replays the log; the marker is there"
boot boot2-check "root=/dev/mapper/wbroot init=/sbin/wbinit wb.mode=check" yes || fail "boot 2 (log $BOOT_LOG)"
boot2_seconds=$BOOT_SECONDS
check_root_on_cache
expect marker "$token"

step "boot 3: no cache disk: a bounded wait, a message naming it, a panic"
backing_sum=$(sha256sum <"$work/backing.img")
rc=0
boot boot3-no-cache "root=/dev/mapper/wbroot init=/sbin/wbinit wb.mode=check" no || rc=$?
boot3_seconds=$BOOT_SECONDS
[ "$rc" != 124 ] || fail "boot 3 hung (log $BOOT_LOG)"
console_has "writeboost: waiting up to 30s for wbroot: cache device /dev/disk/by-id/virtio-wbcache not found" ||
	fail "no message about the wait (log $BOOT_LOG)"
console_has "writeboost: error: gave up on wbroot after" || fail "no message about giving up (log $BOOT_LOG)"
console_has "needs writeboost device(s) wbroot" || fail "no message about the root file system (log $BOOT_LOG)"
console_has "Rebooting automatically due to panic= boot argument" || fail "no panic (log $BOOT_LOG)"
console_has "WB: init=running" && fail "the init ran without the cache (log $BOOT_LOG)"
tr -d '\r' <"$BOOT_LOG" | grep -E '^writeboost: ' | sed 's/^/console: /'
[ "$(sha256sum <"$work/backing.img")" = "$backing_sum" ] || fail "the backing disk changed"
echo "ok: gave up after the bounded wait, panicked, the backing disk is untouched"

step "boot 4: no cache disk, root=UUID= (finds the backing disk itself): a panic, not a mount"
rc=0
boot boot4-no-cache-uuid "root=UUID=$fs_uuid init=/sbin/wbinit wb.mode=check writeboost.wait=3" no || rc=$?
boot4_seconds=$BOOT_SECONDS
[ "$rc" != 124 ] || fail "boot 4 hung (log $BOOT_LOG)"
console_has "writeboost: error: gave up on wbroot after" || fail "no message about giving up (log $BOOT_LOG)"
console_has "the root file system (UUID=$fs_uuid) needs writeboost device(s) wbroot" ||
	fail "the backing disk was not recognised as the root's (log $BOOT_LOG)"
console_has "Rebooting automatically due to panic= boot argument" || fail "no panic (log $BOOT_LOG)"
console_has "WB: init=running" && fail "the backing disk was mounted as the root file system (log $BOOT_LOG)"
[ "$(sha256sum <"$work/backing.img")" = "$backing_sum" ] || fail "the backing disk changed"
echo "ok: panicked instead of mounting the backing disk"

# make_initrd <name>: update-initramfs -u -k <kver> in the root, the file
# list in $work/<name>.list.
make_initrd() {
	mount -t proc proc "$chroot_dir/proc"
	in_chroot update-initramfs -u -k "$kver" >"$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "update-initramfs ($1)"; }
	umount "$chroot_dir/proc"
	grep '^W: dm-wbkit' "$work/$1.log" || true
	cp "$chroot_dir/boot/initrd.img-$kver" "$initrd"
	lsinitramfs "$initrd" >"$work/$1.list"
}

upstream_ko=${VM_UPSTREAM_KO:-/lib/modules/$kver/updates/dkms/dm-writeboost.ko}
upstream_seconds=skipped
if [ -r "$upstream_ko" ]; then
	step "only upstream's dm-writeboost built for $kver: the initramfs holds it, and it boots the root"
	rm -rf "$chroot_dir/lib/modules/$kver/updates"
	install -D -m 0644 "$upstream_ko" "$chroot_dir/lib/modules/$kver/updates/dkms/dm-writeboost.ko"
	in_chroot depmod -a "$kver"
	make_initrd upstream
	grep -Eq "lib/modules/$kver/updates/dkms/dm-writeboost.ko$" "$work/upstream.list" || fail "dm-writeboost.ko is not in the initramfs"
	grep -q 'dm-wbkit.ko' "$work/upstream.list" && fail "dm-wbkit.ko is in the initramfs"
	echo "ok: upstream's module in the initramfs, not ours"
	boot boot5-upstream "root=/dev/mapper/wbroot init=/sbin/wbinit wb.mode=check" yes || fail "boot 5 (log $BOOT_LOG)"
	upstream_seconds=${BOOT_SECONDS}s
	console_has "WB: init=running" || fail "the init did not run (log $BOOT_LOG)"
	expect root_source /dev/mapper/wbroot
	expect module dm_writeboost
	expect marker "$token"
else
	echo "skip: upstream's module $upstream_ko is not built (dm-writeboost-dkms)"
fi

step "a writeboosttab without entries: the initramfs holds nothing of ours"
rm -rf "$chroot_dir/lib/modules/$kver/updates"
install -D -m 0644 "$ko" "$chroot_dir/lib/modules/$kver/updates/dkms/dm-wbkit.ko"
in_chroot depmod -a "$kver"
sed -i 's/^wbroot/#wbroot/' "$chroot_dir/etc/writeboosttab"
make_initrd no-entries
if grep -E 'dm-wbkit\.ko|dm-writeboost\.ko|etc/writeboosttab|conf/wbkit-module|wbkit/writeboosttab\.sh' "$work/no-entries.list"; then
	fail "the initramfs holds parts of writeboost without a writeboosttab entry"
fi
echo "ok: no module, no writeboosttab (the boot script is there and does nothing without the file)"

step "done"
printf '\nsteps:\n'
printf '  %s\n' "${timings[@]}"
echo "boots: write ${boot1_seconds}s, check ${boot2_seconds}s, no cache ${boot3_seconds}s, no cache with root=UUID= ${boot4_seconds}s, upstream's module $upstream_seconds"
echo "initramfs-test: ok: root=/dev/mapper/wbroot on dm-wbkit booted from an initramfs made by update-initramfs, survived a power cut through the cache's replay; a missing cache panics after a bounded wait ($((SECONDS - started)) s in all)"
