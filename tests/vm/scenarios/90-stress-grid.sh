#!/usr/bin/env bash
# shows: the seeded multi-threaded workload of `tests/vm/wbstress.c` over a
#   grid of 9 tables (every option at its edges and in combination, dm-delay
#   under the cache in some), with messages, `drop_caches` and suspend/resume
#   during I/O; every read checked online against a model, the whole device
#   after each remove and create; upstream first (its failures reported), `make
#   test-stress` for three seeds; `make test-stress-faults` adds a backing
#   region with failing reads (read through the target meanwhile: every EIO
#   counted, the target live) and dm-delay under the cache device
#
# Differential option-space stress: one seeded workload (tests/vm/wbstress.c:
# writes of 512 B to 64 KiB, whole and partial blocks, FUA and fsyncs, reads
# of fresh and old data, concurrent readers of a small hot set while its
# writers write) over a grid of tables that puts every option at its edges
# and in combination, some rows with dm-delay under the cache device to widen
# races. Meanwhile the guest changes tunables by message, sends drop_caches,
# and suspends and resumes the device. Every read is checked online against
# the model of what was written; after each run the device is removed and
# created again and read whole against the model.
#
# Upstream's dm-writeboost runs the same grid first, in the same boot: where
# it fails, the scenario reports upstream's defect and goes on; dm-wbkit
# must pass every row.
#
# Sized for make test by default: seed 1, rows 2, 4 and 9 (between them
# every option but writeback_threshold 100 at an edge), 600 operations per
# thread and run. make test-stress runs every row of three seeds with 1500:
# WBKIT_STRESS_SEEDS, WBKIT_STRESS_ROWS ("all" or numbers), WBKIT_STRESS_OPS;
# WBKIT_STRESS_UPSTREAM=0 skips upstream.
#
# WBKIT_STRESS_FAULTS=1 (make test-stress-faults) adds faults the target
# must ride out: a reader reads random blocks of the last 4 MiB of the
# backing device, which the workload never writes, through the target;
# half of them fail (a dm-error slice); and the cache device sits behind
# dm-delay (at least 2 ms). No acknowledged write may be lost, dm-wbkit
# must stay live, and every EIO the reader saw must be one the target
# counted (error_counts failed_requests, per instance).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
seeds=${WBKIT_STRESS_SEEDS:-1}
ops=${WBKIT_STRESS_OPS:-600}
rows=${WBKIT_STRESS_ROWS:-2 4 9}
[ "$rows" != all ] || rows=""
with_upstream=${WBKIT_STRESS_UPSTREAM:-1}
faults=${WBKIT_STRESS_FAULTS:-0}
if [ "$with_upstream" = 1 ] && ! vm_has_upstream; then
	with_upstream=0
	echo "PARTIAL: upstream rows skipped: $(vm_upstream_why)"
fi
VM_TIMEOUT=${WBKIT_STRESS_TIMEOUT:-2400}
# Upstream keeps ~16 MiB per construction after its device is removed
# (tests/crash/README.md), and every row constructs three times.
VM_MEM=$((VM_MEM > 2048 ? VM_MEM : 2048))

make_devices backing-up 16M cache-up 6M backing-wb 16M cache-wb 6M
wbkit_guest_program wbstress.c "$work/prog.img"

# The grid: writeback_threshold, nr_max_batched_writeback,
# update_sb_record_interval, sync_data_interval, read_cache_threshold,
# write_around_mode, nr_read_cache_cells, dm-delay under the cache (ms).
# Every value of every option appears at least twice, most pairs of values
# meet in some row.
cat >"$work/grid.txt" <<'EOF'
1 0 1 0 0 0 0 2048 0
2 1 32 1 1 1 0 1 1
3 100 1 1 0 127 0 2 0
4 0 32 0 1 127 1 1 0
5 100 32 0 1 1 1 2048 1
6 1 1 1 0 0 1 2 1
7 100 1 0 1 0 0 1 1
8 0 32 1 0 1 1 2 0
9 1 32 0 1 127 0 2048 0
EOF
if [ -n "$rows" ]; then
	pattern=" ${rows} "
	while read -r n rest; do [[ $pattern == *" $n "* ]] && echo "$n $rest"; done <"$work/grid.txt" >"$work/grid.sel"
	mv "$work/grid.sel" "$work/grid.txt"
fi
mapfile -t grid_rows <"$work/grid.txt"
vm_image "$work/grid.img" 1M
dd if="$work/grid.txt" of="$work/grid.img" conv=notrunc status=none

fail=0
for seed in $seeds; do
	run_guest "$work/prog.img" "$work/grid.img" <<GUEST
SEED=$seed
OPS=$ops
WITH_UPSTREAM=$with_upstream
FAULTS=$faults
wb_load_program /dev/vde /tmp/wbstress
tr -d '\000' </dev/vdf >/tmp/grid
[ "\$WITH_UPSTREAM" = 1 ] && wb_load_target upstream
wb_load_target wbkit target_name=wbkit

# control <device> <write_around>: tunables by message, drop_caches, suspend
# and resume, until /tmp/stop appears. Every step is bounded: a hang shows
# up as a failed step, not as a stuck scenario.
control() {
	i=0
	while [ ! -e /tmp/stop ]; do
		i=\$((i + 1))
		case \$((RANDOM % 9)) in
		0) timeout 30 \$DMSETUP message \$1 0 writeback_threshold \$((RANDOM % 101)) || echo "ctl: message failed" ;;
		1) timeout 30 \$DMSETUP message \$1 0 nr_max_batched_writeback \$((1 + RANDOM % 32)) || echo "ctl: message failed" ;;
		2) timeout 30 \$DMSETUP message \$1 0 update_sb_record_interval \$((RANDOM % 3)) || echo "ctl: message failed" ;;
		3) timeout 30 \$DMSETUP message \$1 0 sync_data_interval \$((RANDOM % 3)) || echo "ctl: message failed" ;;
		4) timeout 30 \$DMSETUP message \$1 0 read_cache_threshold \$((RANDOM % 128)) || echo "ctl: message failed" ;;
		5) timeout 60 \$DMSETUP message \$1 0 drop_caches || echo "ctl: drop_caches failed or timed out" ;;
		6) timeout 60 \$DMSETUP suspend \$1 || echo "ctl: suspend failed"
		   sleep 0.\$((RANDOM % 5))
		   timeout 60 \$DMSETUP resume \$1 || echo "ctl: resume failed" ;;
		*) sleep 0.\$((RANDOM % 9)) ;;
		esac
	done
	echo "ctl: \$i steps"
}

# faulty_reader <device>: 4 KiB direct reads of random blocks of the
# failing region until /tmp/stop appears; counts in /tmp/reads.ok and
# /tmp/reads.eio.
faulty_reader() {
	ok=0 eio=0
	while [ ! -e /tmp/stop ]; do
		if \$DD if=\$1 of=/dev/null bs=4k count=1 skip=\$((3072 + RANDOM % 1024)) iflag=direct 2>/dev/null; then
			ok=\$((ok + 1))
		else
			eio=\$((eio + 1))
		fi
	done
	echo \$ok >/tmp/reads.ok
	echo \$eio >/tmp/reads.eio
}

# row <target> <name> <backing> <cache> <n> <wt> <mb> <usr> <sdi> <rct> <wam> <nrc> <delay>
row() {
	target=\$1 tag=\$2 bdev=\$3 cdev=\$4 n=\$5
	opts="14 writeback_threshold \$6 nr_max_batched_writeback \$7 update_sb_record_interval \$8 sync_data_interval \$9 read_cache_threshold \${10} write_around_mode \${11} nr_read_cache_cells \${12}"
	\$DD if=/dev/zero of=\$bdev bs=1M count=16 oflag=direct status=none
	wb_zero_cache \$cdev
	dev=\$cdev
	delay=\${13}
	[ "\$FAULTS" = 1 ] && [ "\$delay" -lt 2 ] && delay=2
	if [ "\$delay" != 0 ]; then
		wb_dm_create cdelay "0 \$(wb_sectors \$cdev) delay \$cdev 0 \$delay"
		dev=/dev/mapper/cdelay
	fi
	size=""
	if [ "\$FAULTS" = 1 ]; then
		# 12 MiB for the workload, then 2 MiB that fail (dm-error: reads
		# fail, flushes do not reach it, as with bad sectors on a disk;
		# dm-flakey's down interval would fail the flushes too), 2 MiB that
		# read.
		wb_dm_create bfault "0 24576 linear \$bdev 0
24576 4096 error
28672 \$((\$(wb_sectors \$bdev) - 28672)) linear \$bdev 28672"
		bdev=/dev/mapper/bfault
		size="--size 12M"
	fi
	table="0 \$(wb_sectors \$bdev) \$target \$bdev \$dev \$opts"
	result=ok
	rm -f /tmp/model /tmp/stop
	\$DMSETUP create st --table "\$table" || { wb_report "\${tag}_\${n}" "create-failed"; return; }
	\$DMSETUP mknodes st
	for phase in 1 2; do
		control st >/tmp/ctl.out 2>&1 &
		cpid=\$!
		rpid=""
		if [ "\$FAULTS" = 1 ]; then
			faulty_reader /dev/mapper/st &
			rpid=\$!
		fi
		/tmp/wbstress run /dev/mapper/st --model /tmp/model --seed \$((SEED * 100 + n)) --ops \$OPS --threads 4 \$size >/tmp/run.out 2>&1 || result="read-mismatch-phase\$phase"
		touch /tmp/stop
		wait \$cpid
		if [ -n "\$rpid" ]; then
			wait \$rpid
			eio=\$(cat /tmp/reads.eio)
			echo "\$tag row \$n phase \$phase: faulty region reads: \$(cat /tmp/reads.ok) ok, \$eio EIO"
			if [ \$tag = wb ]; then
				counted=\$(\$DMSETUP message st 0 error_counts | tr ' ' '\\n' | sed -n '/^failed_requests\$/{n;p}')
				case "\$(wb_dm_status st)" in *" dead 0 "*) ;; *) [ \$result = ok ] && result="dead-phase\$phase" ;; esac
				[ "\$counted" = "\$eio" ] || { [ \$result = ok ] && result="eio-\$eio-counted-\$counted-phase\$phase"; }
				[ "\$eio" -gt 0 ] || { [ \$result = ok ] && result="no-eio-phase\$phase"; }
			fi
		fi
		sed "s/^/\$tag row \$n phase \$phase: /" /tmp/run.out /tmp/ctl.out | grep -v 'ctl: [0-9]* steps' | head -8
		grep -q 'failed\|timed out' /tmp/ctl.out && [ \$result = ok ] && result="control-failed-phase\$phase"
		rm -f /tmp/stop
		timeout 120 \$DMSETUP remove st || { result="remove-hung-phase\$phase"; break; }
		\$DMSETUP create st --table "\$table" || { result="recreate-failed-phase\$phase"; break; }
		\$DMSETUP mknodes st
		/tmp/wbstress verify /dev/mapper/st --model /tmp/model --seed \$((SEED * 100 + n)) \$size >/tmp/verify.out 2>&1 ||
			{ [ \$result = ok ] && result="restart-mismatch-phase\$phase"; sed "s/^/\$tag row \$n: /" /tmp/verify.out | head -6; }
		[ \$result = ok ] || break
	done
	if ! timeout 120 \$DMSETUP remove st; then
		[ \$result = ok ] && result="final-remove-failed"
	fi
	[ "\$delay" != 0 ] && \$DMSETUP remove cdelay
	[ "\$FAULTS" = 1 ] && \$DMSETUP remove bfault
	wb_report "\${tag}_\${n}" "\$result"
}

while read -r n wt mb usr sdi rct wam nrc delay; do
	[ -n "\$n" ] || continue
	[ "\$WITH_UPSTREAM" = 1 ] && row writeboost up /dev/vda /dev/vdb \$n \$wt \$mb \$usr \$sdi \$rct \$wam \$nrc \$delay
	row wbkit wb /dev/vdc /dev/vdd \$n \$wt \$mb \$usr \$sdi \$rct \$wam \$nrc \$delay
done </tmp/grid
dmesg | grep -iE 'blocked for more than|BUG:|WARNING:' | head -5
GUEST
	[ "$rc" = 0 ] || { echo "seed $seed: the VM failed (log: $VM_LOG)"; fail=1; continue; }
	for grid_row in "${grid_rows[@]}"; do
		n=${grid_row%% *}
		line="seed $seed row $n (${grid_row#* }):"
		if [ "$with_upstream" = 1 ]; then
			up=$(vm_result "up_$n")
			[ "$up" = ok ] || line="$line upstream $up (upstream's defect);"
			[ "$up" != ok ] || line="$line upstream ok;"
		fi
		got=$(vm_result "wb_$n")
		line="$line dm-wbkit ${got:-no result}"
		echo "$line"
		[ "$got" = ok ] || fail=1
	done
done
[ "$fail" = 0 ] && echo "stress grid: dm-wbkit passed every row of seeds $seeds"
exit $fail
