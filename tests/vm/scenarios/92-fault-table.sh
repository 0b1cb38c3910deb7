#!/usr/bin/env bash
# shows: every row of the fault table that dm-error slices, dm-flakey and
#   dm-delay can isolate, upstream's module first (its results shown beside, its
#   boot ends where its device can no longer be removed); then a long
#   `drop_caches` over a dm-delay backing device gives way to a suspend within a
#   second (100 ms per I/O) and to SIGKILL, and says what is left
#
# The fault table (kmod/README.md, dm-wbkit(4) FAULTS): every row that a
# dm-error slice, dm-flakey or dm-delay can drive on its own, upstream's
# module first (reported), then dm-wbkit (required). A read of data the
# cache does not hold fails that bio alone; a clean copy the cache device
# cannot read is read from the backing device; an error that puts what the
# cache holds at risk makes the target dead, frozen and removable.
#
# Rows (the one bad block is backing sectors 8000-8007, block 1000):
#   miss           a read miss of the bad block (the new user's test: 64
#                  dirty blocks fsynced elsewhere first; they read back and
#                  reach the backing device with drop_caches)
#   partial        a 4 KiB read of the bad block whose sector 8001 is dirty
#                  in the cache: fails; the cached sector alone reads
#   staging        the same miss with read caching on (read_cache_threshold
#                  1): fails, and nothing of it is injected into the cache
#   write_around   a write of the bad block in write_around_mode 1: fails
#   clean          a clean copy (written back, replayed after a restart)
#                  whose cache block fails: served from the backing device
#   replay_retry   the replay read of that block fails at the first resume:
#                  the resume fails, the target stays alive, and a resume
#                  once the device reads again replays and goes live
#   dirty          a dirty copy whose cache block fails: dead (cache read)
#   wb_read        the same copy read by writeback (drop_caches): dead
#   seg_write      the data of slot 1 fails writes: dead (cache write)
#   hdr_zero       the header of slot 1 fails writes: dm-wbkit zeroes it
#                  ahead, with segment 1: dead (cache write)
#   sb_record      the superblock record's block fails writes: dead
#   wb_write       the backing device fails writes (dm-flakey
#                  error_writes): drop_caches kills (backing write)
#   slow           both devices behind dm-delay: slow is never an error
# Then, dm-wbkit alone (upstream blocks past 240 s with hung-task reports
# in the same test, issue 39): a long drop_caches over a dm-delay backing
# device gives way to a suspend (within a second at 100 ms per I/O; the
# time at 1.5 s per I/O is reported: the batch already submitted is
# waited for) and to a signal, and says in the kernel log what is left.
# Cache flush and backing flush errors: 40-wbkit-failstop.sh (a whole
# device that fails everything; a flush cannot fail alone under dm-flakey).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=900

make_devices backing 64M cache 16M

# The guest script, for W=upstream or W=wbkit: one boot each, since a row
# can leave upstream's device stuck (see bounded).
guest_script() {
	echo "W=$1"
	cat <<'GUEST'
if [ "$W" = upstream ]; then wb_load_target upstream; else wb_load_target wbkit; fi
T=writeboost
LB=$(wb_sectors /dev/vda)
LC=$(wb_sectors /dev/vdb)
dev=/dev/mapper/wb
BAD=8000
# Slot 0 (segment 1) starts at sector 2048, its data at 2056; slot 1 at 3072.
bad_backing="0 $BAD linear /dev/vda 0
$BAD 8 error
$((BAD + 8)) $((LB - BAD - 8)) linear /dev/vda $((BAD + 8))"
linear_backing="0 $LB linear /dev/vda 0"
linear_cache="0 $LC linear /dev/vdb 0"
# cache_hole <start> <len> [<cache length>]: the cache device with one failing slice.
cache_hole() {
	local end=${3:-$LC}
	echo "0 $1 linear /dev/vdb 0
$1 $2 error
$(($1 + $2)) $((end - $1 - $2)) linear /dev/vdb $(($1 + $2))"
}

# mk <target> <backing table> <cache table> [optargs]: a fresh cache. All
# of vdb (16 MiB) is zeroed: a cache table shorter than vdb (hdr_zero) has
# its last MiB in the middle of vdb, and dm-wbkit formats only a device
# whose first and last MiB are zero.
mk() {
	$DD if=/dev/zero of=/dev/vdb bs=1M count=$((LC / 2048)) oflag=direct status=none || wb_fail "cannot zero /dev/vdb"
	wb_dm_create backd "$2"
	wb_dm_create cached "$3"
	wb_dm_create wb "0 $LB $1 /dev/mapper/backd /dev/mapper/cached ${4:-}"
}
# again <target> [optargs]: the same devices, the target created again (replay).
# Reports create=failed and returns 1 when the target refuses (upstream
# reads whole segments at replay, so it refuses a cache block it cannot read).
again() {
	if $DMSETUP create wb --table "0 $LB $1 /dev/mapper/backd /dev/mapper/cached ${2:-}" 2>/dev/null; then
		$DMSETUP mknodes wb
		return 0
	fi
	$DMSETUP remove wb 2>/dev/null
	r create failed
	return 1
}
# r <key> <value>: one result of this module and row.
r() { wb_report "${W}_${ROW}_$1" "$2"; }
# bounded <key> <cmd...>: runs cmd and returns its status; when it has not
# returned after 40 s (upstream retries a failed cache write for ever), it
# reports <key>=hang and ends this boot's rows: the device can no longer be
# torn down.
bounded() {
	local key=$1 i=0
	shift
	"$@" &
	local pid=$!
	while kill -0 $pid 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 40 ]; then
			r "$key" hang
			wb_report "${W}_stopped_at" "$ROW"
			exit 0
		fi
		sleep 1
	done
	wait $pid
}
teardown() {
	bounded remove $DMSETUP remove wb 2>/dev/null || r remove failed
	$DMSETUP remove backd cached || wb_fail "cannot remove the underlying mappings"
}
# blk <block>: one direct 4 KiB read of the target (to stdout).
blk() { timeout 30 $DD if=$dev bs=4k count=1 skip="$1" iflag=direct 2>/dev/null; }
put() { # put <block> <byte>: one 4 KiB write of that byte, fsynced
	$DD if=/dev/zero bs=4k count=1 2>/dev/null | tr '\0' "$2" |
		timeout 30 $DD of=$dev bs=4k count=1 seek="$1" oflag=direct conv=fsync,notrunc 2>/dev/null
}
want() { $DD if=/dev/zero bs=4k count=1 2>/dev/null | tr '\0' "$1" | wb_digest; }
# live: a miss elsewhere reads and a new write is taken and fsynced.
live() {
	blk 12000 >/dev/null && put 12001 L && [ "$(blk 12001 | wb_digest)" = "$(want L)" ] &&
		echo yes || echo no
}
# state: "dead" or "live" for dm-wbkit (the status line says), what a
# probe finds for upstream (its status has no dead state).
state() {
	if [ "$W" = wbkit ]; then
		case "$(wb_dm_status wb)" in *" dead 1 "*) echo dead ;; *" dead 0 "*) echo live ;; *) echo unknown ;; esac
	elif [ "$(live)" = yes ]; then echo live; else echo dead; fi
}
counts() { [ "$W" = wbkit ] && r counts "$($DMSETUP message wb 0 error_counts | tr ' ' ,)"; true; }
cause() { [ "$W" = wbkit ] && r cause "$($DMSETUP message wb 0 dead_cause | tr ' ' ,)"; true; }
vda_blk() { $DD if=/dev/vda bs=4k count=1 skip="$1" iflag=direct 2>/dev/null | wb_digest; }
# written_back <seconds> <state key>: the end of a row whose stamped writes
# must reach the backing device: drop_caches (within <seconds>), the state
# after it, the error counts, teardown, then the writes read from /dev/vda
# alone (home).
written_back() {
	timeout "$1" $DMSETUP message wb 0 drop_caches && r drop yes || r drop no
	r "$2" "$(state)"
	counts
	teardown
	$WBSTAMP verify /dev/vda $STAMP --flushed 64 --base-any >/dev/null 2>&1 && r home yes || r home no
}

rows() {
	STAMP="--seed 39 --offset 16M --size 256K --ops 64"

	ROW=miss
	mk $T "$bad_backing" "$linear_cache"
	$WBSTAMP write $dev $STAMP --flush-every 64 >/dev/null 2>&1 || r stamp failed
	blk 1000 >/dev/null && r eio no || r eio yes
	r state "$(state)"
	$WBSTAMP verify $dev $STAMP --flushed 64 --base-any >/dev/null 2>&1 && r dirty_reads yes || r dirty_reads no
	r live "$(live)"
	written_back 120 state_after

	ROW=partial
	mk $T "$bad_backing" "$linear_cache"
	$DD if=/dev/zero bs=512 count=1 2>/dev/null | tr '\0' P | timeout 30 $DD of=$dev bs=512 count=1 seek=$((BAD + 1)) oflag=direct conv=fsync,notrunc 2>/dev/null || r write failed
	blk 1000 >/dev/null && r eio no || r eio yes
	[ "$(timeout 30 $DD if=$dev bs=512 count=1 skip=$((BAD + 1)) iflag=direct 2>/dev/null | tr -d P | wc -c)" = 0 ] && r sector yes || r sector no
	r state "$(state)"
	r live "$(live)"
	counts
	# The disk reallocates a pending sector on a write: writeback works.
	wb_swap_table backd "$linear_backing"
	timeout 120 $DMSETUP message wb 0 drop_caches && r drop yes || r drop no
	teardown
	[ "$($DD if=/dev/vda bs=512 count=1 skip=$((BAD + 1)) iflag=direct 2>/dev/null | tr -d P | wc -c)" = 0 ] && r home yes || r home no

	ROW=staging
	mk $T "$bad_backing" "$linear_cache" "2 read_cache_threshold 1"
	blk 1000 >/dev/null && r eio no || r eio yes
	blk 1000 >/dev/null && r eio2 no || r eio2 yes
	r state "$(state)"
	wb_swap_table backd "$linear_backing"
	for i in 1 2 3; do b=$(blk 1000 | wb_digest); done
	[ "$b" = "$(vda_blk 1000)" ] && r reads_after yes || r reads_after no
	r live "$(live)"
	counts
	teardown

	ROW=write_around
	mk $T "$bad_backing" "$linear_cache" "2 write_around_mode 1"
	put 1000 W && r eio no || r eio yes
	r state "$(state)"
	r live "$(live)"
	counts
	teardown

	# The superblock record says the copy was written back, so that the
	# replay knows it clean; replayed, it is on the cache device alone.
	ROW=clean
	mk $T "$linear_backing" "$linear_cache" "2 update_sb_record_interval 1"
	put 5000 C || r write failed
	timeout 120 $DMSETUP message wb 0 drop_caches || r drop failed
	sleep 3
	$DMSETUP remove wb
	again $T "2 update_sb_record_interval 1" || wb_fail "$W $ROW: create failed"
	wb_swap_table cached "$(cache_hole 2056 8)"
	if true; then
		b=$(blk 5000 | wb_digest)
		[ "$b" = "$(want C)" ] && r reads yes || r reads "no:${b:-eio}"
		b=$(blk 5000 | wb_digest)
		[ "$b" = "$(want C)" ] && r reads2 yes || r reads2 "no:${b:-eio}"
		r state "$(state)"
		counts
		teardown
	else
		$DMSETUP remove backd cached
	fi

	for ROW in replay dirty wb_read; do
		mk $T "$linear_backing" "$linear_cache"
		put 5000 D || r write failed
		$DMSETUP remove wb
		if [ $ROW != replay ]; then
			again $T || wb_fail "$W $ROW: create failed"
		fi
		wb_swap_table cached "$(cache_hole 2056 8)"
		if [ $ROW = replay ]; then
			again $T && r refused no || r refused yes
			$DMSETUP remove wb 2>/dev/null
		else
			if [ $ROW = dirty ]; then
				blk 5000 >/dev/null && r eio no || r eio yes
			else
				bounded drop_fails $DMSETUP message wb 0 drop_caches && r drop_fails no || r drop_fails yes
			fi
			r state "$(state)"
			cause
			counts
			timeout 60 $DMSETUP remove wb && r removed yes || r removed no
		fi
		# Nothing was lost: the block reads again once the cache device does.
		wb_swap_table cached "$linear_cache"
		again $T || wb_fail "$W $ROW: the target refuses the cache device after the fault"
		[ "$(blk 5000 | wb_digest)" = "$(want D)" ] && r kept yes || r kept no
		timeout 120 $DMSETUP message wb 0 drop_caches || r drop2 failed
		teardown
		[ "$(vda_blk 5000)" = "$(want D)" ] && r home yes || r home no
	done

	# The first resume's replay read fails (the same hole): that resume
	# fails and writes nothing; once the cache device reads again, a plain
	# resume of the same device replays and goes live (upstream replays in
	# its constructor: its load fails, and a second load is its retry).
	ROW=replay_retry
	mk $T "$linear_backing" "$linear_cache"
	put 5000 E || r write failed
	$DMSETUP remove wb
	wb_swap_table cached "$(cache_hole 2056 8)"
	$DMSETUP create wb --notable || wb_fail "$W $ROW: create --notable"
	tbl="0 $LB $T /dev/mapper/backd /dev/mapper/cached"
	if $DMSETUP load wb --table "$tbl" 2>/dev/null; then
		$DMSETUP resume wb 2>/dev/null && r first_resume ok || r first_resume failed
	else
		r first_resume load_failed
	fi
	wb_swap_table cached "$linear_cache"
	if ! $DMSETUP table wb 2>/dev/null | grep -q .; then
		$DMSETUP load wb --table "$tbl" 2>/dev/null || r retry load_failed
	fi
	$DMSETUP resume wb 2>/dev/null && r retry ok || r retry failed
	$DMSETUP mknodes wb
	r state "$(state)"
	[ "$(blk 5000 | wb_digest)" = "$(want E)" ] && r kept yes || r kept no
	counts
	timeout 120 $DMSETUP message wb 0 drop_caches || r drop2 failed
	teardown
	[ "$(vda_blk 5000)" = "$(want E)" ] && r home yes || r home no

	ROW=slow
	mk $T "0 $LB delay /dev/vda 0 40" "0 $LC delay /dev/vdb 0 20"
	$WBSTAMP write $dev $STAMP --flush-every 16 >/dev/null 2>&1 && r writes yes || r writes no
	written_back 300 state

	ROW=wb_write
	mk $T "$linear_backing" "$linear_cache"
	put 5000 B || r write failed
	wb_swap_table backd "0 $LB flakey /dev/vda 0 0 60 1 error_writes"
	bounded drop_fails $DMSETUP message wb 0 drop_caches && r drop_fails no || r drop_fails yes
	r state "$(state)"
	cause
	counts
	teardown


	ROW=sb_record
	mk $T "$linear_backing" "$linear_cache" "2 update_sb_record_interval 1"
	put 5000 S || r write failed
	# The record is written every second, changed or not: dead from here.
	wb_swap_table cached "$(cache_hole 2040 8)"
	bounded drop $DMSETUP message wb 0 drop_caches
	sleep 3
	r state "$(state)"
	cause
	counts
	teardown

	# Slot 1 of the ring fails writes from the start: segment 2 dies there.
	ROW=seg_write
	mk $T "$linear_backing" "$linear_cache"
	wb_swap_table cached "$(cache_hole 3072 1024)"
	bounded writes_fail $WBSTAMP write $dev --seed 40 --size 8M --ops 400 --flush-every 50 >/dev/null 2>&1 &&
		r writes_fail no || r writes_fail yes
	r state "$(state)"
	cause
	counts
	teardown

	# A ring of 4 slots after its first lap: slot 1's header fails. dm-wbkit
	# zeroes a header ahead of reusing its slot, upstream overwrites it.
	ROW=hdr_zero
	SMALL=$((2048 + 4 * 1024))
	mk $T "$linear_backing" "0 $SMALL linear /dev/vdb 0"
	$WBSTAMP write $dev --seed 40 --size 8M --ops 300 --flush-every 50 >/dev/null 2>&1 || r stamp failed
	wb_swap_table cached "$(cache_hole 3072 8 $SMALL)"
	bounded writes_fail $WBSTAMP write $dev --seed 40 --size 8M --first 301 --ops 1200 --flush-every 50 >/dev/null 2>&1 &&
		r writes_fail no || r writes_fail yes
	r state "$(state)"
	cause
	counts
	teardown

}

rows
[ "$W" = wbkit ] || exit 0

# --- dm-wbkit alone: a long drop_caches gives way to suspend and signals ---
# suspend_during_drop <delay ms> <s>: suspends <s> seconds into a drop_caches
# of 16 segments (one per batch); reports the time the suspend took (1/100 s).
suspend_during_drop() {
	mk $T "0 $LB delay /dev/vda 0 $1" "$linear_cache" "4 writeback_threshold 0 nr_max_batched_writeback 1"
	$WBSTAMP write $dev --seed 42 --size 32M --ops 2048 --flush-every 2048 >/dev/null 2>&1 || r stamp failed
	dmesg -c >/dev/null
	( if $DMSETUP message wb 0 drop_caches 2>/dev/null; then echo zero; else echo nonzero; fi >/tmp/drop.rc ) &
	sleep $2
	t0=$(cut -d' ' -f1 /proc/uptime | tr -d .)
	timeout 300 $DMSETUP suspend wb || r suspend failed
	t1=$(cut -d' ' -f1 /proc/uptime | tr -d .)
	wait
	r drop_rc "$(cat /tmp/drop.rc)"
	dmesg | grep -q "drop_caches stopped (the device is suspending): [0-9]* dirty blocks left" && r progress yes || r progress no
	r suspend_cs $((t1 - t0))
	$DMSETUP resume wb
}
ROW=suspend_100ms
suspend_during_drop 100 1
# A signal stops it too, the device live (SIGKILL: dmsetup blocks the
# others around its ioctl).
( if $DMSETUP message wb 0 drop_caches 2>/dev/null; then echo zero; else echo nonzero; fi >/tmp/drop.rc ) &
sleep 1
t0=$(cut -d' ' -f1 /proc/uptime | tr -d .)
kill -KILL $(pidof dmsetup) 2>/dev/null
wait
t1=$(cut -d' ' -f1 /proc/uptime | tr -d .)
ROW=signal_100ms
r rc "$(cat /tmp/drop.rc)"
r cs $((t1 - t0))
r state "$(state)"
wb_swap_table backd "$linear_backing"
timeout 300 $DMSETUP message wb 0 drop_caches && r drop yes || r drop no
teardown
$WBSTAMP verify /dev/vda --seed 42 --size 32M --ops 2048 --flushed 2048 --base-any >/dev/null 2>&1 && r home yes || r home no
ROW=suspend_1500ms
suspend_during_drop 1500 2
teardown
dmesg | grep -q "blocked for more than" && wb_report hung_task yes || wb_report hung_task no
GUEST
}

results=$work/results
: >"$results"
for who in upstream wbkit; do
	[ $who = wbkit ] || [ "$with_upstream" = 1 ] || continue
	fresh_devices	# each boot on devices of its own
	run_guest < <(guest_script $who)
	echo "fault table, $who: ${VM_ELAPSED}s"
	[ "$rc" = 0 ] || { echo "the $who boot failed (log: $VM_LOG)"; exit 1; }
	vm_results >>"$results"
done
# vm_result over both boots' results.
result() { sed -n "s/^$1=//p" "$results" | tail -n 1; }

fail=0
# expect <row> <key> <value>: required of dm-wbkit; upstream's shown beside.
expect() {
	local got up
	got=$(result "wbkit_$1_$2")
	up=$(result "upstream_$1_$2")
	if [ "$got" = "$3" ]; then
		printf '  %-13s %-12s dm-wbkit %-8s upstream %s\n' "$1" "$2" "$got" "${up:--}"
	else
		printf '  %-13s %-12s dm-wbkit %-8s upstream %s   FAIL: want %s\n' "$1" "$2" "${got:--}" "${up:--}" "$3"
		fail=1
	fi
}
# counter <row> <name> <min>: an error counter of dm-wbkit's reply.
counter() {
	local c v
	c=$(result "wbkit_$1_counts")
	v=$(echo "$c" | tr , '\n' | sed -n "/^$2\$/{n;p}")
	if [ -n "$v" ] && [ "$v" -ge "$3" ]; then
		printf '  %-13s %-12s %s\n' "$1" "$2" "$v"
	else
		printf '  %-13s %-12s %s   FAIL: want at least %s (%s)\n' "$1" "$2" "${v:--}" "$3" "$c"
		fail=1
	fi
}
echo "row           check        results"
expect miss eio yes; expect miss state live; expect miss dirty_reads yes
expect miss live yes; expect miss drop yes; expect miss state_after live; expect miss home yes
counter miss backing_read 1; counter miss failed_requests 1
expect partial eio yes; expect partial sector yes; expect partial state live
expect partial live yes; expect partial drop yes; expect partial home yes
counter partial backing_read 1
expect staging eio yes; expect staging eio2 yes; expect staging state live
expect staging reads_after yes; expect staging live yes
counter staging backing_read 2
expect write_around eio yes; expect write_around state live; expect write_around live yes
counter write_around backing_write 1
expect clean reads yes; expect clean reads2 yes; expect clean state live
counter clean cache_read 1; counter clean cache_read_fallback 1
for row in dirty wb_read; do
	expect $row state dead; expect $row removed yes; expect $row kept yes; expect $row home yes
	counter $row cache_read 1
done
expect replay refused yes; expect replay kept yes; expect replay home yes
expect replay_retry first_resume failed; expect replay_retry retry ok
expect replay_retry state live; expect replay_retry kept yes; expect replay_retry home yes
counter replay_retry cache_read 1
expect dirty eio yes; expect wb_read drop_fails yes
expect dirty cause cache,read,2056,-5; expect wb_read cause cache,read,2056,-5
for row in seg_write hdr_zero; do
	expect $row writes_fail yes; expect $row state dead; counter $row cache_write 1
done
# An append's first writes (data blocks, header past its first sector) go
# out together: the first to fail names the cause, anywhere in slot 1.
seg_cause=$(result wbkit_seg_write_cause)
IFS=, read -r c_dev c_op c_sector c_err <<<"$seg_cause"
if [ "$c_dev,$c_op,$c_err" = cache,write,-5 ] && [ "${c_sector:-0}" -ge 3072 ] 2>/dev/null && [ "$c_sector" -lt 4096 ]; then
	printf '  %-13s %-12s dm-wbkit %s (in slot 1)\n' seg_write cause "$seg_cause"
else
	printf '  %-13s %-12s dm-wbkit %s   FAIL: want a write into slot 1 (sectors 3072-4095)\n' seg_write cause "${seg_cause:--}"
	fail=1
fi
expect hdr_zero cause cache,write,3072,-5
expect sb_record state dead; expect sb_record cause cache,write,2040,-5; counter sb_record cache_write 1
expect wb_write drop_fails yes; expect wb_write state dead; counter wb_write backing_write 1
expect slow writes yes; expect slow drop yes; expect slow state live; expect slow home yes
expect slow counts backing_read,0,backing_write,0,backing_flush,0,cache_read,0,cache_write,0,cache_flush,0,cache_read_fallback,0,failed_requests,0,transient,0
expect wb_write cause backing,write,40000,-5
for row in miss partial staging write_around clean dirty wb_read seg_write hdr_zero sb_record wb_write slow; do
	[ -z "$(result "wbkit_${row}_remove")" ] || { echo "  $row: remove failed"; fail=1; }
	[ -z "$(result "wbkit_${row}_stamp")$(result "wbkit_${row}_write")" ] || { echo "  $row: the writes before the fault failed"; fail=1; }
done
# The bounds below are wall time in the guest: a sanitizer kernel's guest
# (scripts/test-vm-debug.sh) runs VM_TIMEOUT_SCALE times slower.
echo "drop_caches against suspend and signals (dm-wbkit; upstream blocks, see above):"
expect suspend_100ms drop_rc nonzero; expect suspend_100ms progress yes
cs=$(result wbkit_suspend_100ms_suspend_cs)
echo "  suspend during drop_caches, backing at 100 ms per I/O: ${cs:-?}0 ms"
[ -n "$cs" ] && [ "$cs" -lt $((100 * VM_TIMEOUT_SCALE)) ] || { echo "  FAIL: want the suspend within $VM_TIMEOUT_SCALE s"; fail=1; }
cs=$(result wbkit_suspend_1500ms_suspend_cs)
echo "  suspend during drop_caches, backing at 1.5 s per I/O: ${cs:-?}0 ms (the batch in flight finishes: two device round trips)"
[ -n "$cs" ] && [ "$cs" -lt $((500 * VM_TIMEOUT_SCALE)) ] || { echo "  FAIL: want the suspend within $((5 * VM_TIMEOUT_SCALE)) s"; fail=1; }
expect signal_100ms rc nonzero; expect signal_100ms state live; expect signal_100ms drop yes; expect signal_100ms home yes
cs=$(result wbkit_signal_100ms_cs)
echo "  SIGKILL to drop_caches: returned after ${cs:-?}0 ms"
[ -n "$cs" ] && [ "$cs" -lt $((100 * VM_TIMEOUT_SCALE)) ] || { echo "  FAIL: want drop_caches to return within $VM_TIMEOUT_SCALE s of the signal"; fail=1; }
[ "$(result hung_task)" = no ] || { echo "hung tasks reported: $(result hung_task)"; fail=1; }
stopped=$(result upstream_stopped_at)
[ -z "$stopped" ] || echo "upstream: its boot ended at row $stopped, where its device could no longer be torn down (later rows not run)"
exit $fail
