#!/bin/bash
# PID 1 of the fstests VM (tests/fstests/run.sh), after the initramfs has
# mounted the root image (root=/dev/vda rw, a qemu snapshot: nothing written
# here outlives the boot) and put this file at the init= path. It does what
# tests/vm/lib.sh's /init does for the busybox guests, with Debian's userland:
# mounts, udev (fstests' dm helpers wait for the /dev/mapper links), the
# disks, `WB: guest_start`, the watchdog before the time limit (the kernel
# log, sysrq w and t), then `bash /dev/<last disk>` (the script run.sh wrote),
# the kernel log as `dmesg: ` lines, `WB: guest_exit=<rc>`, and power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LC_ALL=C.UTF-8 TERM=dumb

mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620 devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
# devtmpfs has no /dev/fd: bash's <(...) and fstests need it.
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -o remount,rw /
hostname wbfstests

init_failed=0
if [ -x /lib/systemd/systemd-udevd ]; then
	/lib/systemd/systemd-udevd --daemon || init_failed=1
	udevadm trigger --type=subsystems --action=add
	udevadm trigger --type=devices --action=add
	udevadm settle --timeout=120 || echo "wbinit: udevadm settle timed out"
else
	init_failed=1
fi
want=$(sed -n 's/.*wb\.disks=\([0-9]*\).*/\1/p' /proc/cmdline)
tries=0
# shellcheck disable=SC2010 # names of block devices
while [ "$(ls /sys/block | grep -c '^vd')" -lt "${want:-1}" ] && [ $tries -lt 200 ]; do
	tries=$((tries + 1))
	sleep 0.05
done
# shellcheck disable=SC2010
last=$(ls /sys/block | grep '^vd' | awk '{ print length($0), $0 }' | sort -n | tail -n 1 | cut -d' ' -f2)
if [ "$init_failed" = 1 ] || [ -z "$last" ] || [ ! -b "/dev/$last" ]; then
	echo "WB: init_error=udev_or_disks"
	dmesg | sed 's/^/dmesg: /'
	echo "WB: guest_exit=125"
	sync
	echo o >/proc/sysrq-trigger
	sleep 60
fi
# tests/vm/guest-lib.sh (run.sh puts it at /lib/wbguest.sh): the start
# every guest makes, the watchdog among it. fstests' "run fstests <test> at
# <date>" lines reach the console too (written to /dev/kmsg at the default
# level), which shows the test running when the limit comes.
# shellcheck source-path=SCRIPTDIR source=../vm/guest-lib.sh
. /lib/wbguest.sh
wb_guest_begin
bash "/dev/$last" </dev/null
rc=$?
[ -z "$wd_pid" ] || kill "$wd_pid" 2>/dev/null
echo "WB: guest_end=$(cut -d' ' -f1 /proc/uptime)"
dmesg | sed 's/^/dmesg: /'
echo "WB: guest_exit=$rc"
sync
# A power cut, as lib.sh's poweroff -f: the script tore down what it wanted.
echo o >/proc/sysrq-trigger
sleep 60
