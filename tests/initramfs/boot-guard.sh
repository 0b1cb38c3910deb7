#!/usr/bin/env bash
# The boot guard (packaging/boot/: 61-wbkit-writeboosttab.rules,
# wbkit-writeboosttab-generator, wbkit@.service, wbkit-boot) in a real
# systemd boot of Debian 12 under qemu:
#
#   1. the root of tests/initramfs/boot-guard-root.sh (debootstrap, systemd,
#      udev, dmsetup, e2fsprogs, linux-image-<kver>, an initramfs without
#      wbkit's hook; cached in /var/cache/wbkit/boot-guard-root) gets
#      dm-wbkit.ko built for <kver>, the guard's files where dm-wbkit-dkms
#      puts them, /etc/writeboosttab (the backing device by UUID= of its
#      file system, the cache by /dev/disk/by-id), an /etc/fstab line that
#      mounts the file system by UUID= on /srv/data (with fsck, pass 2), and
#      two test units: wbtest.service reports on the console after
#      local-fs.target (or in emergency mode), wbwatch.service dumps the
#      pending jobs, failed units and the journal's tail and powers off if
#      the boot is still going after wb.watchdog= seconds;
#   2. disks: root (vda), backing (vdb, ext4), cache (vdc, zeros);
#   3. boot 1: the guard creates wbdata (the cache is formatted), fstab
#      mounts it; the test writes a marker, syncs and cuts the power (sysrq
#      o). The marker must not be on the backing disk: it is in the cache's
#      log only;
#   4. boot 2: a normal boot: /srv/data must be /dev/mapper/wbdata (findmnt),
#      the marker there, /dev/disk/by-uuid/<uuid> the writeboost device, the
#      backing disk SYSTEMD_READY=0 with only the target as holder, and no
#      mount or fsck of it in the journal;
#   5. boot 3: no cache disk: wbkit@wbdata gives up after writeboost.wait
#      (30 s by default) naming the cache device, the mount's device job
#      times out (systemd.default_timeout_start_sec=40 instead of 90 s),
#      emergency mode; the backing disk stays unmounted and unchanged
#      (checksum of its image), the boot ends in bounded time;
#   6. boot 4: the cache is back: the marker, kept only in the cache across
#      boot 3, is there;
#   7. boot 5: with dm-wbkit-dkms's initramfs hook and boot script
#      (packaging/initramfs/) in the initramfs, as on a system with the
#      package: the initramfs creates wbdata, wbkit@wbdata finds it made, and
#      the same checks as boot 2 hold (the rule is not in the initramfs, so
#      the by-uuid link must be right after the coldplug of the real root).
#
# Every boot has a time limit (WBKIT_BOOT_GUARD_BOOT_TIMEOUT, default 300 s,
# times VM_TIMEOUT_SCALE); the guest's watchdog fires before it, and shortly
# before the limit the kernel dumps blocked tasks and all stacks (sysrq w and
# t through qemu's monitor) into the console log, kept in $work/logs. Prints
# the time of each step and boot.
#
#   tests/initramfs/boot-guard.sh       (make test-boot-guard; root)
#
# About 6 to 7 minutes on the two shared cores (boots of 45-85, 120-135, 60,
# 60 and 60 s under TCG, most of it systemd and udev starting; wbkit@wbdata
# waits 5-20 s of that for its module while udev loads everyone's, and boot
# 5 makes an initramfs), and 3 more the first time, for the root
# (debootstrap 95 s, apt 74 s).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# VM_KVER, VM_WORK, VM_TIMEOUT_SCALE, WBKIT_ROOT.
source "$here/../vm/lib.sh"
kver=$VM_KVER
work=${WBKIT_BOOT_GUARD_WORK:-$VM_WORK/boot-guard}
logs=$work/logs
boot_limit=$((${WBKIT_BOOT_GUARD_BOOT_TIMEOUT:-300} * VM_TIMEOUT_SCALE))
watchdog_margin=30
guest_watchdog=$((boot_limit - 2 * watchdog_margin))
fs_uuid=3d0c5f0e-5b7a-4bd3-a7c4-2c1b9a0e51d4

test_tag=boot-guard-test
source "$here/qemu-boot.inc"

[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot)"
command -v qemu-system-x86_64 >/dev/null || fail "qemu-system-x86_64 missing"
[ -d "/lib/modules/$kver/build" ] || fail "no headers for $kver (/lib/modules/$kver/build): cannot build dm-wbkit.ko"
mkdir -p "$work" "$logs"

step "build dm-wbkit.ko for $kver from the DKMS tree"
rm -rf "$work/kmod-src"
make -s -C "$WBKIT_ROOT/kmod" dkms-src DKMS_SRC="$work/kmod-src"
make -s -C "$work/kmod-src" KDIR="/lib/modules/$kver/build" >"$work/kmod-build.log" 2>&1 ||
	{ cat "$work/kmod-build.log"; fail "the module does not build"; }
ko=$work/kmod-src/dm-wbkit.ko
[ -f "$ko" ] || fail "no $ko"

step "Debian 12 root with systemd, udev, dmsetup, linux-image-$kver"
root=$("$here/boot-guard-root.sh") || fail "no root (tests/initramfs/boot-guard-root.sh)"
cache_dir=$(dirname "$root")
kernel=$cache_dir/vmlinuz
initrd=$cache_dir/initrd.img
[ -r "$kernel" ] && [ -r "$initrd" ] || fail "no kernel or initramfs in $cache_dir"

step "install the module, the guard, writeboosttab, fstab and the test units; the root image"
rm -rf "$root/lib/modules/$kver/updates"
install -D -m 0644 "$ko" "$root/lib/modules/$kver/updates/dkms/dm-wbkit.ko"
chroot "$root" depmod -a "$kver"
# Where dm-wbkit-dkms puts them (debian/dm-wbkit-dkms.install).
boot_src=$WBKIT_ROOT/packaging/boot
install -D -m 0644 "$boot_src/writeboosttab.sh" "$root/usr/lib/wbkit/writeboosttab.sh"
install -D -m 0755 "$boot_src/wbkit-boot" "$root/usr/lib/wbkit/wbkit-boot"
install -D -m 0644 "$boot_src/61-wbkit-writeboosttab.rules" "$root/usr/lib/udev/rules.d/61-wbkit-writeboosttab.rules"
install -D -m 0755 "$boot_src/wbkit-writeboosttab-generator" \
	"$root/usr/lib/systemd/system-generators/wbkit-writeboosttab-generator"
install -D -m 0644 "$boot_src/wbkit@.service" "$root/usr/lib/systemd/system/wbkit@.service"
cat >"$root/etc/writeboosttab" <<TAB
## name    backing (HDD)    cache (SSD)    options
wbdata  UUID=$fs_uuid  /dev/disk/by-id/virtio-wbcache  writeback_threshold=0
TAB
cat >"$root/etc/fstab" <<FSTAB
/dev/vda  /  ext4  errors=remount-ro  0  0
UUID=$fs_uuid  /srv/data  ext4  defaults  0  2
FSTAB
mkdir -p "$root/srv/data"
install -D -m 0755 /dev/stdin "$root/usr/local/sbin/wbtest" <<'GUEST'
#!/bin/sh
# The test's side of tests/initramfs/boot-guard.sh: reports as "WB: key=value"
# lines on the console, then cuts the power (sysrq o).
exec >/dev/console 2>&1
mode= token= watchdog=200
for x in $(cat /proc/cmdline); do
	case $x in
	wb.mode=*) mode=${x#wb.mode=} ;;
	wb.token=*) token=${x#wb.token=} ;;
	wb.watchdog=*) watchdog=${x#wb.watchdog=} ;;
	esac
done
say() { echo "WB: $*"; }
uuid=$(awk '$2 == "/srv/data" { sub("UUID=", "", $1); print $1 }' /etc/fstab)
cut_power() {
	sync
	say "end=$1"
	sleep 1
	echo o >/proc/sysrq-trigger
}
case $1 in
watchdog)
	sleep "$watchdog"
	say "watchdog=fired after ${watchdog}s: the boot did not finish"
	echo "--- systemctl list-jobs"; systemctl list-jobs --no-pager
	echo "--- systemctl --failed"; systemctl --failed --no-pager
	echo "--- journal"; journalctl -b --no-pager -n 120
	echo w >/proc/sysrq-trigger
	cut_power watchdog
	exit 0
	;;
esac
say "test=running mode=$mode"
say "uptime=$(cut -d ' ' -f 1 /proc/uptime)"
say "target=$(systemctl is-active local-fs.target) $(systemctl is-active emergency.target)"
say "source=$(findmnt -n -o SOURCE /srv/data || echo none)"
say "backing_mounts=$(findmnt -n -o TARGET -S /dev/vdb | tr '\n' ' ' || true)"
say "holders=$(ls /sys/block/vdb/holders | tr '\n' ' ')"
say "byuuid=$(readlink -f "/dev/disk/by-uuid/$uuid" 2>/dev/null || echo none)"
say "wbdata=$(dmsetup table wbdata 2>/dev/null || echo none)"
say "udev_backing=$(udevadm info -q property /dev/vdb | grep -E '^(SYSTEMD_READY|UDISKS_IGNORE|WBKIT_BACKING_OF)=' | sort | tr '\n' ' ')"
say "udev_cache=$(udevadm info -q property /dev/vdc 2>/dev/null | grep -E '^(UDISKS_IGNORE|WBKIT_CACHE_OF)=' | sort | tr '\n' ' ')"
say "backing_unit=$(systemctl show -p ActiveState --value dev-vdb.device)"
state() { echo "$(systemctl show -p ActiveState --value "$1") $(systemctl show -p Result --value "$1")"; }
say "service=$(state wbkit@wbdata.service)"
say "mount_unit=$(state srv-data.mount)"
for u in wbkit@wbdata.service srv-data.mount; do
	t0=$(systemctl show -p InactiveExitTimestampMonotonic --value "$u")
	t1=$(systemctl show -p ActiveEnterTimestampMonotonic --value "$u")
	say "times_$u=start ${t0:-0} done ${t1:-0} (us since boot)"
done
# Who used the backing disk: the kernel logs every mount (and journal
# recovery) by device name; systemd by the unit's name.
say "backing_in_journal=$(journalctl -b -o cat --no-pager | grep -cE 'EXT4-fs \(vdb\)|Mount.*vdb|fsck.*vdb' || true)"
say "dm_mounted=$(journalctl -k -b -o cat --no-pager | grep -cE 'EXT4-fs \(dm-[0-9]+\): mounted' || true)"
journalctl -b -o cat --no-pager -u 'systemd-fsck@*' | sed 's/^/WB: fsck_log=/'
journalctl -b -o short-monotonic --no-pager -u wbkit@wbdata.service | sed 's/^/WB: service_log=/'
journalctl -b -o short-monotonic --no-pager | grep -E 'srv-data|Local File Systems|emergency|Timed out' | sed 's/^/WB: boot_log=/'
case $mode in
write)
	echo "$token" >/srv/data/marker
	sync
	say "wrote=$(cat /srv/data/marker)"
	say "status=$(dmsetup status wbdata)"
	cut_power write
	;;
check)
	say "marker=$(cat /srv/data/marker 2>/dev/null || echo missing)"
	cut_power check
	;;
*)
	cut_power "$mode"
	;;
esac
GUEST
cat >"$root/etc/systemd/system/wbtest.service" <<'UNIT'
[Unit]
Description=boot-guard test report
DefaultDependencies=no
# Emergency mode (boot 3) must not stop the report half-way.
IgnoreOnIsolate=yes
After=local-fs.target wbkit@wbdata.service systemd-journald.service

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/wbtest report

[Install]
WantedBy=multi-user.target emergency.target
UNIT
cat >"$root/etc/systemd/system/wbwatch.service" <<'UNIT'
[Unit]
Description=boot-guard test watchdog
DefaultDependencies=no
IgnoreOnIsolate=yes

[Service]
ExecStart=/usr/local/sbin/wbtest watchdog

[Install]
WantedBy=sysinit.target
UNIT
for pair in multi-user.target:wbtest emergency.target:wbtest sysinit.target:wbwatch; do
	mkdir -p "$root/etc/systemd/system/${pair%%:*}.wants"
	ln -sf "/etc/systemd/system/${pair#*:}.service" "$root/etc/systemd/system/${pair%%:*}.wants/${pair#*:}.service"
done
# No login prompt on the serial console (the tests' output goes there).
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
rm -f "$work/root.img"
size_mb=$(($(du -sm "$root" | cut -f 1) * 5 / 4 + 128))
mkfs_started=$SECONDS
mkfs.ext4 -q -F -L wbguard-root -d "$root" "$work/root.img" "${size_mb}M"
echo "root image: ${size_mb} MiB, mkfs.ext4 -d took $((SECONDS - mkfs_started)) s"

step "backing disk (ext4, UUID $fs_uuid) and an empty cache disk"
rm -f "$work/backing.img" "$work/cache.img"
mkdir -p "$work/data-tree"
echo "made by the host" >"$work/data-tree/hello"
truncate -s 64M "$work/backing.img"
mkfs.ext4 -q -F -L wbdata -U "$fs_uuid" -d "$work/data-tree" "$work/backing.img"
truncate -s 32M "$work/cache.img"

# boot <name> <extra kernel arguments> <with cache: yes|no>: the root disk,
# the backing disk and maybe the cache (qemu_boot).
boot() {
	local drives=(-drive "file=$work/root.img,format=raw,if=none,id=root,cache=unsafe"
		-device "virtio-blk-pci,drive=root,serial=wbroot"
		-drive "file=$work/backing.img,format=raw,if=none,id=backing,cache=none"
		-device "virtio-blk-pci,drive=backing,serial=wbbacking")
	if [ "$3" = yes ]; then
		drives+=(-drive "file=$work/cache.img,format=raw,if=none,id=cache,cache=none"
			-device "virtio-blk-pci,drive=cache,serial=wbcache")
	fi
	qemu_boot "$1" "root=/dev/vda rw console=ttyS0 no_timer_check sysrq_always_enabled panic=-1 wb.watchdog=$guest_watchdog $2" \
		'task:|writeboost|WB:|Timed out|Failed' "${drives[@]}"
}
report() {
	tr -d '\r' <"$BOOT_LOG" | grep -E '^WB: (uptime|times_|service_log|fsck_log|boot_log)' | sed 's/^/  /'
	console_has "WB: watchdog=fired" && fail "the guest's watchdog fired (log $BOOT_LOG)"
	console_has "WB: test=running" || fail "the test unit did not run (log $BOOT_LOG)"
}
# The checks of a boot with both disks: the file system is mounted from the
# writeboost device, and the backing disk was used by nobody else.
check_guarded_mount() {
	expect source /dev/mapper/wbdata
	expect byuuid /dev/dm-0
	expect holders "dm-0 "
	expect backing_mounts ""
	expect udev_backing "SYSTEMD_READY=0 UDISKS_IGNORE=1 WBKIT_BACKING_OF=wbdata "
	expect udev_cache "UDISKS_IGNORE=1 WBKIT_CACHE_OF=wbdata "
	expect backing_unit inactive
	expect service "active success"
	expect mount_unit "active success"
	expect backing_in_journal 0
	expect dm_mounted 1
	case $(result wbdata) in
	"0 131072 writeboost 25"[0-9]":16 25"[0-9]":32"*) echo "ok: wbdata is writeboost over vdb and vdc" ;;
	*) fail "wbdata is not writeboost over vdb and vdc: $(result wbdata)" ;;
	esac
}

token=wbguard-$(date +%s)-$RANDOM
step "boot 1: the guard creates wbdata, fstab mounts it by UUID=; a marker, sync, power cut"
boot boot1-write "wb.mode=write wb.token=$token" yes || fail "boot 1 (log $BOOT_LOG)"
boot1_seconds=$BOOT_SECONDS
report
check_guarded_mount
expect wrote "$token"
console_has "writeboost: wbdata created" || fail "wbkit-boot did not report the device"
[ "$(od -An -tx4 -N4 "$work/cache.img" | tr -d ' ')" = 57427374 ] || fail "the cache disk has no writeboost superblock"
echo "ok: the cache disk is formatted (magic WBst)"
if debugfs -R "cat /marker" "$work/backing.img" 2>/dev/null | grep -qF "$token"; then
	fail "the marker is on the backing disk already: the test would not show that boot 2 needs the cache"
fi
echo "ok: the marker is not on the backing disk (it is in the cache's log only)"

step "boot 2: a normal boot: /srv/data is /dev/mapper/wbdata with the marker, the backing disk unused"
boot boot2-check "wb.mode=check" yes || fail "boot 2 (log $BOOT_LOG)"
boot2_seconds=$BOOT_SECONDS
report
check_guarded_mount
expect marker "$token"

step "boot 3: no cache disk: the backing disk stays unmounted, the boot ends, the journal says why"
backing_sum=$(sha256sum <"$work/backing.img")
rc=0
boot boot3-no-cache "wb.mode=nocache systemd.default_timeout_start_sec=40" no || rc=$?
boot3_seconds=$BOOT_SECONDS
[ "$rc" != 124 ] || fail "boot 3 hung (log $BOOT_LOG)"
[ "$rc" = 0 ] || fail "boot 3: qemu exited $rc (log $BOOT_LOG)"
report
expect source none
expect backing_mounts ""
expect holders ""
expect wbdata none
expect udev_backing "SYSTEMD_READY=0 UDISKS_IGNORE=1 WBKIT_BACKING_OF=wbdata "
expect backing_unit inactive
expect service "failed exit-code"
expect backing_in_journal 0
expect dm_mounted 0
console_has "writeboost: waiting up to 30s for wbdata: cache device /dev/disk/by-id/virtio-wbcache not found" ||
	fail "no message about the wait (log $BOOT_LOG)"
console_has "writeboost: error: gave up on wbdata after" || fail "no message about giving up (log $BOOT_LOG)"
console_has "Its backing device UUID=$fs_uuid stays unmounted" || fail "no message about the backing device (log $BOOT_LOG)"
[ "$(sha256sum <"$work/backing.img")" = "$backing_sum" ] || fail "the backing disk changed"
echo "ok: gave up after the bounded wait, the backing disk unmounted and unchanged"

step "boot 4: the cache is back: the marker, only in the cache's log, is there"
boot boot4-check "wb.mode=check" yes || fail "boot 4 (log $BOOT_LOG)"
boot4_seconds=$BOOT_SECONDS
report
check_guarded_mount
expect marker "$token"

step "boot 5: dm-wbkit-dkms's initramfs hook is in: the initramfs creates wbdata, the guard keeps the backing disk out"
# As on a system with the package: update-initramfs puts the module, dmsetup,
# writeboosttab and writeboosttab.sh in, and its boot script creates every
# entry; wbkit@wbdata then finds the device made. The base initramfs of the
# cached root stays as it was (mkinitramfs -o, the hook removed after).
install -D -m 0755 "$WBKIT_ROOT/packaging/initramfs/hook" "$root/usr/share/initramfs-tools/hooks/dm-wbkit"
install -D -m 0755 "$WBKIT_ROOT/packaging/initramfs/local-top" "$root/usr/share/initramfs-tools/scripts/local-top/dm-wbkit"
mount -t proc proc "$root/proc"
mkinitramfs_rc=0
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin mkinitramfs -o /tmp/initrd-hook.img "$kver" \
	>"$work/mkinitramfs.log" 2>&1 || mkinitramfs_rc=$?
umount "$root/proc"
rm -f "$root/usr/share/initramfs-tools/hooks/dm-wbkit" "$root/usr/share/initramfs-tools/scripts/local-top/dm-wbkit"
[ "$mkinitramfs_rc" = 0 ] || { cat "$work/mkinitramfs.log"; fail "mkinitramfs with the hook"; }
grep '^W: dm-wbkit' "$work/mkinitramfs.log" && fail "the hook warned"
mv "$root/tmp/initrd-hook.img" "$work/initrd-hook.img"
lsinitramfs "$work/initrd-hook.img" >"$work/initrd-hook.list"
# The root has no busybox (initramfs-tools only recommends it): the hook
# must bring the programs its boot script runs.
grep -q busybox "$work/initrd-hook.list" && fail "busybox is in the initramfs: the test would not show the hook brings awk and grep"
for pattern in "updates/dkms/dm-wbkit.ko" "etc/writeboosttab" "usr/lib/wbkit/writeboosttab.sh" "scripts/local-top/dm-wbkit" \
	"usr/bin/awk" "usr/bin/grep" "usr/bin/rm"; do
	grep -q "$pattern\$" "$work/initrd-hook.list" || fail "not in the initramfs: $pattern"
done
echo "ok: the initramfs holds the module, writeboosttab, writeboosttab.sh, and awk, grep and rm without busybox"
base_initrd=$initrd
initrd=$work/initrd-hook.img
boot boot5-initramfs "wb.mode=check" yes || fail "boot 5 (log $BOOT_LOG)"
boot5_seconds=$BOOT_SECONDS
initrd=$base_initrd
report
tr -d '\r' <"$BOOT_LOG" | grep '^writeboost: wbdata created' >/dev/null || fail "the initramfs did not create wbdata (log $BOOT_LOG)"
console_has "writeboost: wbdata exists already" || fail "wbkit@wbdata did not find the initramfs's device (log $BOOT_LOG)"
check_guarded_mount
expect marker "$token"

step "done"
printf '\nsteps:\n'
printf '  %s\n' "${timings[@]}"
echo "boots (qemu, TCG): write ${boot1_seconds}s, check ${boot2_seconds}s, no cache ${boot3_seconds}s, cache back ${boot4_seconds}s, made by the initramfs ${boot5_seconds}s"
echo "boot-guard-test: ok: systemd mounted the file system of writeboosttab's backing device only through /dev/mapper/wbdata, across a power cut and a boot without the cache ($((SECONDS - started)) s in all)"
