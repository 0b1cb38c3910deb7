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

# wb_guest_begin: what a guest's init does just before it runs the script
# (tests/vm/lib.sh's /init, tests/fstests/guest-init.sh). Boot messages go
# (noise for the failure patterns); from here on KERN_WARNING and worse reach
# the console as they are raised, so a script's own dmesg -c cannot hide one
# (selftest-canary.sh checks it); the start time is reported; and the
# watchdog starts (VM_WATCHDOG_MARGIN): at wb.watchdog=<epoch> by the clock
# qemu's RTC set, the kernel log, blocked tasks and all stacks go to the
# console. Its pid is in wd_pid (empty without a watchdog).
wb_guest_begin() {
	dmesg -c >/dev/null
	echo 5 >/proc/sys/kernel/printk
	echo "WB: guest_start=$(cut -d' ' -f1 /proc/uptime)"
	wd=$(sed -n 's/.*wb\.watchdog=\([0-9]*\).*/\1/p' /proc/cmdline)
	wd_pid=
	if [ -n "$wd" ] && [ -w /proc/sysrq-trigger ]; then
		(
			while [ "$(date +%s)" -lt "$wd" ]; do sleep 1; done
			# Through the kernel log: a console line a process writes can be
			# cut by a kernel message in its middle (seen in CI), a printk
			# record not.
			echo "wbwatchdog: the script still runs close to the time limit: kernel log, then sysrq w (blocked tasks) and t (all tasks)" >/dev/kmsg
			dmesg | sed 's/^/dmesg: /'
			echo 8 >/proc/sys/kernel/printk
			echo w >/proc/sysrq-trigger
			echo t >/proc/sysrq-trigger
			echo "wbwatchdog: dump done" >/dev/kmsg
		) &
		wd_pid=$!
	fi
}

# wb_on_both_modules FN "UPSTREAM_ARGS" "WBKIT_ARGS": the same case on both
# modules, upstream's first as the reference: FN UPSTREAM_ARGS upstream with
# upstream's module loaded (when the initramfs has it; it is unloaded after),
# then FN WBKIT_ARGS wbkit on dm-wbkit. The ARGS split on spaces.
wb_on_both_modules() {
	_both_fn=$1
	if wb_has_upstream; then
		wb_load_target upstream
		# shellcheck disable=SC2086
		$_both_fn $2 upstream
		wb_unload_target upstream
	fi
	wb_load_target wbkit
	# shellcheck disable=SC2086
	$_both_fn $3 wbkit
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

# wb_target_type <name>: the type of the device's one target.
wb_target_type() {
	$DMSETUP table "$1" | cut -d' ' -f3
}

# wb_report_stall <key> <file>: wbctl's "I/O held N ms" figure in the
# file, reported as <key>_stall_ms; no figure fails the scenario.
wb_report_stall() {
	ms=$(sed -n 's/.*I\/O held \([0-9]*\) ms.*/\1/p' "$2" | head -n 1)
	[ -n "$ms" ] || wb_fail "$1: wbctl printed no stall"
	wb_report "${1}_stall_ms" "$ms"
}

# wb_busy_ext4_start <tag>: on ext4 mounted at /mnt (over /dev/mapper/wb),
# a 4 MiB file whose digest is kept (WB_STATIC_SUM), and fio in the
# background until stopped (WB_FIO_PID): every block it writes is read back
# and checked (verify_backlog), fsync every 8 writes, O_DIRECT. Stopped by
# SIGINT it saves its verify state (in /tmp/fio-<tag>) for the read phase.
wb_busy_ext4_start() {
	$DD if=/dev/urandom of=/mnt/static bs=1M count=4 conv=fsync 2>/dev/null || wb_fail "$1: static file"
	WB_STATIC_SUM=$($SHA256SUM </mnt/static)
	mkdir -p /tmp/fio-$1
	WB_FIO_JOB="--name=v --directory=/mnt --nrfiles=4 --filesize=6M --rw=randwrite --bs=4k --ioengine=psync
		--direct=1 --fsync=8 --verify=crc32c --verify_fatal=1 --aux-path=/tmp/fio-$1"
	# shellcheck disable=SC2086 # the job's words
	$FIO $WB_FIO_JOB --verify_backlog=64 --time_based --runtime=600 >/tmp/fio.$1 2>&1 &
	WB_FIO_PID=$!
}

# wb_busy_ext4_finish <tag>: stops fio and reports <tag>_fio_rc, _fio_err,
# _fio_slowest and _static; remounts and has fio read back and check every
# block it wrote (_verify_rc, _verify_err); unmounts and reports
# `e2fsck -fn` (_fsck_rc). The device stays.
wb_busy_ext4_finish() {
	tag=$1
	# fio exits 128 when a signal ends it ("terminating on signal"); any
	# verify error would show as err= nonzero and exit 1.
	kill -INT $WB_FIO_PID
	fio_rc=0
	wait $WB_FIO_PID || fio_rc=$?
	sed "s/^/$tag fio: /" /tmp/fio.$tag
	if [ "$fio_rc" = 128 ] && grep -q "terminating on signal" /tmp/fio.$tag; then
		fio_rc=0
	fi
	wb_report "${tag}_fio_rc" "$fio_rc"
	# The workload's own view of the stalls: the slowest bucket of fio's
	# latency histogram over the whole run (every I/O, the verify reads
	# among them: one of them is the one a suspend held, iodepth 1), e.g.
	# "msec 2000=0.01%": 0.01% of the I/Os took 1 to 2 s.
	wb_report "${tag}_fio_slowest" "$(grep -E '^ +lat \((usec|msec)\) +:' /tmp/fio.$tag | tail -n 1 |
		sed 's/^ *lat (\([a-z]*\)) *: */\1 /; s/.*\(msec\|usec\) .*, */\1 /')"
	wb_report "${tag}_fio_err" "$(sed -n 's/.*err= *\([0-9-]*\).*/\1/p' /tmp/fio.$tag | head -n 1)"
	[ "$($SHA256SUM </mnt/static)" = "$WB_STATIC_SUM" ] || wb_fail "$tag: the static file changed"
	wb_report "${tag}_static" ok

	umount /mnt || wb_fail "$tag: umount failed"
	mount -t ext4 -o noinit_itable /dev/mapper/wb /mnt || wb_fail "$tag: mount failed"
	verify_rc=0
	# shellcheck disable=SC2086 # the job's words
	$FIO $WB_FIO_JOB --verify_only --verify_state_load=1 >/tmp/fio-verify.$tag 2>&1 || verify_rc=$?
	sed "s/^/$tag fio verify: /" /tmp/fio-verify.$tag | grep -E "err=|verify|error|READ:" | head -n 20
	wb_report "${tag}_verify_rc" "$verify_rc"
	wb_report "${tag}_verify_err" "$(sed -n 's/.*err= *\([0-9-]*\).*/\1/p' /tmp/fio-verify.$tag | head -n 1)"
	umount /mnt || wb_fail "$tag: umount failed"
	/sbin/e2fsck -fn /dev/mapper/wb >/tmp/fsck.$tag 2>&1
	fsck_rc=$?
	sed "s/^/$tag fsck: /" /tmp/fsck.$tag | tail -n 3
	wb_report "${tag}_fsck_rc" "$fsck_rc"
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

# wb_zero_cache <dev>: zeroes the first and the last MiB of a device, which
# dm-wbkit then formats as a new cache (kmod/README.md, the format rule: a
# device with anything else there is refused). Upstream formats any device
# without its magic, so this does for both.
wb_zero_cache() {
	zsz=$(wb_sectors "$1") || wb_fail "no size for $1"
	$DD if=/dev/zero of="$1" bs=1M count=1 oflag=direct status=none ||
		wb_fail "zeroing the first MiB of $1 failed"
	[ "$zsz" -le 2048 ] || $DD if=/dev/zero of="$1" bs=512 count=2048 seek=$((zsz - 2048)) oflag=direct status=none ||
		wb_fail "zeroing the last MiB of $1 failed"
}

# The caches the kernel already has, and the writeboost targets, behind one
# pair of calls, so that a crash check and a benchmark build each the same way.
#   wb_cache_create <kind> <backing> <cache> [format]
# kind: wbkit, upstream (a writeboost table; the target type is
# $WB_WBKIT_TARGET for wbkit, "writeboost" unless dm-wbkit was loaded under
# another name), writecache (SSD mode, 4 KiB blocks, default watermarks),
# writecache-wm (high_watermark 90 low_watermark 80: writeback starts later
# and stops with a tenth of the cache free), bcache (make-bcache --writeback,
# buckets of $WB_BCACHE_BUCKET), bcache-seq0 (the same, sequential_cutoff 0),
# dmcache (smq, writeback, blocks of $WB_DMCACHE_BLOCK sectors, metadata on
# the first $WB_DMCACHE_META_SECTORS sectors of the cache device).
# With "format", the cache device is made empty first; without, the cache
# is built on what the devices hold (a crash state). Sets WB_CACHE_DEV to the
# cached device. At most one cache exists at a time. Returns 1 (after a line
# saying why on stderr) when the kernel refuses it.
WB_WBKIT_TARGET=${WB_WBKIT_TARGET:-writeboost}
WB_BCACHE_BUCKET=${WB_BCACHE_BUCKET:-512k}
WB_DMCACHE_BLOCK=${WB_DMCACHE_BLOCK:-64}
WB_DMCACHE_META_SECTORS=${WB_DMCACHE_META_SECTORS:-8192}
MAKE_BCACHE=/usr/sbin/make-bcache

# wb_cache_modules <kind>: loads what the kind needs (the writeboost modules
# are loaded by wb_load_target). Skips the test when the module is missing.
wb_cache_modules() {
	case $1 in
	writecache*) modprobe dm-writecache || wb_skip "modprobe dm-writecache failed" ;;
	bcache*)
		modprobe bcache || wb_skip "modprobe bcache failed"
		[ -x $MAKE_BCACHE ] || wb_skip "make-bcache not in the initramfs (bcache-tools)"
		;;
	dmcache) modprobe dm-cache-smq || wb_skip "modprobe dm-cache-smq failed" ;;
	esac
}

# The one bcache device there is, or nothing.
wb_bcache_dev() {
	for d in /sys/block/bcache*; do
		[ -d "$d" ] && echo "/dev/${d##*/}" && return 0
	done
	return 1
}

# The cache set's directory under /sys/fs/bcache, or nothing.
wb_bcache_set() {
	for d in /sys/fs/bcache/*-*; do
		[ -d "$d" ] && echo "$d" && return 0
	done
	return 1
}

wb_cache_create() {
	kind=$1 backing=$2 cache=$3 format=${4:-}
	sectors=$(wb_sectors "$backing")
	WB_CACHE_DEV=/dev/mapper/wb
	case $kind in
	wbkit | upstream)
		type=writeboost
		[ "$kind" = wbkit ] && type=$WB_WBKIT_TARGET
		# Zeros at both ends make either target format the cache: an empty log.
		[ -z "$format" ] || wb_zero_cache "$cache"
		table="0 $sectors $type $backing $cache"
		;;
	writecache | writecache-wm)
		# A zero first sector makes dm-writecache format the cache.
		[ -z "$format" ] || $DD if=/dev/zero of="$cache" bs=1M count=1 oflag=direct status=none
		opts=0
		[ "$kind" = writecache-wm ] && opts="4 high_watermark 90 low_watermark 80"
		table="0 $sectors writecache s $backing $cache 4096 $opts"
		;;
	dmcache)
		csectors=$(wb_sectors "$cache")
		$DMSETUP create wbmeta --table "0 $WB_DMCACHE_META_SECTORS linear $cache 0" &&
			$DMSETUP create wbdata --table "0 $((csectors - WB_DMCACHE_META_SECTORS)) linear $cache $WB_DMCACHE_META_SECTORS" ||
			{ echo "dmcache: the metadata and data slices of $cache failed" >&2; return 1; }
		$DMSETUP mknodes
		# A zero superblock makes dm-cache format its metadata.
		[ -z "$format" ] || $DD if=/dev/zero of=/dev/mapper/wbmeta bs=1M count=1 oflag=direct status=none
		table="0 $sectors cache /dev/mapper/wbmeta /dev/mapper/wbdata $backing $WB_DMCACHE_BLOCK 1 writeback smq 0"
		;;
	bcache | bcache-seq0)
		if [ -n "$format" ]; then
			# make-bcache refuses a device that holds a bcache superblock.
			$DD if=/dev/zero of="$cache" bs=64k count=1 oflag=direct status=none
			$DD if=/dev/zero of="$backing" bs=64k count=1 oflag=direct status=none
			$MAKE_BCACHE --writeback --bucket "$WB_BCACHE_BUCKET" -C "$cache" -B "$backing" >/tmp/make-bcache.out 2>&1 ||
				{ cat /tmp/make-bcache.out >&2; echo "make-bcache failed" >&2; return 1; }
		fi
		echo "$cache" >/sys/fs/bcache/register 2>/tmp/bcache.err ||
			{ echo "bcache: registering the cache $cache failed: $(cat /tmp/bcache.err)" >&2; return 1; }
		echo "$backing" >/sys/fs/bcache/register 2>/tmp/bcache.err ||
			{ echo "bcache: registering the backing device $backing failed: $(cat /tmp/bcache.err)" >&2; wb_cache_remove bcache; return 1; }
		tries=0
		while ! WB_CACHE_DEV=$(wb_bcache_dev) && [ $tries -lt 100 ]; do
			tries=$((tries + 1))
			usleep 50000
		done
		[ -n "$WB_CACHE_DEV" ] || { echo "bcache: no /dev/bcache* after registering" >&2; wb_cache_remove bcache; return 1; }
		sys=/sys/block/${WB_CACHE_DEV#/dev/}/bcache
		# Attached: the state reads clean or dirty, not "no cache".
		tries=0
		while [ "$(cat $sys/state)" = "no cache" ] && [ $tries -lt 100 ]; do
			tries=$((tries + 1))
			usleep 50000
		done
		[ "$(cat $sys/state)" != "no cache" ] ||
			{ echo "bcache: the backing device did not attach to its cache" >&2; wb_cache_remove bcache; return 1; }
		[ "$(cat $sys/cache_mode | sed 's/.*\[\(.*\)\].*/\1/')" = writeback ] || echo writeback >$sys/cache_mode
		[ "$kind" = bcache-seq0 ] && echo 0 >$sys/sequential_cutoff
		while [ ! -b "$WB_CACHE_DEV" ] && [ $tries -lt 200 ]; do
			tries=$((tries + 1))
			usleep 50000
		done
		return 0
		;;
	*) wb_fail "unknown cache kind $kind" ;;
	esac
	if ! $DMSETUP create wb --table "$table" 2>/tmp/dm.err; then
		echo "$kind: dmsetup create failed: $(cat /tmp/dm.err) (table: $table)" >&2
		[ "$kind" = dmcache ] && $DMSETUP remove wbmeta wbdata
		return 1
	fi
	$DMSETUP mknodes wb
}

# wb_cache_remove <kind>: takes the cache apart without writing back what it
# holds (what a power cut would leave stays on the devices).
wb_cache_remove() {
	case $1 in
	bcache*)
		dev=$(wb_bcache_dev) && echo 1 >/sys/block/${dev#/dev/}/bcache/stop
		set_dir=$(wb_bcache_set) && echo 1 >"$set_dir/stop"
		# Both go away asynchronously; the next registration needs them gone.
		tries=0
		while { wb_bcache_dev >/dev/null || wb_bcache_set >/dev/null; } && [ $tries -lt 200 ]; do
			tries=$((tries + 1))
			usleep 50000
		done
		! wb_bcache_dev >/dev/null && ! wb_bcache_set >/dev/null
		;;
	dmcache) $DMSETUP remove wb && $DMSETUP remove wbmeta wbdata ;;
	*) $DMSETUP remove wb ;;
	esac
}

# wb_load_program DISK PATH: the program a scenario's wbkit_guest_program put
# on DISK, as an executable at PATH.
wb_load_program() {
	_wb_size=$(head -c 64 "$1" | tr -d '\000\n ')
	$DD if="$1" of="$2" bs=4096 skip=1 iflag=count_bytes count="$_wb_size" status=none ||
		wb_fail "cannot load the program from $1"
	chmod +x "$2"
}

# The usual device of a scenario: dm "wb" (/dev/mapper/wb), the writeboost
# target over the whole of /dev/vda (backing) with /dev/vdb as its cache.
# wb_table [ARG...]: its table, the ARGs (e.g. 2 writeback_threshold 0)
# after the two devices.
wb_table() {
	echo "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb${*:+ $*}"
}

# wb_start [ARG...]: creates wb with wb_table's table; WB_TABLE keeps it for
# wb_recreate.
wb_start() {
	WB_TABLE=$(wb_table "$@")
	wb_dm_create wb "$WB_TABLE"
}

# wb_recreate [KEY]: removes wb and creates it again with the same table
# (wb_start's), so the target replays its log; with KEY, reports the status
# after the replay as KEY.
wb_recreate() {
	$DMSETUP remove wb || wb_fail "remove failed"
	wb_dm_create wb "$WB_TABLE"
	[ -z "${1:-}" ] || wb_report "$1" "$(wb_dm_status wb)"
}

# wb_drop_caches_remove [KEY]: writes everything back (drop_caches), reports
# the status then as KEY when given, and removes wb: from then on the backing
# device alone holds the data.
wb_drop_caches_remove() {
	$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
	[ -z "${1:-}" ] || wb_report "$1" "$(wb_dm_status wb)"
	$DMSETUP remove wb || wb_fail "remove failed"
}

# wb_swappable_disks: dm devices backd and cached, linear over the whole of
# /dev/vda and /dev/vdb, for a target over them whose backing or cache
# device a case then makes slow or failing by loading another table
# (dm-delay, dm-flakey, error). Sets LB and LC, the disks' sizes in sectors.
wb_swappable_disks() {
	LB=$(wb_sectors /dev/vda)
	LC=$(wb_sectors /dev/vdb)
	wb_dm_create backd "0 $LB linear /dev/vda 0"
	wb_dm_create cached "0 $LC linear /dev/vdb 0"
}

# wb_swap_table <name> <table>: the device's new table takes effect at once
# (load, then resume, which suspends it around the swap).
wb_swap_table() {
	{ $DMSETUP load "$1" --table "$2" && $DMSETUP resume "$1"; } || wb_fail "cannot swap $1"
}

# wb_log_mark <text>: a line "wbscenario: <text>" in the kernel log, where
# wb_log_since starts reading. (Never dmesg -c: the harness reads the whole
# log for warnings.)
wb_log_mark() {
	echo "wbscenario: $1" >/dev/kmsg
}

# wb_log_since <text>: the kernel log from wb_log_mark <text> on.
wb_log_since() {
	dmesg | sed -n "/wbscenario: $1\$/,\$p"
}

# wb_unload_target upstream|wbkit: rmmods the module wb_load_target loaded
# (its devices removed first), so that the other one may load.
wb_unload_target() {
	case "$1" in
	upstream) _wb_mod=dm_writeboost ;;
	wbkit) _wb_mod=dm_wbkit ;;
	*) wb_fail "unknown target module $1" ;;
	esac
	rmmod $_wb_mod || wb_fail "rmmod $_wb_mod failed"
}

# wb_load_both_targets: upstream's module (when the initramfs has it) as the
# target writeboost, and dm-wbkit beside it as the target wbkit, so that a
# case runs on both in one boot without unloading either (wb_on_both_targets).
wb_load_both_targets() {
	if wb_has_upstream; then
		wb_load_target upstream
	fi
	wb_load_target wbkit target_name=wbkit
}

# wb_on_both_targets FN "UPSTREAM_ARGS" "WBKIT_ARGS": after
# wb_load_both_targets, FN UPSTREAM_ARGS writeboost on upstream's target
# (when its module is there: the reference first), then FN WBKIT_ARGS wbkit on
# dm-wbkit's; the last argument is the target type for FN's tables. The ARGS
# split on spaces.
wb_on_both_targets() {
	if wb_has_upstream; then
		# shellcheck disable=SC2086
		$1 $2 writeboost
	fi
	# shellcheck disable=SC2086
	$1 $3 wbkit
}

WBCTL=/usr/local/bin/wbctl

# wb_wbctl <tag> <what> <wbctl arguments...>: runs wbctl, its output kept in
# /tmp/<what>.<tag> and shown as "<tag> <what>: " lines; when wbctl fails,
# the scenario fails after its output.
wb_wbctl() {
	_wbctl_tag=$1 _wbctl_out=/tmp/$2.$1 _wbctl_what=$2
	shift 2
	$WBCTL "$@" >"$_wbctl_out" 2>&1 || { cat "$_wbctl_out"; wb_fail "$_wbctl_tag: wbctl $* failed"; }
	sed "s/^/$_wbctl_tag $_wbctl_what: /" "$_wbctl_out"
}

# wb_wbctl_stall <tag> <what> <wbctl arguments...>: wb_wbctl, then the time
# wbctl held I/O reported as <tag>_<what>_stall_ms (wb_report_stall).
wb_wbctl_stall() {
	wb_wbctl "$@"
	wb_report_stall "$1_$2" "/tmp/$2.$1"
}

# wb_busy_ext4_mkfs <tag>: a new ext4 on /dev/mapper/wb, mounted at /mnt
# (the script has loaded ext4 and made /mnt), and wb_busy_ext4_start <tag>'s
# fio busy on it.
wb_busy_ext4_mkfs() {
	/sbin/mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 /dev/mapper/wb ||
		wb_fail "$1: mkfs.ext4 failed"
	mount -t ext4 -o noinit_itable /dev/mapper/wb /mnt || wb_fail "$1: mount failed"
	wb_busy_ext4_start "$1"
}

# wb_busy_ext4_running <tag> <what>: fails the scenario, after fio's output
# so far, when wb_busy_ext4_start's fio has stopped (during <what>).
wb_busy_ext4_running() {
	kill -0 "$WB_FIO_PID" 2>/dev/null || { cat "/tmp/fio.$1"; wb_fail "$1: fio stopped during $2"; }
}

# wb_try_create <key> <name> <table>: creates the device if the kernel takes
# the table, and reports <key>=created (its /dev/mapper node made) or
# <key>=refused (dmsetup's complaint in /tmp/create.err): for the cases
# where a refusal is the expected outcome.
wb_try_create() {
	if $DMSETUP create "$2" --table "$3" 2>/tmp/create.err; then
		$DMSETUP mknodes "$2"
		wb_report "$1" created
	else
		wb_report "$1" refused
	fi
}

# wb_log_says <key> <text>: reports <key>=ok when the kernel log has <text>
# (a refusal's reason, say), else <key>=missing; shows the log's last
# writeboost lines either way.
wb_log_says() {
	if dmesg | grep -q "$2"; then
		wb_report "$1" ok
	else
		wb_report "$1" missing
	fi
	dmesg | grep writeboost | tail -3
}

# wb_phase <tag> <name> <command...>: runs the command on wb with the
# statistics cleared and reports what it did: the 16 counters (wb_counters)
# as <name>_<tag> and the blocks logged (cursor advance) as
# <name>_logged_<tag>, read a second after it (read caching injects the
# staged blocks in the background once the cells are used).
wb_phase() {
	_phase_tag=$1 _phase_name=$2
	shift 2
	$DMSETUP message wb 0 clear_stat
	_phase_cursor=$(wb_status_field 1)
	"$@"
	sleep 1
	wb_report "${_phase_name}_$_phase_tag" "$(wb_counters wb)"
	wb_report "${_phase_name}_logged_$_phase_tag" "$(($(wb_status_field 1) - _phase_cursor))"
}

# wb_read_twice <block>...: wb_read_blocks, a second for read caching to
# inject what it staged, and the same reads again.
wb_read_twice() {
	wb_read_blocks "$@"
	sleep 1
	wb_read_blocks "$@"
}
