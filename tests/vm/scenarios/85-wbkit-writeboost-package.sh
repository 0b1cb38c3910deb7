#!/usr/bin/env bash
# shows: Debian's `writeboost` script (the package's boot activation) starts
#   dm-wbkit from a `writeboosttab`, autoloading it by its alias; its stop
#   (suspend, `drop_caches` while suspended, remove, zero the cache's first 4
#   KiB) leaves every write on the backing device; start again and the data is
#   there
#
# Debian's `writeboost` package (boot activation from /etc/writeboosttab, made
# for dm-writeboost-dkms) driving dm-wbkit: its own /sbin/writeboost script,
# run the way its systemd unit runs it (ExecStart=/sbin/writeboost,
# ExecStop=/sbin/writeboost -u) under dash, Debian's /bin/sh. The module is
# installed under /lib/modules and found by depmod, not insmod'ed: the
# script's `dmsetup create ... writeboost` must autoload it (alias
# dm-writeboost). Boot 1 starts the mapping, runs a workload and stops it;
# the stop script suspends, writes back everything (drop_caches), removes the
# mapping and zeroes the cache's first 4 KiB, so the backing device alone
# must hold the data. Boot 2 starts again (the cache is reformatted) and
# finds every write there, stops, and the backing device still holds it all.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=420

# 16 MiB of cache (30 segments); 1500 writes with a flush every 100 fill
# about 15 of them, and writeback_threshold is 0 (no background writeback):
# all of it is dirty at the stop, and only the stop's drop_caches can bring
# it to the backing device.
make_devices backing 32M cache 16M
W="--seed 71 --ops 1500 --offset 0 --size 24M"

# The package's files: the installed package if there is one, else the .deb
# from Debian's archive (kept in VM_WORK for the next run).
pkg=$work/pkg
mkdir -p "$pkg"
if [ -x /sbin/writeboost ] && dpkg-query -W -f='${Status}' writeboost 2>/dev/null | grep -q "install ok installed"; then
	install -D -m 0755 /sbin/writeboost "$pkg/sbin/writeboost"
	echo "writeboost script from the installed package $(dpkg-query -W -f='${Version}' writeboost)"
else
	debs=$VM_WORK/debs
	mkdir -p "$debs"
	if ! ls "$debs"/writeboost_*.deb >/dev/null 2>&1; then
		(cd "$debs" && apt-get download writeboost >/dev/null 2>&1) ||
			{ echo "Debian's writeboost package is not installed and cannot be downloaded"; exit 77; }
	fi
	deb=$(ls "$debs"/writeboost_*.deb | tail -n 1)
	dpkg-deb -x "$deb" "$work/deb"
	install -D -m 0755 "$work/deb/sbin/writeboost" "$pkg/sbin/writeboost"
	echo "writeboost script from $(basename "$deb")"
fi

# What a Debian system has and the initramfs lacks: dash as /bin/sh (the
# script runs real programs from PATH under it: dmsetup, blockdev, and
# coreutils dd for its oflag=direct), the module where modprobe finds it,
# and stand-ins for udev (device nodes after dmsetup) and syslog (logger).
install -D -m 0755 /usr/bin/dash "$pkg/usr/bin/dash"
install -D -m 0644 "$VM_WBKIT_KO" "$pkg/lib/modules/$VM_KVER/updates/dm-wbkit.ko"
install -d "$pkg/usr/local/bin"
cat >"$pkg/usr/local/bin/dmsetup" <<'SH'
#!/bin/sh
# Stands in for udev: dmsetup, then the /dev/mapper nodes udev would make.
/usr/sbin/dmsetup "$@"
rc=$?
/usr/sbin/dmsetup mknodes >/dev/null 2>&1
exit $rc
SH
cat >"$pkg/usr/local/bin/logger" <<'SH'
#!/bin/sh
# Stands in for util-linux logger --tag T --stderr MSG: MSG on the console.
while [ $# -gt 1 ]; do
	case $1 in --tag) shift 2 ;; --stderr) shift ;; *) break ;; esac
done
echo "logger: $*" >&2
SH
chmod 0755 "$pkg/usr/local/bin/dmsetup" "$pkg/usr/local/bin/logger"
tar -C "$pkg" -cf "$work/pkg.tar" .
truncate -s %4096 "$work/pkg.tar"

guest_prologue() {
	cat <<GUEST
tar -xf /dev/vdc -C / || wb_fail "cannot unpack the package files"
depmod -a || wb_fail "depmod failed"
# The kernel runs /sbin/modprobe to autoload; busybox keeps it in /bin here.
[ -x /sbin/modprobe ] || echo /bin/modprobe >/proc/sys/kernel/modprobe
echo "wb /dev/vda /dev/vdb read_cache_threshold=31,sync_data_interval=3600" >/etc/writeboosttab
magic() { \$DD if=/dev/vdb bs=4 count=1 2>/dev/null | od -An -tx1 | tr -d ' '; }
start() {
	/usr/bin/dash /sbin/writeboost; wb_report start_rc_\$1 \$?
	[ -b /dev/mapper/wb ] && wb_report mapped_\$1 yes || wb_report mapped_\$1 no
	grep -q '^dm_wbkit ' /proc/modules && wb_report module_\$1 dm_wbkit || wb_report module_\$1 none
	wb_report tunables_\$1 "\$(wb_dm_status wb | tr ' ' '_')"
}
stop() {
	/usr/bin/dash /sbin/writeboost -u; wb_report stop_rc_\$1 \$?
	[ -b /dev/mapper/wb ] && wb_report unmapped_\$1 no || wb_report unmapped_\$1 yes
	\$DMSETUP info wb >/dev/null 2>&1 && wb_report removed_\$1 no || wb_report removed_\$1 yes
	wb_report magic_after_stop_\$1 "\$(magic)"
}
GUEST
}

# boot <n>: boots with the package's files as /dev/vdc, runs the prologue and
# then the steps read from stdin, shows the results; exits 1 when the guest
# failed.
boot() {
	run_guest "$work/pkg.tar" < <(guest_prologue && cat)
	echo "boot $1: ${VM_ELAPSED:-?}s"
	vm_results | grep -v '^status' || true
	[ "$rc" = 0 ] || exit 1
}

boot 1 <<GUEST
start 1
wb_stamp write write /dev/mapper/wb $W --flush-every 100
wb_report status_before_stop "\$(wb_dm_status wb)"
stop 1
wb_stamp backing_after_stop_1 verify /dev/vda $W --flushed 1500
GUEST
echo "status before the stop: $(vm_result status_before_stop)"
require_all 0 start_rc_1
require_all yes mapped_1
require_all dm_wbkit module_1
# The options of the writeboosttab line reached the target as messages.
case $(vm_result tunables_1) in
*_sync_data_interval_3600_*_read_cache_threshold_31_*) ;;
*)
	echo "the writeboosttab options did not reach the target: $(vm_result tunables_1)"
	exit 1
	;;
esac
require_all ok write
read -r -a before <<<"$(vm_result status_before_stop)"
if [ "${before[6]:-0}" -eq 0 ]; then
	echo "nothing was dirty at the stop: the test would not show that the stop writes back"
	exit 1
fi
require_all 0 stop_rc_1
require_all yes removed_1 unmapped_1
require_all 00000000 magic_after_stop_1
require_all ok backing_after_stop_1

boot 2 <<GUEST
start 2
wb_stamp through_target_2 verify /dev/mapper/wb $W --flushed 1500
stop 2
wb_stamp backing_after_stop_2 verify /dev/vda $W --flushed 1500
GUEST
require_all 0 start_rc_2 stop_rc_2
require_all yes mapped_2 removed_2
require_all dm_wbkit module_2
require_all ok through_target_2 backing_after_stop_2
require_all 00000000 magic_after_stop_2
echo "Debian's writeboost script started and stopped dm-wbkit twice; all 1500 writes on the backing device"
