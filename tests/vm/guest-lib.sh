# Helpers for guest scripts (busybox sh). Installed in the initramfs as
# /lib/wbguest.sh; a guest script starts with `. /lib/wbguest.sh`.
# Real programs are called by full path: busybox sh runs its own applets
# (dd, cmp, sha256sum, blockdev) in preference to anything in PATH.

DMSETUP=/usr/sbin/dmsetup
FIO=/usr/bin/fio
BLOCKDEV=/usr/sbin/blockdev
DD=/usr/bin/dd
CMP=/usr/bin/cmp
SHA256SUM=/usr/bin/sha256sum
WBSTAMP=/usr/local/bin/wbstamp

# One result line for the host (vm_result <key>). Values must not contain
# newlines; keep them to one token where possible.
wb_report() {
	echo "WB: $1=$2"
}

wb_fail() {
	echo "WB: fail=$*"
	exit 1
}

# Tells the host this guest cannot run the test (the scenario exits 77).
wb_skip() {
	echo "WB: skip=$*"
	exit 0
}

# wb_load_target upstream|wbkit [module parameters]: insmods the module that
# will provide the "writeboost" target; both register that name, so only one
# may load (unless dm-wbkit gets target_name=<another name>).
wb_load_target() {
	which=$1
	shift
	case "$which" in
	upstream) ko=/lib/modules-extra/upstream/dm-writeboost.ko ;;
	wbkit) ko=/lib/modules-extra/wbkit/dm-wbkit.ko ;;
	*) wb_fail "unknown target module $which" ;;
	esac
	[ -f "$ko" ] || wb_skip "$ko not in the initramfs"
	insmod "$ko" "$@" || wb_fail "insmod $ko $* failed"
	wb_report target_module "$which"
}

# wb_has_upstream: whether upstream's module is in the initramfs (it is not
# when it does not build for the kernel: scenarios then run dm-wbkit's part only).
wb_has_upstream() {
	[ -f /lib/modules-extra/upstream/dm-writeboost.ko ]
}

# wb_dm_create <name> <table>: creates the device and its /dev/mapper node
# (there is no udev).
wb_dm_create() {
	$DMSETUP create "$1" --table "$2" || wb_fail "dmsetup create $1 failed: $2"
	$DMSETUP mknodes "$1"
	[ -b "/dev/mapper/$1" ] || wb_fail "/dev/mapper/$1 did not appear"
}

# wb_stamp <key> <wbstamp arguments...>: runs wbstamp and reports key=ok, or
# key=failed after the last lines of its output.
wb_stamp() {
	local key=$1
	shift
	if $WBSTAMP "$@" >/tmp/wb_stamp.out 2>&1; then
		wb_report "$key" ok
	else
		tail -n 5 /tmp/wb_stamp.out
		wb_report "$key" failed
	fi
}

wb_dm_status() {
	$DMSETUP status "$1" | cut -d' ' -f4-
}

# wb_status_field <n> [device]: field n of the status after dmsetup's
# "start length target" prefix (1: cursor_pos, 7: nr_dirty_caches, ...).
wb_status_field() {
	wb_dm_status "${2:-wb}" | cut -d' ' -f"$1"
}

# wb_counters [device]: the 16 hit/miss counters of the status line as one
# comma-separated token (index k = write << 3 | hit << 2 | on_buffer << 1 | full_size).
wb_counters() {
	wb_dm_status "${1:-wb}" | cut -d' ' -f8-23 | tr ' ' ,
}

# The SHA-256 of stdin, the digest alone.
wb_digest() {
	$SHA256SUM | cut -d' ' -f1
}

# wb_read_blocks <block>...: 4 KiB direct reads of /dev/mapper/wb, data
# dropped (to count hits and misses).
wb_read_blocks() {
	for b in "$@"; do
		$DD if=/dev/mapper/wb of=/dev/null bs=4k skip="$b" count=1 iflag=direct 2>/dev/null ||
			wb_fail "read of block $b failed"
	done
}

wb_sectors() {
	$BLOCKDEV --getsz "$1"
}
