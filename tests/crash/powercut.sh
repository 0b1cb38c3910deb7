#!/usr/bin/env bash
# Power cuts with a volatile write cache per disk (issue 56, item 3).
#
# Why: every other crash test here has one flush domain (dm-log-writes logs
# one device; mode `both` puts backing and cache in one log, so a flush of
# either makes both durable). A real dm-wbkit runs on two disks, each with
# its own volatile write cache: a flush of the cache SSD makes nothing on the
# backing HDD durable, and the reverse. A target (or wbctl, or wbreplay) that
# forgets one of the two flushes loses acknowledged writes only here.
#
# How: each guest disk is served by its own nbdkit with the cache filter
# (`--filter=cache file IMG cache=writeback`, over a unix socket; qemu's
# virtio disk with cache=none forwards the guest's flushes as NBD_CMD_FLUSH
# and sends no FUA): a write reaches IMG only when the guest flushes THAT
# disk (or with FUA, which virtio-blk never sends), and the filter never
# writes dirty blocks back on its own (no cache-max-size: no reclaim).
# Checked on the host with qemu-io and the log filter (tests/crash/README.md,
# "Power cuts with a cache per disk"). A power cut is one `kill -KILL` of both nbdkit
# processes and qemu: every unflushed write of each disk is gone.
#
# The guest runs the stamped workload (tests/vm/wbstamp.c) on the target
# and prints "WB: acked_flush=N" on the serial console after each fsync
# returns; the host keeps the console log up to the cut, so the acknowledged
# writes are recorded outside the guest's disks (a line cut short by the
# kill does not count). The cut comes at a seeded random moment: once the
# guest acknowledged a drawn number of writes, plus a drawn delay (the
# machine's speed decides how far the guest got: a seed repeats the draws,
# not the exact cut). The cache
# is small (6 MiB: ten 512 KiB segments) and every fsync seals a segment,
# so the ring wraps every ~80 writes; writeback_threshold and a drop_caches
# every few seconds keep writeback running through the cut windows.
#
# After each cut, two checks of every acknowledged write:
#   offline  on the host: wbreplay (BUILD_DIR/tools/wbreplay) of a copy of
#            the cache onto a copy of the backing image, then `wbstamp
#            verify` (a cache without the writeboost magic, wiped by wbctl
#            detach, means the backing image alone);
#   kernel   the next boot constructs the target on the images (its own
#            replay) and runs `wbstamp verify` on the dm device before it
#            writes anything; that boot then runs the next cut's workload
#            (a new seed per cut, so an old cut's stamps can never pass for
#            a new write; verify --base-any ignores what older seeds left).
#            After the last cut one more boot, on the plain image files,
#            does the last kernel check.
#
# Modes (POWERCUT_MODE):
#   stamped     the workload alone, cut amid writes, flushes and writeback
#   detach      the workload in the background; after a drawn pause
#               `wbctl detach wb`, and the cut a drawn delay after wbctl
#               started (during its flush rounds, write-back, wipe, switch)
#   mark-clean  a bounded workload, every write acknowledged (final fsync),
#               `dmsetup remove`, then `wbreplay --mark-clean` on the two
#               disks in the guest, cut a drawn delay after it started: the
#               backing device must be flushed before the cache is marked
#               clean, or the cut loses writes
#   mixed       the three in turn on one pair of images (the quick default)
# With a tool, the odd cuts of the mode come while it runs (a drawn moment
# within its measured duration), the even ones 0 to 0.5 s after it finished
# (nothing else flushes the disk it left unflushed: the loss shows then).
#
#   tests/crash/powercut.sh BUILD_DIR [TARGETS]    TARGETS: wbkit (default),
#       upstream, or a comma list (upstream,wbkit: upstream first)
#   quick (make test, ~1.5 min idle):  tests/crash/powercut.sh build
#   full (~13 min idle):               POWERCUT_FULL=1 tests/crash/powercut.sh build
# Environment:
#   POWERCUT_CUTS       cuts per target and mode (default 6)
#   POWERCUT_SEED       seed of the draws and the workloads (default 1)
#   POWERCUT_MODE       mixed (default), stamped, detach, mark-clean, or a
#                       comma list
#   POWERCUT_FULL=1     the full run: upstream,wbkit; stamped, detach and
#                       mark-clean; 12 stamped cuts, 6 each of the others
#                       (POWERCUT_CUTS/_MODE/TARGETS still override)
#   POWERCUT_CACHE_MB   the cache device's size (default 6: ten segments)
#   POWERCUT_DISCARD_PCT  the share of the workload's ops that are discards
#                       of 1 to 8 blocks (wbstamp --discard-pct; default 5,
#                       0 for none; upstream, which refuses discard, gets 0).
#                       Each disk then takes discards, and its nbdkit turns
#                       one into zeros held in its volatile cache like a
#                       write (nbdkit-trimzero-filter.c): a discard flushed
#                       reads zeros after the cut, one not flushed may be
#                       lost, and verify holds the target to exactly that
#   POWERCUT_TABLE_ARGS table arguments in stamped and detach mode
#                       (default "2 writeback_threshold 100")
#   POWERCUT_NBD_LOG=1  stack nbdkit's log filter over the cache filter:
#                       every request the guest sends, with FUA and flushes
#   POWERCUT_KEEP=DIR   keep the work directory (images, logs) there; a run
#                       that lost writes keeps it anyway (in VM_WORK), with
#                       the state each such cut left (cut-N/, state-N/)
#   VM_WBKIT_KO, VM_WORK, WBKIT_BUILD_DIR: as for every VM test (the mutant
#   gate passes its module in VM_WBKIT_KO).
# Exit: 0 nothing acknowledged was lost, 1 something was (the cut, the first
# lost sector and the counts are printed) or the guest failed, 77 skipped
# (qemu or nbdkit missing, unless WBKIT_REQUIRE_ALL_TESTS=1). Upstream's
# losses in a run that also covers wbkit are reported as upstream's finding
# and do not fail it. The last line sums cuts, acknowledged writes checked
# and writes lost, per check.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: powercut.sh BUILD_DIR [wbkit|upstream|upstream,wbkit]}" && pwd)
export WBKIT_BUILD_DIR=${WBKIT_BUILD_DIR:-$build}
source "$here/../vm/lib.sh"

full=${POWERCUT_FULL:-0}
if [ "$full" = 1 ]; then
	targets=${2:-upstream,wbkit}
	modes=${POWERCUT_MODE:-stamped,detach,mark-clean}
else
	targets=${2:-wbkit}
	modes=${POWERCUT_MODE:-mixed}
fi
seed=${POWERCUT_SEED:-1}

skip_or_fail() {
	if [ "${WBKIT_REQUIRE_ALL_TESTS:-0}" = 1 ]; then
		echo "powercut: $1 (WBKIT_REQUIRE_ALL_TESTS=1)"
		exit 1
	fi
	echo "skip: $1"
	exit 77
}
command -v nbdkit >/dev/null 2>&1 || skip_or_fail "nbdkit not installed"
why=$(vm_available) || skip_or_fail "$why"
nbdkit --filter=cache null --dump-plugin >/dev/null 2>&1 || skip_or_fail "nbdkit's cache filter is missing"

wbreplay=$WBKIT_BUILD_DIR/tools/wbreplay/wbreplay
[ -x "$wbreplay" ] || { echo "powercut: $wbreplay not built (cmake --build $build --target wbreplay)"; exit 1; }
case ",$modes," in
*,detach,*)
	# wbctl reaches the guest in the initramfs (VM_GUEST_TOOLS).
	[ -x "$WBKIT_BUILD_DIR/tools/wbctl/wbctl" ] || { echo "powercut: wbctl not built in $WBKIT_BUILD_DIR"; exit 1; }
	;;
esac
IFS=, read -r -a target_list <<<"$targets"
for t in "${target_list[@]}"; do
	case $t in
	wbkit)
		source "$here/../vm/scenarios/wbkit-lib.inc"
		wbkit_prepare
		;;
	upstream)
		vm_prepare || exit 1
		if ! vm_has_upstream; then
			# Beside wbkit, upstream's part is left out (PARTIAL), as in the VM scenarios.
			[[ ",$targets," == *,wbkit,* ]] || skip_or_fail "$(vm_upstream_why)"
			echo "PARTIAL: upstream left out: $(vm_upstream_why)"
			targets=$(echo ",$targets," | sed 's/,upstream,/,/; s/^,//; s/,$//')
		fi
		;;
	*) echo "powercut: unknown target $t" >&2; exit 2 ;;
	esac
done
IFS=, read -r -a target_list <<<"$targets"
vm_prepare || exit 1

work=$(mktemp -d "$VM_WORK/powercut.XXXXXX")
cleanup() {
	local p
	for p in ${nbd_pids:-}; do kill -KILL "$p" 2>/dev/null || true; done
	if [ -n "${POWERCUT_KEEP:-}" ]; then
		mkdir -p "$POWERCUT_KEEP" && cp -a "$work"/. "$POWERCUT_KEEP"/ && echo "powercut: kept $POWERCUT_KEEP"
	fi
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tmp"

# The workload: 4 KiB writes (a fifth of them 512 bytes) over the whole
# 16 MiB backing device, an fsync after every 8, and discards among them.
region=$((16 << 20))
discard_pct=${POWERCUT_DISCARD_PCT:-5}
trimzero=
if [ "$discard_pct" != 0 ]; then
	# The trim-to-zero filter, built here: one small C file, always current.
	[ -f /usr/include/nbdkit-filter.h ] || skip_or_fail "nbdkit-plugin-dev not installed (POWERCUT_DISCARD_PCT=0 runs without discards)"
	trimzero=$work/nbdkit-trimzero-filter.so
	cc -std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -fPIC -shared -o "$trimzero" "$here/nbdkit-trimzero-filter.c" ||
		{ echo "powercut: the trim-to-zero filter did not build"; exit 1; }
	# qemu passes the guest's discards on only with discard=unmap.
	export VM_DRIVE_OPTS_vda=discard=unmap VM_DRIVE_OPTS_vdb=discard=unmap
fi
cache_bytes=$((${POWERCUT_CACHE_MB:-6} << 20))
flush_every=8
partial=20
big_ops=10000000	# verify's --ops: any write issued in a boot is <= this
table_args=${POWERCUT_TABLE_ARGS:-2 writeback_threshold 100}
# mark-clean: the default table (writeback_threshold 0: no writeback but
# what the ring's wrap forces) and an fsync every 120 writes, 960 writes:
# eight nearly full segments, ~3.5 MiB of dirty blocks for wbreplay.
mc_ops=${POWERCUT_MC_OPS:-960}
mc_flush_every=120

# wbreplay for the guest (mark-clean), on a disk of its own: its libraries
# are wbctl's, which the initramfs has. The disk holds the size, then the
# program from 4 KiB on (wb_load_program in tests/vm/guest-lib.sh).
prog_disk=$work/wbreplay.disk
strip --strip-all -o "$work/wbreplay.bin" "$wbreplay"
vm_image "$prog_disk" $(( ($(stat -c %s "$work/wbreplay.bin") / 4096 + 2) * 4096 ))
stat -c %s "$work/wbreplay.bin" | dd of="$prog_disk" conv=notrunc status=none
dd if="$work/wbreplay.bin" of="$prog_disk" bs=4096 seek=1 conv=notrunc status=none

# Seeded draws: bash's RANDOM, reseeded once, drawn in a fixed order.
RANDOM=$seed
# Not in $(...): a subshell's draw would not advance the parent's RANDOM.
draw() { # draw VAR LO HI: VAR gets a number in [LO, HI]
	printf -v "$1" %d $(($2 + (RANDOM * 32768 + RANDOM) % ($3 - $2 + 1)))
}

nbd_pids=
nbd_start() { # nbd_start NAME IMAGE: nbdkit with a write-back cache; sets nbd_pid
	local name=$1 img=$2 logf=() logp=() tzf=()
	rm -f "$work/$name.sock"
	if [ "${POWERCUT_NBD_LOG:-0}" = 1 ]; then
		logf=(--filter=log)
		logp=("logfile=$work/$name.nbd.log")
	fi
	[ -z "$trimzero" ] || tzf=(--filter="$trimzero")
	TMPDIR=$work/tmp nice -n 5 nbdkit -f -U "$work/$name.sock" "${logf[@]}" "${tzf[@]}" --filter=cache \
		file "$img" cache=writeback cache-min-block-size=4096 "${logp[@]}" >>"$work/$name.nbdkit.out" 2>&1 &
	nbd_pid=$!
	nbd_pids="$nbd_pids $nbd_pid"
	for _ in $(seq 100); do
		[ -S "$work/$name.sock" ] && return 0
		sleep 0.1
	done
	echo "powercut: nbdkit for $name did not start: $(cat "$work/$name.nbdkit.out")" >&2
	return 1
}

# The log's complete lines (a line the kill cut short is not one), no CR.
complete_lines() {
	local f=$1
	if [ -s "$f" ] && [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" != '\n' ]; then
		tr -d '\r' <"$f" | sed '$d'
	else
		tr -d '\r' <"$f"
	fi
}
log_acked() { # the newest fsync the guest acknowledged on the console
	complete_lines "$1" | sed -n 's/^WB: acked_flush=\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n 1
}
# grep >/dev/null, not grep -q: -q stops at the first match, the writer
# dies of SIGPIPE, and under pipefail the match reads as a failure.
log_has() { complete_lines "$1" | grep -- "^$2\$" >/dev/null; }
log_value() { complete_lines "$1" | sed -n "s/^WB: $2=//p" | tail -n 1; }

has_magic() { # has_magic IMAGE: sector 0 holds the writeboost magic
	[ "$(od -An -tx1 -N4 "$1" | tr -d ' ')" = 74734257 ]
}

# Totals per target and mode, and over everything.
fail=0
upstream_finding=
summary=()

# run_series TARGET MODE
run_series() {
	local target=$1 mode=$2
	local cuts=${POWERCUT_CUTS:-}
	if [ -z "$cuts" ]; then
		if [ "$full" = 1 ]; then
			case $mode in stamped) cuts=12 ;; *) cuts=6 ;; esac
		else
			cuts=6
		fi
	fi
	local dir=$work/$target-$mode
	mkdir -p "$dir"
	local B=$dir/backing.img C=$dir/cache.img
	vm_image "$B" "$region"
	vm_image "$C" "$cache_bytes"
	local -A n_mode=() est_ms=([detach]=${POWERCUT_DETACH_MS:-1000} [mark-clean]=${POWERCUT_MARKCLEAN_MS:-600}) n_est=([detach]=1 [mark-clean]=1)

	local n_cuts=0 k_checked=0 k_lost=0 o_checked=0 o_lost=0 o_discarded=0 late=0 lost_cuts=
	local prev_seed="" prev_acked=0 boot
	for boot in $(seq 1 $((cuts + 1))); do
		local last=0
		[ "$boot" -le "$cuts" ] || last=1
		local wseed=$((seed * 1000 + boot))
		local dpct=$discard_pct
		[ "$target" != upstream ] || dpct=0
		local wl="--seed $wseed --size $region --partial-pct $partial --ops $big_ops --discard-pct $dpct"
		local pwl="--seed ${prev_seed:-0} --size $region --partial-pct $partial --ops $big_ops --discard-pct $dpct"
		# mixed: the modes in turn, on one pair of images.
		local bmode=$mode modes3=(stamped detach mark-clean)
		[ "$mode" != mixed ] || bmode=${modes3[$(((boot - 1) % 3))]}
		local fe=$flush_every targs=$table_args
		[ "$bmode" != mark-clean ] || { fe=$mc_flush_every; targs=; }
		# The draws of this cut, all made whether used or not.
		local ack_at delay pre
		draw ack_at 100 6000
		draw delay 0 1500
		draw pre 1 3
		# wbctl and wbreplay: the 1st, 3rd, ... cut of the mode comes at a
		# drawn moment within est, the tool's duration (the mean of those
		# measured so far in this series; a guess before the first), while
		# it runs; the 2nd, 4th, ... 0 to 0.5 s after the tool's last line
		# reached the console (a flush the tool left out still loses data
		# then: nothing else flushes that disk).
		local frac after_tool=0
		draw frac 0 1000
		if [ "$bmode" != stamped ]; then
			if [ $((${n_mode[$bmode]:-0} % 2)) = 0 ]; then
				delay=$((frac * ${est_ms[$bmode]} / 1000))
			else
				after_tool=1
				delay=$((frac / 2))
			fi
		fi
		local guest=$dir/guest-$boot.sh
		cat >"$guest" <<GUEST
. /lib/wbguest.sh
wb_load_target $target
B=/dev/vda
C=/dev/vdb
[ $boot != 1 ] || wb_zero_cache \$C
wb_dm_create wb "0 \$(wb_sectors \$B) writeboost \$B \$C $targs"
wb_report start_status "\$(wb_dm_status wb)"
if [ -n "$prev_seed" ]; then
	rc=0
	\$WBSTAMP verify /dev/mapper/wb $pwl --flushed $prev_acked --base-any >/tmp/v 2>&1 || rc=\$?
	sed 's/^/kverify: /' /tmp/v | head -n 20
	wb_report kverify_rc \$rc
	wb_report kverify_lost "\$(sed -n 's/^verify_lost_writes=//p' /tmp/v)"
fi
if [ $last = 1 ]; then
	\$DMSETUP remove wb || wb_fail "remove wb failed"
	wb_report finished 1
	exit 0
fi
t0=\$(cut -d' ' -f1 /proc/uptime)
secs() { awk -v a=\$t0 -v b=\$(cut -d' ' -f1 /proc/uptime) 'BEGIN { printf "%.2f", b - a }'; }
case $bmode in
stamped)
	( while sleep 3; do \$DMSETUP message wb 0 drop_caches >/dev/null 2>&1; done ) &
	wb_report cut_armed 1
	\$WBSTAMP write /dev/mapper/wb $wl --flush-every $fe --report-flushes
	;;
detach)
	\$WBSTAMP write /dev/mapper/wb $wl --flush-every $fe --report-flushes &
	sleep $pre
	t0=\$(cut -d' ' -f1 /proc/uptime)
	wb_report cut_armed 1
	rc=0
	/usr/local/bin/wbctl detach wb >/tmp/ctl 2>&1 || rc=\$?
	wb_report ctl_done "\$rc after \$(secs) s"
	sed 's/^/wbctl: /' /tmp/ctl
	wait
	;;
mark-clean)
	wb_load_program /dev/vdc /tmp/wbreplay
	\$WBSTAMP write /dev/mapper/wb $wl --ops $mc_ops --flush-every $fe --final-flush --report-flushes >/tmp/w 2>&1 ||
		{ cat /tmp/w; wb_fail "workload failed"; }
	grep '^WB: acked_flush=$mc_ops\$' /tmp/w
	wb_report dirty_before "\$(wb_status_field 7)"
	\$DMSETUP remove wb || wb_fail "remove wb failed"
	t0=\$(cut -d' ' -f1 /proc/uptime)
	wb_report cut_armed 1
	rc=0
	/tmp/wbreplay --mark-clean --cache \$C --backing \$B >/tmp/r 2>&1 || rc=\$?
	wb_report markclean_done "\$rc after \$(secs) s"
	sed 's/^/wbreplay: /' /tmp/r | tail -n 5
	;;
esac
wb_report workload_end 1
sleep 600
GUEST
		local log=$dir/boot-$boot.log
		rm -f "$log"
		if [ "$last" = 1 ]; then
			# The last kernel check: plain image files, a clean end.
			local rc=0
			VM_LOG_NEXT=$log VM_TIMEOUT=${POWERCUT_VM_TIMEOUT:-600} vm_run "$guest" "$B" "$C" "$prog_disk" || rc=$?
			if [ "$rc" != 0 ]; then
				echo "powercut: $target/$mode: the last check's boot failed (rc $rc): $(vm_result fail "$log") (log kept below)"
				tail -n 30 "$log" | tr -d '\r'
				fail=1
				POWERCUT_KEEP=${POWERCUT_KEEP:-$VM_WORK/powercut-failed.$$}
			fi
		else
			nbd_start "b$boot" "$B" || { fail=1; return; }
			local pb=$nbd_pid
			nbd_start "c$boot" "$C" || { fail=1; return; }
			local pc=$nbd_pid
			rm -f "$dir/qemu.pid"
			(
				VM_LOG_NEXT=$log VM_TIMEOUT=${POWERCUT_VM_TIMEOUT:-600} VM_QEMU_ARGS="-pidfile $dir/qemu.pid" \
					vm_run "$guest" "nbd+unix:///?socket=$work/b$boot.sock" "nbd+unix:///?socket=$work/c$boot.sock" "$prog_disk"
			) >"$dir/vm_run-$boot.out" 2>&1 &
			local vpid=$! started=$SECONDS state=boot why=""
			# Wait for the moment of the cut.
			while :; do
				sleep 0.2
				if ! kill -0 "$vpid" 2>/dev/null; then why="the guest ended before the cut"; break; fi
				[ -f "$log" ] || continue
				case $state in
				boot)
					if log_has "$log" "WB: cut_armed=1"; then
						state=armed
						[ "$bmode" = stamped ] || [ "$after_tool" = 1 ] || break
					fi
					if complete_lines "$log" | grep '^WB: fail=' >/dev/null; then why="the guest failed"; break; fi
					;;
				armed)
					if [ "$after_tool" = 1 ]; then
						complete_lines "$log" | grep -E '^WB: (ctl_done|markclean_done)=' >/dev/null && break
					else
						local a
						a=$(log_acked "$log")
						[ -n "$a" ] && [ "$a" -ge "$ack_at" ] && break
						# The stamped workload has no end of its own: it failed.
						if log_has "$log" "WB: workload_end=1"; then why="the workload stopped before the cut"; break; fi
					fi
					;;
				esac
				if [ $((SECONDS - started)) -gt "${POWERCUT_VM_TIMEOUT:-600}" ]; then why="no cut point within the time limit"; break; fi
			done
			if [ -z "$why" ]; then
				sleep "$((delay / 1000)).$(printf %03d $((delay % 1000)))"
			fi
			# The power cut: both disks' caches and the machine at once.
			local qpid
			qpid=$(cat "$dir/qemu.pid" 2>/dev/null || true)
			kill -KILL "$pb" "$pc" ${qpid:+"$qpid"} 2>/dev/null || true
			wait "$vpid" 2>/dev/null || true
			wait "$pb" "$pc" 2>/dev/null || true
			nbd_pids=
			if [ -n "$why" ]; then
				echo "powercut: $target/$mode cut $boot: $why (log: $log)"
				complete_lines "$log" | grep -E '^WB: fail=|wbstamp:|^wbctl:' | head -n 10
				fail=1
				POWERCUT_KEEP=${POWERCUT_KEEP:-$VM_WORK/powercut-failed.$$}
				return
			fi
		fi
		# The kernel's check of the previous cut, from this boot's log.
		if [ -n "$prev_seed" ]; then
			local krc klost
			krc=$(log_value "$log" kverify_rc)
			klost=$(log_value "$log" kverify_lost)
			k_checked=$((k_checked + prev_acked))
			if [ "$krc" != 0 ]; then
				echo "powercut: $target/$mode cut $((boot - 1)): kernel replay lost ${klost:-?} of $prev_acked acknowledged writes (verify rc ${krc:-none}; log $log)"
				complete_lines "$log" | grep '^kverify: ' | head -n 5
				k_lost=$((k_lost + ${klost:-1}))
				lost_cuts="$lost_cuts k$((boot - 1))"
				if [ -d "$dir/state-$((boot - 1))" ]; then
					echo "  the state the cut left: $dir/state-$((boot - 1))/"
				else
					echo "  the state the cut left: $dir/cut-$((boot - 1))/"
				fi
			else
				rm -rf "$dir/cut-$((boot - 1))"
			fi
		fi
		if tr -d '\r' <"$log" | grep -E "$VM_FAIL_PATTERNS" >/dev/null; then
			echo "powercut: $target/$mode boot $boot: the kernel reported a problem (log $log):"
			tr -d '\r' <"$log" | grep -E -m 5 "$VM_FAIL_PATTERNS"
			fail=1
			POWERCUT_KEEP=${POWERCUT_KEEP:-$VM_WORK/powercut-failed.$$}
		fi
		[ "$last" = 0 ] || break
		# This cut: what the console acknowledged before it.
		local acked
		acked=$(log_acked "$log")
		acked=${acked:-0}
		n_cuts=$((n_cuts + 1))
		local info=""
		n_mode[$bmode]=$((${n_mode[$bmode]:-0} + 1))
		# A late cut: the tool (wbctl, wbreplay) had finished before it.
		local took
		took=$(complete_lines "$log" | sed -n 's/^WB: \(ctl_done\|markclean_done\)=[0-9]* after \([0-9.]*\) s$/\2/p' | tail -n 1)
		if [ -n "$took" ]; then
			late=$((late + 1))
			took=$(awk -v t="$took" 'BEGIN { printf "%d", t * 1000 }')
			est_ms[$bmode]=$(( (${est_ms[$bmode]} * ${n_est[$bmode]} + took) / (${n_est[$bmode]} + 1) ))
			n_est[$bmode]=$((${n_est[$bmode]} + 1))
		fi
		local done_msg
		case $bmode in
		detach)
			done_msg=$(log_value "$log" ctl_done)
			info=", wbctl detach: ${done_msg:-running at the cut}"
			;;
		mark-clean)
			done_msg=$(log_value "$log" markclean_done)
			info=", $(log_value "$log" dirty_before) dirty blocks, wbreplay --mark-clean: ${done_msg:-running at the cut}"
			;;
		esac
		# The offline check: wbreplay onto copies, then verify.
		# The state the cut left, kept until both checks passed on it.
		mkdir -p "$dir/cut-$boot"
		cp --sparse=always "$B" "$dir/cut-$boot/backing.img"
		cp --sparse=always "$C" "$dir/cut-$boot/cache.img"
		cp --sparse=always "$B" "$dir/off-backing.img"
		cp --sparse=always "$C" "$dir/off-cache.img"
		local orc=0 ovrc=0 olost=0 how=backing-alone
		if has_magic "$dir/off-cache.img"; then
			how=wbreplay
			"$wbreplay" --cache "$dir/off-cache.img" --backing "$dir/off-backing.img" >"$dir/wbreplay-$boot.out" 2>&1 || orc=$?
		fi
		"$VM_WBSTAMP" verify "$dir/off-backing.img" $wl --flushed "$acked" --base-any >"$dir/verify-$boot.out" 2>&1 || ovrc=$?
		olost=$(sed -n 's/^verify_lost_writes=//p' "$dir/verify-$boot.out")
		o_checked=$((o_checked + acked))
		# Sectors whose newest acknowledged op was a discard, read as zeros.
		local odisc
		odisc=$(sed -n 's/^verify_discarded=//p' "$dir/verify-$boot.out")
		o_discarded=$((o_discarded + ${odisc:-0}))
		if [ "$how" = wbreplay ]; then
			local lf lw
			lf=$(sed -n 's/.*last_flushed_id \([0-9]*\), last_writeback_id \([0-9]*\).*/\1/p' "$dir/wbreplay-$boot.out")
			lw=$(sed -n 's/.*last_flushed_id \([0-9]*\), last_writeback_id \([0-9]*\).*/\2/p' "$dir/wbreplay-$boot.out")
			local clean=
			if [ -n "$lf" ] && [ "$lf" = "$lw" ]; then clean=", clean"; fi
			how="$how (log ${lw:-?}..${lf:-?}$clean)"
		fi
		echo "powercut: $target/$mode cut $boot ($bmode): acked $acked (drawn: at $ack_at, +${delay} ms), offline $how rc $orc lost ${olost:-?}, ${odisc:-?} discarded sectors$info"
		if [ "$orc" != 0 ] || [ "$ovrc" != 0 ]; then
			[ "$orc" = 0 ] || { echo "  wbreplay exited $orc:"; tail -n 5 "$dir/wbreplay-$boot.out" | sed 's/^/  /'; }
			[ "$ovrc" = 0 ] || { echo "  offline replay lost ${olost:-?} of $acked acknowledged writes:"; head -n 5 "$dir/verify-$boot.out" | sed 's/^/  /'; }
			o_lost=$((o_lost + ${olost:-0}))
			lost_cuts="$lost_cuts o$boot"
			# Kept for wbdump, and the kernel's check leaves it be.
			mv "$dir/cut-$boot" "$dir/state-$boot"
			echo "  the state the cut left: $dir/state-$boot/"
		fi
		rm -f "$dir/off-backing.img" "$dir/off-cache.img"
		prev_seed=$wseed
		prev_acked=$acked
	done
	local per="" m
	for m in stamped detach mark-clean; do [ -z "${n_mode[$m]:-}" ] || per="$per $m=${n_mode[$m]}"; done
	local line="$target $mode: cuts=$n_cuts ($per ) late_cuts=$late acked_checked kernel=$k_checked offline=$o_checked discarded_sectors_checked offline=$o_discarded lost kernel=$k_lost offline=$o_lost"
	summary+=("$line")
	if [ -n "$lost_cuts" ]; then
		# Upstream's findings too: the states are worth a look.
		POWERCUT_KEEP=${POWERCUT_KEEP:-$VM_WORK/powercut-failed.$$}
		if [ "$target" = upstream ] && [[ ",$targets," == *,wbkit,* ]]; then
			upstream_finding="$upstream_finding; $line (cuts:$lost_cuts)"
		else
			fail=1
			POWERCUT_KEEP=${POWERCUT_KEEP:-$VM_WORK/powercut-failed.$$}
		fi
	fi
}

t0=$SECONDS
IFS=, read -r -a mode_list <<<"$modes"
for t in "${target_list[@]}"; do
	for m in "${mode_list[@]}"; do
		case $m in stamped | detach | mark-clean | mixed) ;; *) echo "powercut: unknown mode $m" >&2; exit 2 ;; esac
		run_series "$t" "$m"
	done
done
for s in "${summary[@]}"; do echo "powercut: $s"; done
[ -z "$upstream_finding" ] || echo "powercut: upstream's finding (reported, not failed on)${upstream_finding}"
echo "powercut: seed $seed, $((SECONDS - t0)) s; $( [ $fail = 0 ] && echo "nothing acknowledged was lost" || echo FAILED)"
exit $fail
