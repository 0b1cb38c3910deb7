#!/usr/bin/env bash
# shows: upstream, then dm-wbkit: `nr_cur_batched_writeback` shrinks to 1
#   under writes, grows to `nr_max_batched_writeback` during an idle
#   `drop_caches` and in background writeback (`writeback_threshold 100`) once
#   the writes stop; `current_id` per fsync of 100 writes, with the bytes each
#   writes to its cache device
#
# Adaptive writeback batching, shown in nr_cur_batched_writeback. Run on the
# upstream module first (the reference), then on dm-wbkit, in one boot,
# each on a 66-segment cache with writeback_threshold 0 and
# nr_max_batched_writeback 4:
# - fresh: 0 (no batch yet);
# - foreground writes of three times the cache: upstream's ring is full and
#   every writer waits for one slot, so its batches shrink to 1; dm-wbkit
#   starts writing back while fewer than nr_max_batched_writeback slots are
#   free and paces the writers there, so its batch is those slots + 1 (2 to
#   4; measured 4);
# - idle, drop_caches: as slots come free the batch grows back to 4 (the
#   status is polled while drop_caches runs; the largest value seen is 4).
#   Upstream recounts its free slots once a second (its modulator thread):
#   until then its batches stay at 1, and a fast backing disk can take the
#   whole cache back in that second. The backing device is a dm-delay
#   device: writes are held 200 ms while drop_caches runs, so the
#   writeback lasts seconds on both modules;
# - foreground writes again: back to 1 (dm-wbkit: 2 to 4);
# - then writeback_threshold 100 by message, no more writes: background
#   writeback (allowed while the backing device was busy less than 100 %
#   of the last second) empties the ring, and as slots come free the batch
#   grows back to full throttle, 4 (writes to the backing disk are held
#   200 ms here too, so that the batches last long enough to be seen).
#   dm-wbkit used to read the threshold as a percentage of dirty segments,
#   so 100 never wrote back.
# Segment numbering (a difference kept, kmod/README.md): 100 writes of one
# block, each followed by fsync. The scenario reports both modules' id
# advance and the bytes each wrote to its cache device, and requires that
# upstream advances current_id with every fsync (by at least 100) and
# dm-wbkit, which appends each fsync's block to the open segment in place,
# by at most 1 (the 100 blocks fit one segment, which may have held a few
# already) and writes at most 12 KiB to the cache device per fsync.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=900

# Caches of 34 MiB: the 1 MiB superblock region + 66 segments of 512 KiB.
make_devices backing 112M cache-up 34M cache-wb 34M

run_guest <<'GUEST'
batch() { wb_status_field 29; }
backing_sectors=$(wb_sectors /dev/vda)
wb_dm_create slow "0 $backing_sectors delay /dev/vda 0 0"
write_delay() { # <ms>: holds each write to the backing disk that long
	$DMSETUP suspend slow &&
		$DMSETUP load slow --table "0 $backing_sectors delay /dev/vda 0 0 /dev/vda 0 $1" &&
		$DMSETUP resume slow || wb_fail "setting the backing disk's write delay to $1 ms failed"
}
pressure() { # <tag> <seek in MiB>: 100 MiB of writes, no flush
	$DD if=/dev/urandom of=/dev/mapper/wb bs=1M count=100 seek="$2" oflag=direct 2>/dev/null ||
		wb_fail "$1: writes failed"
}
run() { # <cache> <tag>
	wb_dm_create wb "0 $backing_sectors writeboost /dev/mapper/slow $1 4 writeback_threshold 0 nr_max_batched_writeback 4"
	wb_report "fresh_$2" "$(batch)"
	pressure "$2" 0
	wb_report "pressure_$2" "$(batch)"
	wb_report "segments_$2" "$(wb_dm_status wb | cut -d' ' -f3)"
	# Upstream's drop_caches waits for the RAM buffer too: flush it first.
	$DD if=/dev/null of=/dev/mapper/wb bs=4k count=0 conv=fsync,notrunc 2>/dev/null || wb_fail "$2: flush failed"
	write_delay 200
	$DMSETUP message wb 0 drop_caches &
	pid=$!
	seen=""
	max=0
	while kill -0 $pid 2>/dev/null; do
		b=$(batch)
		case " $seen " in *" $b "*) ;; *) seen="$seen $b" ;; esac
		[ "$b" -gt "$max" ] && max=$b
		sleep 0.05
	done
	wait $pid || wb_fail "$2: drop_caches failed"
	write_delay 0
	wb_report "idle_seen_$2" "$(echo $seen | tr ' ' ,)"
	wb_report "idle_max_$2" "$max"
	wb_report "idle_dirty_$2" "$(wb_dm_status wb | cut -d' ' -f7)"
	pressure "$2" 4
	wb_report "again_$2" "$(batch)"
	tag=$2
	write_delay 200
	$DMSETUP message wb 0 writeback_threshold 100 || wb_fail "$tag: message writeback_threshold 100 failed"
	seen=""
	max=0
	left=?
	t0=$(date +%s)
	while [ $(($(date +%s) - t0)) -lt 180 ]; do
		b=$(batch)
		case " $seen " in *" $b "*) ;; *) seen="$seen $b" ;; esac
		[ "$b" -gt "$max" ] && max=$b
		set -- $(wb_dm_status wb)
		left=$(($5 - $6))
		[ "$left" = 0 ] && break
		sleep 0.05
	done
	wb_report "background_seen_$tag" "$(echo $seen | tr ' ' ,)"
	wb_report "background_max_$tag" "$max"
	wb_report "background_left_$tag" "$left"
	wb_report "background_seconds_$tag" $(($(date +%s) - t0))
	write_delay 0
	$DMSETUP remove wb || wb_fail "$tag: remove failed"
}
numbering() { # <cache> <tag>
	wb_dm_create wb "0 $backing_sectors writeboost /dev/mapper/slow $1"
	id0=$(wb_status_field 4)
	dev=${1#/dev/}
	w0=$(awk '{ print $7 }' "/sys/block/$dev/stat")
	t0=$(date +%s)
	for _ in $(seq 1 100); do
		$DD if=/dev/urandom of=/dev/mapper/wb bs=4k count=1 oflag=direct conv=fsync,notrunc 2>/dev/null ||
			wb_fail "$2: write and fsync failed"
	done
	wb_report "fsync_ids_$2" $(($(wb_status_field 4) - id0))
	wb_report "fsync_cache_kib_$2" $((($(awk '{ print $7 }' "/sys/block/$dev/stat") - w0) / 2))
	wb_report "fsync_seconds_$2" $(($(date +%s) - t0))
	$DMSETUP remove wb || wb_fail "$2: remove failed"
}
module_cases() { # <cache> <tag>: batching, then numbering, on one module
	run "$1" "$2"
	numbering "$1" "$2"
}
wb_on_both_modules module_cases /dev/vdb /dev/vdc
GUEST
echo "batching: ${VM_ELAPSED}s"
guest_passed
fail=0
for m in $(modules_ran upstream wbkit); do
	echo "$m: fresh $(vm_result "fresh_$m"), under writes $(vm_result "pressure_$m"), idle drop_caches saw $(vm_result "idle_seen_$m") (max $(vm_result "idle_max_$m")), writes again $(vm_result "again_$m"), background writeback saw $(vm_result "background_seen_$m") (segments left $(vm_result "background_left_$m") after $(vm_result "background_seconds_$m") s)"
	expect_all 66 "segments_$m"
	expect_all 0 "fresh_$m" "idle_dirty_$m" "background_left_$m"
	expect_all 4 "idle_max_$m" "background_max_$m"
	if [ "$m" = upstream ]; then
		expect_all 1 "pressure_$m" "again_$m"
	else
		# dm-wbkit starts writing back while the ring still has free
		# slots (fewer than nr_max_batched_writeback) and paces the
		# writers, so under writes its batch is those slots + 1.
		for k in pressure again; do
			v=$(vm_result "${k}_$m")
			if ! { [ "$v" -ge 2 ] && [ "$v" -le 4 ]; } 2>/dev/null; then
				echo "expected ${k}_$m in 2..4 (writeback begun with slots free), got '$v'"
				fail=1
			fi
		done
	fi
	echo "$m: 100 writes with fsync: current_id +$(vm_result "fsync_ids_$m"), $(vm_result "fsync_cache_kib_$m") KiB written to the cache device, $(vm_result "fsync_seconds_$m") s"
done
[ "$with_upstream" != 1 ] || [ "$(vm_result fsync_ids_upstream)" -ge 100 ] 2>/dev/null || { echo "upstream: current_id did not advance per fsync"; fail=1; }
[ "$(vm_result fsync_ids_wbkit)" -le 1 ] 2>/dev/null || { echo "dm-wbkit: current_id advanced by more than a segment: fsyncs sealed segments"; fail=1; }
[ "$(vm_result fsync_cache_kib_wbkit)" -le 1200 ] 2>/dev/null || { echo "dm-wbkit: more than 12 KiB written to the cache device per fsync"; fail=1; }
exit $fail
