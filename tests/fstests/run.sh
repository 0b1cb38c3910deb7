#!/usr/bin/env bash
# fstests on dm-wbkit (issue 58): boots the VM tests' kernel (VM_KVER,
# tests/vm/lib.sh) with the Debian root of build-root.sh, runs fstests'
# ./check on TEST_DEV and SCRATCH_DEV made by one configuration, and prints
# one line per test: `<test> <config> <status> <seconds>`.
#
#   tests/fstests/run.sh [-c "CONFIGS"] [-f FSTYP] [-l LIST] [-o OUTDIR] [TEST...]
#
# CONFIGS (default "linear wbkit"; FSTESTS_CONFIGS): one boot each, in order:
#   linear       dm-linear over each backing disk (the baseline)
#   wbkit        dm-wbkit (kmod/dm-wbkit.ko, target "writeboost") over each
#                backing disk with its own 1 GiB cache disk, default options
#   wbkit-small  the same with a 64 MiB cache and writeback_threshold 70:
#                writeback runs in the background and the ring wraps
#   writecache   dm-writecache (s, 4 KiB blocks) with a 1 GiB cache disk
# FSTYP: ext4 (default; FSTESTS_FSTYP) or xfs. LIST: test lists, one test a
# line, `#` comments (FSTESTS_LIST, words; default tests-short.list then
# tests.list; their generic/ tests and the FSTYP's own), or the tests given
# as arguments.
# OUTDIR (FSTESTS_OUT): default work/results/<date>-<fstyp>/; per config
# <config>/results/ (fstests' results: check.log, result.xml, per test .full,
# .out.bad, .dmesg), <config>/console.log, <config>/summary.tsv; and
# summary.tsv, table.md over all configs.
#
# Disks (sparse files in work/, removed after each boot): vda the root image
# (qemu snapshot=on: the cached image never changes), vdb/vdc TEST backing
# and cache, vdd/vde SCRATCH backing and cache (FSTESTS_DEV_SIZE, default 8G,
# each), vdf LOGWRITES_DEV (for dm-log-writes tests), vdg the transfer disk (a
# tar of dm-wbkit.ko in, a tar of the results out), vdh the guest script
# (FSTESTS_KEEP_DISKS=1 keeps them in work/disks-<config>/).
# The boot is tests/vm/lib.sh's vm_run: VM_TIMEOUT (FSTESTS_TIMEOUT, default
# 900 s + 300 s a test), the guest's watchdog 20 s before it (kernel log,
# blocked tasks and every stack on the console), the boot retried once if it
# stalls before init, and the failure patterns over the console (a kernel
# warning, BUG, hung task): a boot that ends that way is reported beside the
# tests' own results. Statuses: pass, fail, notrun (with fstests' reason in
# summary.tsv), and for a boot that did not finish: hang (the test running
# when the time ran out), crash (the test running when the guest died),
# missing (not started).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export VM_WORK=${FSTESTS_WORK:-$here/work}
# vm_run, vm_result, VM_KVER, VM_KERNEL, VM_WBKIT_KO, VM_MODROOT.
source "$here/../vm/lib.sh"

configs=${FSTESTS_CONFIGS:-linear wbkit}
fstyp=${FSTESTS_FSTYP:-ext4}
lists=${FSTESTS_LIST:-$here/tests-short.list $here/tests.list}
out=${FSTESTS_OUT:-}
dev_size=${FSTESTS_DEV_SIZE:-8G}
usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
while getopts c:f:l:o:h opt; do
	case $opt in
	c) configs=$OPTARG ;;
	f) fstyp=$OPTARG ;;
	l) lists=$OPTARG ;;
	o) out=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
log() { echo "fstests: $*" >&2; }
fail() {
	log "FAIL: $*"
	exit 1
}

case $fstyp in ext4 | xfs) ;; *) fail "FSTYP $fstyp: ext4 or xfs" ;; esac
for c in $configs; do
	case $c in linear | wbkit | wbkit-small | writecache) ;; *) fail "unknown config $c" ;; esac
done
if [ $# -gt 0 ]; then
	tests="$*"
else
	for list in $lists; do
		[ -r "$list" ] || fail "no test list $list"
	done
	# generic/ and this file system's own tests; the other one's would be notrun.
	other=ext4
	[ "$fstyp" = ext4 ] && other=xfs
	# shellcheck disable=SC2086 # the lists are words
	tests=$(cat $lists | sed 's/#.*//' | awk -v other="$other/" 'NF && index($1, other) != 1 { print $1 }' | tr '\n' ' ')
fi
ntests=$(echo "$tests" | wc -w)
[ "$ntests" -gt 0 ] || fail "no tests to run"
[ "$(id -u)" -eq 0 ] || fail "needs root (build-root.sh)"
why=$(vm_available) || fail "cannot boot the VM: $why"
case " $configs " in
*" wbkit"*) vm_has_wbkit || fail "no $VM_WBKIT_KO: make kmod" ;;
esac

out=${out:-$VM_WORK/results/$(date -u +%Y%m%d-%H%M%S)-$fstyp}
mkdir -p "$out" "$VM_WORK"
out=$(cd "$out" && pwd)

t0=$SECONDS
image=$(nice -n 19 "$here/build-root.sh") || fail "build-root.sh failed"
log "root image $image ($((SECONDS - t0)) s)"

# The initramfs: busybox, the modules that find and mount the root (virtio,
# ext4), and /init, which mounts root= and hands over to init= with
# guest-init.sh put there (the root is a snapshot: the copy goes with the
# boot). Cached in work/ by its inputs.
initrd_modules() {
	local m
	for m in virtio_pci virtio_blk crc32c_generic ext4; do
		modprobe ${VM_MODROOT:+-d "$VM_MODROOT"} -S "$VM_KVER" -D "$m" | awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++'
}
make_initrd() {
	local fp initrd root mod
	fp=$({
		echo "$VM_KVER $VM_MODROOT"
		sha256sum "$0" "$here/guest-init.sh" "$here/../vm/guest-lib.sh" "$(command -v busybox)"
		for mod in $(initrd_modules); do stat -L -c '%n %s %Y' "$mod"; done
	} | sha256sum | cut -c1-16)
	initrd=$VM_WORK/fstests-initrd-$fp.gz
	if [ ! -f "$initrd" ]; then
		root=$(mktemp -d "$VM_WORK/initrd.XXXXXX")
		mkdir -p "$root"/{bin,dev,proc,sys,newroot,modules}
		install -m 0755 "$(command -v busybox)" "$root/bin/busybox"
		for a in sh mount umount insmod switch_root sed cat cp chmod mkdir sleep poweroff cut; do
			ln -s busybox "$root/bin/$a"
		done
		{
			echo '#!/bin/sh'
			echo '# Generated by tests/fstests/run.sh: mounts root= and runs init= (guest-init.sh).'
			echo 'export PATH=/bin'
			echo 'mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev'
			for mod in $(initrd_modules); do
				install -m 0644 "$mod" "$root/modules/$(basename "$mod")"
				# crc32c-intel may find no SSE 4.2: crc32c_generic does then.
				echo "insmod /modules/$(basename "$mod") 2>/dev/null"
			done
			cat <<'INIT'
root=; init=/sbin/init
for w in $(cat /proc/cmdline); do
	case $w in root=*) root=${w#root=} ;; init=*) init=${w#init=} ;; esac
done
die() {
	echo "WB: init_error=$1"
	echo "WB: guest_exit=125"
	poweroff -f
}
n=0
while [ ! -b "$root" ] && [ $n -lt 100 ]; do n=$((n + 1)); sleep 0.1; done
mount -t ext4 -o rw "$root" /newroot || die "mount_root_$root"
mkdir -p "/newroot${init%/*}"
cp /guest-init "/newroot$init" && chmod 0755 "/newroot$init" || die copy_init
cp /guest-lib /newroot/lib/wbguest.sh || die copy_guest_lib
umount /proc /sys
mount --move /dev /newroot/dev || die move_dev
exec switch_root /newroot "$init"
INIT
		} >"$root/init"
		chmod 0755 "$root/init"
		install -m 0755 "$here/guest-init.sh" "$root/guest-init"
		install -m 0644 "$here/../vm/guest-lib.sh" "$root/guest-lib"
		(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet | gzip -1) >"$initrd.tmp.$$"
		mv -f "$initrd.tmp.$$" "$initrd"
		rm -rf "$root"
		# Older ones go.
		find "$VM_WORK" -maxdepth 1 -name 'fstests-initrd-*.gz' ! -name "$(basename "$initrd")" -delete
	fi
	echo "$initrd"
}
VM_INITRD=$(make_initrd)
VM_KERNEL_ARGS="root=/dev/vda rw init=/usr/local/sbin/wbkit-fstests-init${VM_KERNEL_ARGS:+ $VM_KERNEL_ARGS}"
export VM_DRIVE_OPTS_vda=snapshot=on
VM_MEM=${FSTESTS_MEM:-2048}
VM_TIMEOUT=${FSTESTS_TIMEOUT:-$((900 + 300 * ntests))}

# The guest script: its settings, then a fixed part.
guest_script() {
	local config=$1 table_opts=
	[ "$config" = wbkit-small ] && table_opts=" 2 writeback_threshold 70"
	printf 'config=%q\nfstyp=%q\ntests=%q\nwb_opts=%q\n' "$config" "$fstyp" "$tests" "$table_opts"
	cat <<'GUEST'
say() { echo "WB: $1=$2"; }
set -u
xfer=/dev/vdg
modprobe -a loop dm-mod dm-bufio dm-flakey dm-log-writes dm-writecache dm-snapshot dm-thin-pool dm-delay ext4 xfs ||
	say modprobe failed
mkdir -p /tmp/in /mnt/test /mnt/scratch
tar -xf "$xfer" -C /tmp/in || { say error xfer_in; exit 1; }
case $config in
wbkit*)
	insmod /tmp/in/dm-wbkit.ko || { say error insmod; exit 1; }
	say wbkit_srcversion "$(cat /sys/module/dm_wbkit/srcversion 2>/dev/null)"
	;;
esac
table() {
	local backing=$1 cache=$2 sz
	sz=$(blockdev --getsz "$backing")
	case $config in
	linear) echo "0 $sz linear $backing 0" ;;
	wbkit*) echo "0 $sz writeboost $backing $cache$wb_opts" ;;
	writecache) echo "0 $sz writecache s $backing $cache 4096 0" ;;
	esac
}
for pair in "fst-test /dev/vdb /dev/vdc" "fst-scratch /dev/vdd /dev/vde"; do
	set -- $pair
	t=$(table "$2" "$3")
	say "table_$1" "$t"
	dmsetup create "$1" --table "$t" || { say error "create_$1"; exit 1; }
done
udevadm settle --timeout=60
[ -b /dev/mapper/fst-test ] && [ -b /dev/mapper/fst-scratch ] || { say error no_mapper_links; exit 1; }
case $fstyp in
ext4) mkfs.ext4 -q -F /dev/mapper/fst-test ;;
xfs) mkfs.xfs -q -f /dev/mapper/fst-test ;;
esac || { say error mkfs_test; exit 1; }
cat >/opt/xfstests/local.config <<EOF
export FSTYP=$fstyp
export TEST_DEV=/dev/mapper/fst-test
export TEST_DIR=/mnt/test
export SCRATCH_DEV=/dev/mapper/fst-scratch
export SCRATCH_MNT=/mnt/scratch
export LOGWRITES_DEV=/dev/vdf
export KEEP_DMESG=yes
EOF
say fstests_start "$(cut -d' ' -f1 /proc/uptime)"
cd /opt/xfstests
# shellcheck disable=SC2086 # the tests are words
./check -R xunit $tests 2>&1 | sed -u 's/^/fstests: /'
rc=${PIPESTATUS[0]}
say check_rc "$rc"
say fstests_end "$(cut -d' ' -f1 /proc/uptime)"
cd /
for dev in fst-test fst-scratch; do
	say "status_$dev" "$(dmsetup status "$dev" 2>&1 | tr '\n' ' ')"
done
umount /mnt/test /mnt/scratch 2>/dev/null
for dev in fst-test fst-scratch; do
	if dmsetup remove "$dev"; then say "remove_$dev" ok; else say "remove_$dev" failed; fi
done
cp /opt/xfstests/local.config /opt/xfstests/results/
tar -cf "$xfer" -C /opt/xfstests results && sync && say results_packed 1
exit 0
GUEST
}

cfg_cache_size() {
	case $1 in
	wbkit-small) echo 64M ;;
	*) echo 1G ;;
	esac
}

all_tsv=$out/summary.tsv
: >"$all_tsv"
overall=0
for config in $configs; do
	d=$VM_WORK/disks-$config
	rm -rf "$d"
	mkdir -p "$d" "$out/$config"
	csize=$(cfg_cache_size "$config")
	vm_image "$d/test-backing.img" "$dev_size"
	vm_image "$d/test-cache.img" "$csize"
	vm_image "$d/scratch-backing.img" "$dev_size"
	vm_image "$d/scratch-cache.img" "$csize"
	vm_image "$d/logwrites.img" "$dev_size"
	mkdir -p "$d/in"
	case $config in wbkit*) cp "$VM_WBKIT_KO" "$d/in/dm-wbkit.ko" ;; esac
	tar -cf "$d/xfer.img" -C "$d/in" .
	truncate -s 1G "$d/xfer.img"
	guest_script "$config" >"$d/guest.sh"
	log "$config: $ntests tests on $fstyp, limit ${VM_TIMEOUT}s"
	rc=0
	VM_LOG_NEXT=$out/$config/console.log
	vm_run "$d/guest.sh" "$image" "$d/test-backing.img" "$d/test-cache.img" \
		"$d/scratch-backing.img" "$d/scratch-cache.img" "$d/logwrites.img" "$d/xfer.img" || rc=$?
	log "$config: vm_run returned $rc after ${VM_ELAPSED}s"
	gerr=$(vm_result error "$out/$config/console.log")
	[ -z "$gerr" ] || log "$config: the guest script stopped: $gerr (console.log)"
	echo "$rc" >"$out/$config/vm_rc"
	echo "$VM_ELAPSED" >"$out/$config/vm_seconds"
	[ "$rc" = 0 ] || overall=1
	rm -rf "$out/$config/results"
	if [ "$(vm_result results_packed "$out/$config/console.log")" = 1 ]; then
		tar -xf "$d/xfer.img" -C "$out/$config" || log "$config: results tar unreadable"
	else
		log "$config: the guest packed no results; statuses from the console"
	fi
	# shellcheck disable=SC2086 # the tests are words
	/usr/bin/python3 "$here/report.py" config "$config" "$out/$config" "$rc" $tests >"$out/$config/summary.tsv" ||
		fail "report.py failed for $config"
	cut -f1-4 "$out/$config/summary.tsv" | tr '\t' ' '
	cat "$out/$config/summary.tsv" >>"$all_tsv"
	grep -q -P '\t(fail|hang|crash|missing)\t' "$out/$config/summary.tsv" && overall=1
	# FSTESTS_KEEP_DISKS=1 keeps them (sparse, but a few GB) for a look.
	[ "${FSTESTS_KEEP_DISKS:-0}" = 1 ] || rm -rf "$d"
done
# shellcheck disable=SC2086 # the configs are words
{
	/usr/bin/python3 "$here/report.py" table "$all_tsv" $configs
	echo
	for config in $configs; do
		echo "- the $config boot: vm_run returned $(cat "$out/$config/vm_rc") (0 finished, 1 the guest script failed, 124 time limit, 125 a kernel warning, BUG or hung task in the console, or the guest died) after $(cat "$out/$config/vm_seconds") s"
	done
} >"$out/table.md"
log "done in $((SECONDS - t0)) s; results in $out (table.md, summary.tsv)"
exit $overall
