# shellcheck shell=bash
# The VM harness: sourced by host-side bash scripts (tests/vm/scenarios/*.sh,
# fixtures/make-upstream-fixtures.sh). The host kernel has no device-mapper,
# so every test of a dm target boots the Debian kernel under qemu (TCG: KVM
# hangs here) with a busybox initramfs and runs one guest script.
# tests/vm/README.md is the manual.

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WBKIT_ROOT=$(cd "$VM_DIR/../.." && pwd)
VM_WORK=${VM_WORK:-$VM_DIR/work}
# Not fatal when absent: vm_available then says why the suite skips.
# Debian's default kernel, the one linux-image-amd64 depends on, not the
# newest in /lib/modules: a 6.12 headers package adds /lib/modules/6.12.../build
# without a bootable image of ours (VM_KVER=<release> picks another).
_vm_default_kver() {
	local dep
	dep=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null | grep -o 'linux-image-[^ ,]*' | head -n 1)
	if [ -n "$dep" ] && [ -d "/lib/modules/${dep#linux-image-}" ]; then
		echo "${dep#linux-image-}"
	else
		ls /lib/modules 2>/dev/null | sort -V | tail -n 1 || true
	fi
}
VM_KVER=${VM_KVER:-$(_vm_default_kver)}
VM_KERNEL=${VM_KERNEL:-/boot/vmlinuz-$VM_KVER}
# Where the kernel's modules are: modules of VM_KVER are looked up under
# $VM_MODROOT/lib/modules/$VM_KVER (empty: the host's /lib/modules). The debug
# kernel (scripts/build-kdebug.sh) points it at its `make modules_install`
# output; what it builds in is found in modules.builtin, not copied.
VM_MODROOT=${VM_MODROOT:-}
VM_INITRD=$VM_WORK/initrd.gz
VM_WBSTAMP=$VM_WORK/wbstamp
VM_TIMEOUT=${VM_TIMEOUT:-240}
# Multiplies every scenario's VM_TIMEOUT: for a machine much busier than the
# 2-core runner the timeouts were sized for (TCG slows down with the load).
VM_TIMEOUT_SCALE=${VM_TIMEOUT_SCALE:-1}
VM_MEM=${VM_MEM:-1024}	# guest RAM in MiB; a huge cache needs more for its metadata
VM_SMP=${VM_SMP:-2}	# guest CPUs; more than the host has makes the host preempt them anywhere (races widen)
VM_LOG_DIR=${VM_LOG_DIR:-$VM_WORK/logs}
VM_LOG=
VM_LOG_NEXT=${VM_LOG_NEXT:-}
VM_UPSTREAM_KO=${VM_UPSTREAM_KO:-$VM_MODROOT/lib/modules/$VM_KVER/updates/dkms/dm-writeboost.ko}
VM_WBKIT_KO=${VM_WBKIT_KO:-$WBKIT_ROOT/kmod/dm-wbkit.ko}

# Loaded by /init in this order: crc32c must exist before libcrc32c, and the
# dm core modules before an out-of-tree target is insmod'ed.
VM_BOOT_MODULES=(virtio_pci virtio_blk crc32c_generic dm-mod dm-bufio libcrc32c dm-flakey dm-log-writes dm-delay)
# Boot modules newer kernels no longer have: since 6.14 crc32c is in the
# core library (lib/crc, built in), and crc32c_generic and libcrc32c are
# gone. A kernel that neither has one of these nor builds it in boots without it.
VM_BOOT_MODULES_GONE_LATER=(crc32c_generic libcrc32c)
# In the initramfs but not loaded at boot: a guest script that needs one
# runs `modprobe` (the ext4 workload of tests/crash/record-ext4.sh; the
# kernel's own caches that tests/crash/peers.sh and bench/vm-peers.sh compare
# against, through wb_cache_modules).
VM_EXTRA_MODULES=(ext4 xfs dm-writecache dm-cache-smq bcache)

# Real programs for what busybox does not do (dmsetup, fio) or does too
# little of (dd without oflag=direct). They live under /usr so that they never
# collide with the applet links in /bin; guest scripts call them by full path
# because busybox sh prefers its own applets to anything in PATH.
# mkfs.ext4 and sync (fsync of named files and directories) are for the ext4
# workload of the crash tests; e2fsck checks the file system wbctl's
# scenario (95) switched tables under.
VM_HOST_PROGRAMS=(/usr/sbin/dmsetup /usr/bin/fio /usr/sbin/blockdev /usr/bin/dd /usr/bin/cmp /usr/bin/sha256sum
	/sbin/mkfs.ext4 /sbin/e2fsck /usr/bin/sync)
# Programs only some guest scripts need, copied with their libraries when the
# host has them: make-bcache (bcache-tools) for the bcache rows of
# tests/crash/peers.sh and bench/vm-peers.sh, which skip without it;
# mkfs.xfs (xfsprogs) for XFS over the target (scenario 58).
VM_OPTIONAL_PROGRAMS=(/usr/sbin/make-bcache /usr/sbin/mkfs.xfs)
# Configuration files the programs read, copied as they are.
VM_HOST_FILES=(/etc/mke2fs.conf)
# wbkit's own tools for guest scripts, as /usr/local/bin/<tool> (stripped,
# with their libraries), from the build directory run-all.sh was given
# (WBKIT_BUILD_DIR, else build/) when built there; a guest script that needs
# one checks that it is there. Rebuilding one rebuilds the initramfs.
VM_GUEST_TOOLS=(wbstat wbctl)

# Console lines that mean the guest kernel went wrong even if the script
# carried on. /init prints the kernel log at the end, so warnings that the
# quiet console level hides are caught too. "] WARNING: " is any kernel
# warning with a timestamp (WARN_ON, and lockdep's "possible circular
# locking dependency", "inconsistent lock state", "suspicious RCU usage"...);
# "BUG: " covers KASAN, "sleeping function called from invalid context" and
# soft lockups; "blocked for more than" is the hung-task detector; ODEBUG is
# CONFIG_DEBUG_OBJECTS. VM_FAIL_PATTERNS_EXTRA adds more (test-vm-debug: RCU stalls).
VM_FAIL_PATTERNS=${VM_FAIL_PATTERNS:-'Kernel panic|BUG: |Oops: |general protection fault|WARNING: CPU: |\] WARNING: |Call Trace:|UBSAN:|KASAN:|blocked for more than|ODEBUG: '}${VM_FAIL_PATTERNS_EXTRA:+|$VM_FAIL_PATTERNS_EXTRA}
# Shortly before the time limit, a watchdog in the guest prints the kernel
# log and has the kernel dump the blocked tasks (sysrq w) and every task's
# stack (sysrq t) to the console, so a hang leaves evidence in the log. It
# fires VM_WATCHDOG_MARGIN seconds (default 20; 0: no watchdog) before the
# limit, by the guest's clock, which qemu's RTC sets from the host's.
VM_WATCHDOG_MARGIN=${VM_WATCHDOG_MARGIN:-20}
# Seconds a boot may take to reach the guest's init (its first WB: line)
# before vm_run boots it again, once (times VM_TIMEOUT_SCALE).
VM_BOOT_LIMIT=${VM_BOOT_LIMIT:-240}
# More kernel command line, after the harness's own (test-vm-debug: acpi=noirq).
VM_KERNEL_ARGS=${VM_KERNEL_ARGS:-}
# More qemu arguments, split at spaces: tests/crash/powercut.sh passes
# "-pidfile FILE" to SIGKILL qemu itself at the moment of a power cut.
VM_QEMU_ARGS=${VM_QEMU_ARGS:-}

vm_log() { echo "vm: $*" >&2; }

# Whether qemu and the kernel image are there at all; the suite skips, not
# fails, on a machine without them.
vm_available() {
	command -v qemu-system-x86_64 >/dev/null 2>&1 || { echo "qemu-system-x86_64 not installed"; return 1; }
	[ -r "$VM_KERNEL" ] || { echo "kernel image $VM_KERNEL not readable"; return 1; }
	[ -d "$VM_MODROOT/lib/modules/$VM_KVER" ] || { echo "modules of $VM_KVER missing in $VM_MODROOT/lib/modules"; return 1; }
	command -v busybox >/dev/null 2>&1 || { echo "busybox-static not installed"; return 1; }
	return 0
}

vm_has_upstream() { [ -r "$VM_UPSTREAM_KO" ]; }
# Why upstream's module is absent, for skip messages: VM_UPSTREAM_WHY when the
# caller knows (scripts/test-vm-kernel.sh: it does not build on 6.12).
vm_upstream_why() {
	echo "${VM_UPSTREAM_WHY:-upstream dm-writeboost.ko not built for $VM_KVER ($VM_UPSTREAM_KO)}"
}
vm_has_wbkit() { [ -r "$VM_WBKIT_KO" ]; }

# The host builds of VM_GUEST_TOOLS that exist, one path a line.
_vm_guest_tool_files() {
	local t f
	for t in "${VM_GUEST_TOOLS[@]}"; do
		f=${WBKIT_BUILD_DIR:-$WBKIT_ROOT/build}/tools/$t/$t
		[ -x "$f" ] && echo "$f"
	done
	return 0
}

# The VM_BOOT_MODULES this kernel has (as modules or built in).
_vm_boot_modules() {
	local m gone
	for m in "${VM_BOOT_MODULES[@]}"; do
		for gone in "${VM_BOOT_MODULES_GONE_LATER[@]}"; do
			if [ "$m" = "$gone" ] && ! modprobe ${VM_MODROOT:+-d "$VM_MODROOT"} -S "$VM_KVER" -D "$m" >/dev/null 2>&1; then
				continue 2
			fi
		done
		echo "$m"
	done
}

_vm_module_files() {
	local m
	{
		for m in $(_vm_boot_modules); do
			# Built-in modules print "builtin <name>": nothing to copy.
			modprobe ${VM_MODROOT:+-d "$VM_MODROOT"} -S "$VM_KVER" -D "$m" | awk '$1 == "insmod" { print $2 }'
		done
		# A kernel built without one of these (the sanitizer kernel has no
		# dm-writecache) leaves it out: the scripts that need it say so.
		for m in "${VM_EXTRA_MODULES[@]}"; do
			modprobe ${VM_MODROOT:+-d "$VM_MODROOT"} -S "$VM_KVER" -D "$m" 2>/dev/null |
				awk '$1 == "insmod" { print $2 }' || true
		done
	} | sort -u
}

# Everything the initramfs is made of, as one line per input; a change to any
# of them (a rebuilt dm-wbkit.ko, an upgraded kernel) rebuilds it.
_vm_fingerprint() {
	local f
	{
		echo "kver $VM_KVER modroot $VM_MODROOT"
		sha256sum "$VM_DIR/lib.sh" "$VM_DIR/guest-lib.sh" "$VM_DIR/wbstamp.c"
		for f in "$(command -v busybox)" "${VM_HOST_PROGRAMS[@]}" "${VM_OPTIONAL_PROGRAMS[@]}" "${VM_HOST_FILES[@]}" "$VM_UPSTREAM_KO" "$VM_WBKIT_KO" $(_vm_module_files) $(_vm_guest_tool_files); do
			if [ -e "$f" ]; then
				stat -L -c '%n %s %Y' "$f"
			else
				echo "absent $f"
			fi
		done
	} | sha256sum | cut -d' ' -f1
}

_vm_copy_libs() {
	local root=$1 prog=$2 lib
	for lib in $(ldd "$prog" | awk '$(NF-1) ~ /^\// { print $(NF-1) }'); do
		[ -e "$root$lib" ] || install -D -m 0755 "$lib" "$root$lib"
	done
}

_vm_copy_with_libs() {
	install -D -m 0755 "$2" "$1$2"
	_vm_copy_libs "$1" "$2"
}

vm_build_wbstamp() {
	mkdir -p "$VM_WORK"
	if [ ! -x "$VM_WBSTAMP" ] || [ "$VM_DIR/wbstamp.c" -nt "$VM_WBSTAMP" ]; then
		gcc -static -O2 -Wall -Wextra -Werror -o "$VM_WBSTAMP.tmp.$$" "$VM_DIR/wbstamp.c"
		mv -f "$VM_WBSTAMP.tmp.$$" "$VM_WBSTAMP"
	fi
}

_vm_write_init() {
	local init=$1
	cat >"$init" <<EOF
#!/bin/sh
# Generated by tests/vm/lib.sh. Runs the script on the last virtio disk, then
# cuts the power: nothing is flushed or torn down on the way out.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu/ceph
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
init_failed=0
# Modules built in (the debug kernel) are listed in modules.builtin: nothing
# to load. Names with _ for -, as the host wrote them below; few forks, as
# every process start is slow on a KASAN kernel under TCG.
builtin=" \$(sed 's|.*/||; s|\\.ko\$||; s|-|_|g' "/lib/modules/\$(uname -r)/modules.builtin" 2>/dev/null | tr '\\n' ' ') "
load_module() {
	case "\$builtin" in *" \$2 "*) return 0 ;; esac
	modprobe \$1 || { echo "WB: init_error=modprobe_\$1"; init_failed=1; }
}
$(for m in $(_vm_boot_modules); do echo "load_module $m ${m//-/_}"; done)
want=\$(sed -n 's/.*wb\.disks=\([0-9]*\).*/\1/p' /proc/cmdline)
tries=0
while [ "\$(ls /sys/block | grep -c '^vd')" -lt "\${want:-1}" ] && [ \$tries -lt 200 ]; do
	tries=\$((tries + 1)); usleep 50000
done
# vdz sorts after vdaa, so order by length first.
last=\$(ls /sys/block | grep '^vd' | awk '{ print length(\$0), \$0 }' | sort -n | tail -1 | cut -d' ' -f2)
tries=0
while [ ! -b "/dev/\$last" ] && [ \$tries -lt 100 ]; do tries=\$((tries + 1)); usleep 50000; done
if [ \$init_failed = 1 ] || [ -z "\$last" ]; then
	dmesg | sed 's/^/dmesg: /'
	echo "WB: guest_exit=125"
	poweroff -f -n
fi
# guest-lib.sh: the start every guest makes (the watchdog among it).
. /lib/wbguest.sh
wb_guest_begin
sh "/dev/\$last"
rc=\$?
[ -z "\$wd_pid" ] || kill \$wd_pid 2>/dev/null
echo "WB: guest_end=\$(cut -d' ' -f1 /proc/uptime)"
dmesg | sed 's/^/dmesg: /'
echo "WB: guest_exit=\$rc"
poweroff -f -n
EOF
	chmod 0755 "$init"
}

# Builds the initramfs unless the cached one was made from the same inputs.
vm_prepare() {
	local why
	if ! why=$(vm_available); then
		vm_log "cannot run: $why"
		return 1
	fi
	mkdir -p "$VM_WORK"
	(
		# Scenarios of two engineers may start at once: one builds, the other waits.
		flock 9
		vm_build_wbstamp
		local fp
		fp=$(_vm_fingerprint)
		if [ -f "$VM_INITRD" ] && [ "$(cat "$VM_INITRD.inputs" 2>/dev/null)" = "$fp" ]; then
			exit 0
		fi
		vm_log "building initramfs for $VM_KVER"
		local root
		root=$(mktemp -d "$VM_WORK/root.XXXXXX")
		# shellcheck disable=SC2064
		trap "rm -rf '$root'" EXIT
		mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,lib,proc,sys,dev,tmp,run,etc}
		install -m 0755 "$(command -v busybox)" "$root/bin/busybox"
		local applet
		for applet in $(busybox --list); do
			# A link named busybox would replace the binary with a link to itself (ELOOP).
			[ "$applet" = busybox ] && continue
			ln -s busybox "$root/bin/$applet"
		done
		local prog
		for prog in "${VM_HOST_PROGRAMS[@]}"; do
			_vm_copy_with_libs "$root" "$prog"
		done
		for prog in "${VM_OPTIONAL_PROGRAMS[@]}"; do
			if [ -x "$prog" ]; then _vm_copy_with_libs "$root" "$prog"; fi
		done
		for prog in "${VM_HOST_FILES[@]}"; do
			[ -e "$prog" ] && install -D -m 0644 "$prog" "$root$prog"
		done
		install -m 0755 "$VM_WBSTAMP" "$root/usr/local/bin/wbstamp"
		for prog in $(_vm_guest_tool_files); do
			strip --strip-all -o "$root/usr/local/bin/$(basename "$prog")" "$prog"
			_vm_copy_libs "$root" "$prog"
		done
		install -m 0644 "$VM_DIR/guest-lib.sh" "$root/lib/wbguest.sh"

		local moddir=/lib/modules/$VM_KVER mod rel compressed=0
		mkdir -p "$root$moddir"
		cp "$VM_MODROOT$moddir"/modules.* "$root$moddir/"
		for mod in $(_vm_module_files); do
			rel=${mod#"$VM_MODROOT"}
			case $mod in
			# Debian's 6.12 ships .ko.xz: unpacked here, so the guest's
			# busybox modprobe needs no decompressor, and depmod below
			# makes modules.dep name the .ko files.
			*.ko.xz | *.ko.zst | *.ko.gz)
				mkdir -p "$(dirname "$root$rel")"
				case $mod in
				*.xz) xz -dc "$mod" ;;
				*.zst) zstd -dc -q "$mod" ;;
				*.gz) gzip -dc "$mod" ;;
				esac >"$root${rel%.*}"
				compressed=1
				;;
			*) install -D -m 0644 "$mod" "$root$rel" ;;
			esac
		done
		[ "$compressed" = 0 ] || depmod -b "$root" "$VM_KVER"
		if vm_has_upstream; then
			install -D -m 0644 "$VM_UPSTREAM_KO" "$root/lib/modules-extra/upstream/dm-writeboost.ko"
		fi
		if vm_has_wbkit; then
			install -D -m 0644 "$VM_WBKIT_KO" "$root/lib/modules-extra/wbkit/dm-wbkit.ko"
		fi
		_vm_write_init "$root/init"

		(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet | gzip -1) >"$VM_INITRD.tmp.$$"
		mv -f "$VM_INITRD.tmp.$$" "$VM_INITRD"
		echo "$fp" >"$VM_INITRD.inputs"
	) 9>"$VM_WORK/.prepare.lock"
}

# Makes a zero-filled raw image of the given size (bytes, or with a K/M/G suffix).
vm_image() {
	local path=$1 size=$2
	rm -f "$path"
	truncate -s "$size" "$path"
}

# vm_run <guest script|-> <disk image>...
# Boots the VM with the images as /dev/vda, /dev/vdb, ... in the given order
# and the script as the last disk. The console goes to $VM_LOG_NEXT if set
# (used once), else to a new file under $VM_LOG_DIR; either way the path is
# left in VM_LOG, which vm_result reads.
# Returns 0 when the script exited 0, 1 when it exited non-zero, 124 on
# timeout ($VM_TIMEOUT s), 125 when the guest did not finish (panic, init
# failure) or the kernel log shows $VM_FAIL_PATTERNS.
vm_run() {
	local script=$1
	shift
	[ -f "$VM_INITRD" ] || vm_prepare || return 125
	mkdir -p "$VM_LOG_DIR" "$VM_WORK/tmp"
	local name
	if [ "$script" = - ]; then name=stdin; else name=$(basename "$script" .sh); fi
	VM_LOG=${VM_LOG_NEXT:-$VM_LOG_DIR/$name.$(date +%Y%m%d-%H%M%S).$$.$RANDOM.log}
	VM_LOG_NEXT=

	# The script travels as a raw disk; newline padding (not zeros) keeps
	# sh from reading NUL bytes after its end.
	local script_disk
	script_disk=$(mktemp "$VM_WORK/tmp/script.XXXXXX")
	if [ "$script" = - ]; then cat >"$script_disk"; else cat "$script" >"$script_disk"; fi
	local size pad
	size=$(stat -c %s "$script_disk")
	pad=$(((4096 - size % 4096) % 4096 + 4096))
	head -c "$pad" /dev/zero | tr '\0' '\n' >>"$script_disk"

	local drives=() disk letters=abcdefghijklmnopqrstuvwxyz i=0 opts
	for disk in "$@" "$script_disk"; do
		# An nbd+unix:// URL is an NBD export (bench/hdd: the hard-disk model).
		case $disk in
		nbd+unix://*) ;;
		*) [ -f "$disk" ] || { vm_log "no such disk image: $disk"; rm -f "$script_disk"; return 125; } ;;
		esac
		# VM_DRIVE_OPTS_vd<letter> appends -drive options to that one disk,
		# e.g. VM_DRIVE_OPTS_vda=throttling.iops-total=150 makes /dev/vda
		# as slow as a hard disk (bench/vm-writeback-sorting.sh).
		opts=VM_DRIVE_OPTS_vd${letters:i:1}
		drives+=(-drive "file=${disk//,/,,},format=raw,if=virtio,cache=none${!opts:+,${!opts}}")
		i=$((i + 1))
	done

	# -net none: no NIC, so the BIOS does not spend seconds in the iPXE ROM.
	# no_timer_check: on a loaded host TCG can miss the kernel's early
	# IO-APIC timer check, which then panics ("IO-APIC + timer doesn't work").
	local started=$SECONDS rc=0 limit=$((VM_TIMEOUT * VM_TIMEOUT_SCALE)) watchdog=
	# A boot that never reaches init (seen once under load: SeaBIOS's
	# "Booting from ROM" and then nothing for 15 minutes) is the emulator's,
	# not the test's: after VM_BOOT_LIMIT seconds without the guest's first
	# line it is killed and booted once more, and the log says so.
	local attempt qpid stalled
	for attempt in 1 2; do
		started=$SECONDS rc=0 stalled=0 watchdog=
		if [ "$VM_WATCHDOG_MARGIN" -gt 0 ] && [ "$limit" -gt "$VM_WATCHDOG_MARGIN" ]; then
			watchdog=" wb.watchdog=$(($(date +%s) + limit - VM_WATCHDOG_MARGIN))"
		fi
		# shellcheck disable=SC2086 # VM_QEMU_ARGS: words
		timeout -k 10 "$limit" qemu-system-x86_64 -accel tcg -cpu max -m "$VM_MEM" -smp "$VM_SMP" \
			-nographic -no-reboot -net none -rtc base=utc \
			-kernel "$VM_KERNEL" -initrd "$VM_INITRD" \
			-append "console=ttyS0 quiet panic=-1 no_timer_check wb.disks=$(($# + 1))$watchdog${VM_KERNEL_ARGS:+ $VM_KERNEL_ARGS}" \
			"${drives[@]}" ${VM_QEMU_ARGS:-} </dev/null >"$VM_LOG" 2>&1 &
		qpid=$!
		while kill -0 "$qpid" 2>/dev/null; do
			# 2>/dev/null: qemu's shell may not have created the log yet.
			grep -q 'WB: guest_start=' "$VM_LOG" 2>/dev/null && break
			if [ $((SECONDS - started)) -ge $((VM_BOOT_LIMIT * VM_TIMEOUT_SCALE)) ]; then
				vm_log "the guest did not reach init in $((SECONDS - started))s (last output: $(tr -d '\r' <"$VM_LOG" | grep -a . | tail -n 1 | cut -c1-80)); attempt $attempt"
				pkill -KILL -P "$qpid" 2>/dev/null
				kill -KILL "$qpid" 2>/dev/null
				stalled=1
				break
			fi
			sleep 1
		done
		wait "$qpid" || rc=$?
		[ "$stalled" = 1 ] && [ "$attempt" = 1 ] && continue
		# A kernel that panics before the guest's init ran loaded nothing
		# of ours: seen once with sid's 7.2 under TCG on a loaded host (an
		# int3 oops in enqueue_timer 2 s into the boot, text patching).
		# Booted once more; the first log is kept beside the second.
		if [ "$attempt" = 1 ] && ! grep -q 'WB: guest_start=' "$VM_LOG" &&
			tr -d '\r' <"$VM_LOG" | grep 'Kernel panic' >/dev/null; then
			cp "$VM_LOG" "$VM_LOG.boot1"
			vm_log "the kernel panicked before the guest's init ($(tr -d '\r' <"$VM_LOG" | grep -a -m 1 -oE '(Oops|BUG:|Kernel panic).*' | cut -c1-100)); booting once more, first log: $VM_LOG.boot1"
			continue
		fi
		break
	done
	rm -f "$script_disk"
	VM_ELAPSED=$((SECONDS - started))
	if [ "$stalled" = 1 ]; then
		vm_log "the guest did not reach init in two boots, log: $VM_LOG"
		return 125
	fi

	if [ "$rc" = 124 ] || [ "$rc" = 137 ] || tr -d '\r' <"$VM_LOG" | grep 'wbwatchdog: ' >/dev/null; then
		# The watchdog fired: a timeout, even if the script made it in the
		# last seconds (its dump would look like a kernel problem).
		vm_log "timeout after ${limit}s (watchdog: ${VM_WATCHDOG_MARGIN}s before), log: $VM_LOG"
		_vm_watchdog_summary "$VM_LOG" >&2
		return 124
	fi
	local guest_exit
	guest_exit=$(vm_result guest_exit)
	if [ -z "$guest_exit" ]; then
		vm_log "guest did not finish (qemu rc $rc), log: $VM_LOG"
		return 125
	fi
	# Not grep -q, here or in any such pipeline: it stops at the first
	# match, tr dies of SIGPIPE on a log larger than the pipe, and under
	# pipefail the match reads as a failure (a warning early in a long log
	# was missed that way, and the watchdog's dump went unseen).
	if tr -d '\r' <"$VM_LOG" | grep -E "$VM_FAIL_PATTERNS" >/dev/null; then
		vm_log "kernel reported a problem, log: $VM_LOG"
		tr -d '\r' <"$VM_LOG" | grep -E -m 5 "$VM_FAIL_PATTERNS" >&2
		return 125
	fi
	if [ "$guest_exit" = 125 ]; then
		vm_log "guest init failed, log: $VM_LOG"
		return 125
	fi
	[ "$guest_exit" = 0 ] || { vm_log "guest script exited $guest_exit, log: $VM_LOG"; return 1; }
	return 0
}

# After a timeout: whether the watchdog dumped the tasks, and which were
# blocked (sysrq w), with the first frames of their stacks.
_vm_watchdog_summary() {
	local log=${1:-$VM_LOG}
	if ! tr -d '\r' <"$log" | grep 'wbwatchdog: ' >/dev/null; then
		echo "vm: no watchdog dump in the log (VM_WATCHDOG_MARGIN=$VM_WATCHDOG_MARGIN)"
		return 0
	fi
	echo "vm: watchdog dump in the log; blocked tasks (sysrq w):"
	tr -d '\r' <"$log" | sed -n '/sysrq: Show Blocked State/,/sysrq: Show State/p' |
		grep -E 'task:|^\[[ 0-9.]*\]  [a-z_0-9]+\+0x' | head -n 40 | sed 's/^/    /'
}

# vm_result <key> [log]: the value of the last "WB: key=value" console line.
vm_result() {
	local key=$1 log=${2:-$VM_LOG}
	tr -d '\r' <"$log" | sed -n "s/^WB: $key=//p" | tail -n 1
}

# vm_results [log]: every "WB: key=value" line, as key=value.
vm_results() {
	tr -d '\r' <"${1:-$VM_LOG}" | sed -n 's/^WB: //p'
}

# vm_replay_fixtures <upstream|wbkit> <fixture dir>...
# Boots once with the images of each fixture (fixtures/upstream/<name>/,
# decompressed to scratch copies) and has the chosen target replay each log:
# fixture i is /dev/vd(2i) backing, /dev/vd(2i+1) cache, device wb<i>. Leaves
# fixture<i>.status and fixture<i>.logical_sha256 in the console log
# (vm_result) and returns like vm_run. Nothing is removed: remove would write.
vm_replay_fixtures() {
	local module=$1
	shift
	local scratch letters=abcdefghijklmnopqrstuvwxyz i=0 dir disks=()
	scratch=$(mktemp -d "$VM_WORK/replay.XXXXXX")
	local guest=$scratch/guest.sh
	{
		echo '. /lib/wbguest.sh'
		echo "wb_load_target $module"
	} >"$guest"
	for dir in "$@"; do
		zstd -d -q "$dir/backing.img.zst" -o "$scratch/backing$i.img"
		zstd -d -q "$dir/cache.img.zst" -o "$scratch/cache$i.img"
		disks+=("$scratch/backing$i.img" "$scratch/cache$i.img")
		local backing=/dev/vd${letters:$((2 * i)):1} cache=/dev/vd${letters:$((2 * i + 1)):1}
		cat >>"$guest" <<GUEST
wb_dm_create wb$i "0 \$(wb_sectors $backing) writeboost $backing $cache"
wb_report fixture$i.status "\$(wb_dm_status wb$i)"
wb_report fixture$i.logical_sha256 "\$(\$SHA256SUM </dev/mapper/wb$i | cut -d' ' -f1)"
GUEST
		i=$((i + 1))
	done
	local rc=0
	vm_run "$guest" "${disks[@]}" || rc=$?
	rm -rf "$scratch"
	return $rc
}

_vm_fixture_kv() {
	sed -n "s/^$2=//p" "$1/status.kv"
}

# vm_check_fixture_replay <index> <fixture dir>: compares what vm_replay_fixtures
# saw for fixture <index> with what the upstream target recorded. The logical
# content and the log position must match exactly; last_writeback_id may be
# ahead of the log's own value (a constructor may write back, as upstream
# does on a wrapped log) but not past last_flushed_id.
vm_check_fixture_replay() {
	local i=$1 dir=$2 name
	name=$(basename "$dir")
	local sha status expected_sha
	sha=$(vm_result "fixture$i.logical_sha256")
	status=$(vm_result "fixture$i.status")
	expected_sha=$(cut -d' ' -f1 "$dir/logical.sha256")
	local -a got
	read -r -a got <<<"$status"
	local failed=0
	if [ "$sha" != "$expected_sha" ]; then
		echo "$name: logical sha256 $sha, upstream recorded $expected_sha"
		failed=1
	fi
	local k field
	k=0
	for field in cursor_pos nr_cache_blocks nr_segments current_id last_flushed_id; do
		if [ "${got[$k]:-}" != "$(_vm_fixture_kv "$dir" "$field")" ]; then
			echo "$name: $field ${got[$k]:-missing}, upstream recorded $(_vm_fixture_kv "$dir" "$field")"
			failed=1
		fi
		k=$((k + 1))
	done
	local log_wb
	log_wb=$(_vm_fixture_kv "$dir" log.last_writeback_id)
	if [ -z "${got[5]:-}" ] || [ "${got[5]}" -lt "$log_wb" ] || [ "${got[5]}" -gt "${got[4]}" ]; then
		echo "$name: last_writeback_id ${got[5]:-missing}, outside [$log_wb, last_flushed_id ${got[4]:-?}]"
		failed=1
	fi
	if [ "${got[5]:-}" = "$(_vm_fixture_kv "$dir" last_writeback_id)" ] && [ "${got[6]:-}" != "$(_vm_fixture_kv "$dir" nr_dirty_cache_blocks)" ]; then
		echo "$name: nr_dirty_cache_blocks ${got[6]:-missing}, upstream recorded $(_vm_fixture_kv "$dir" nr_dirty_cache_blocks) at the same last_writeback_id"
		failed=1
	fi
	[ "$failed" = 0 ] && echo "$name: replay matches (status: ${got[*]:0:7})"
	return $failed
}
