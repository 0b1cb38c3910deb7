#!/usr/bin/env bash
# shows: upstream refuses discard; dm-wbkit takes `blkdiscard`: the discarded
#   dirty blocks never reach the backing device, the range reads the same
#   before and after a reload, `drop_caches` and a reload, partial blocks keep
#   their data, blocks in the open RAM buffer are discarded too; a discard
#   the backing device fails fails alone (fault table row `passdown_error`);
#   discards racing writeback; a replay keeps a discard after a partial
#   write; ext4 and XFS with `fstrim` and with `-o discard`: a deleted
#   file's data never reaches the backing disk
#
# Discard through the cache (kmod/README.md, "Discard"). Upstream's module
# first: it advertises no discard (discard_max_bytes 0) and blkdiscard fails
# on it, as its source says it means to. Then dm-wbkit, twice in one boot:
# once over a backing disk that supports discard (the discard goes on to
# it) and once over one that does not (the guest turns it off on a virtio
# disk). Each time:
# - 8 MiB of dirty data (every byte 0xAB, a pattern the backing disk does
#   not hold) at 4 MiB, 4 MiB to keep (every byte 0xCD) at 12 MiB; then 4
#   blocks of 0xAB at 20 MiB that stay in the open RAM segment; before them,
#   a MiB of the range written again (0xEF), so that older dirty copies
#   of it, superseded, wait for writeback too, and 512 bytes of 0xEF into
#   one more block;
# - blkdiscard of 4 MiB + 512 .. 12 MiB - 512 and of the 4 open blocks: the
#   dirty count falls by the whole blocks (2046 + 4), the two partial blocks
#   at the ends keep their 0xAB;
# - the discarded range reads the backing device's content for it, the same
#   before and after drop_caches and remove + create; without the passdown
#   remove + create comes first, with nothing written back (the log replayed
#   with its tombstones: the dirty count is the blocks kept), with it
#   drop_caches comes first (writeback meets the superseded copies as the
#   target left them at run time);
# - drop_caches writes back the 4 MiB kept and the 2 partial blocks only:
#   not one byte 0xAB reaches the discarded range of the backing disk, and
#   the backing disk's written sectors say the same.
# Then discards racing writeback of the same blocks (drop_caches in the
# background), a discard after a partial write into a block written back, replayed
# (the older copy's sectors the replay leaves to the partial entry must not
# land over the discard), a passdown the backing device fails (dm-flakey),
# and ext4 and XFS on the
# target: an 8 MiB file written, synced and deleted, then `fstrim`, or
# mounted with `-o discard`: after drop_caches none of its bytes is on the
# backing disk, and the file kept is.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=600

# vda: backing with discard (QEMU passes it to the sparse image); vdb: cache;
# vdc: backing without discard.
make_devices backing 32M cache 32M plain 32M xfsback 320M
export VM_DRIVE_OPTS_vda="discard=unmap"

run_guest <<'GUEST'
AB=$(printf '\253') CD=$(printf '\315') EF=$(printf '\357') FA=$(printf '\132')
# fill <dev> <MiB offset> <MiB> <byte>
fill() {
	head -c $(($3 * 1048576)) /dev/zero | tr '\0' "$4" |
		$DD of="$1" bs=1M seek="$2" oflag=direct 2>/dev/null || wb_fail "fill of $1 at $2M failed"
}
# count_byte <dev> <skip sectors> <sectors> <byte>: how many bytes equal <byte>.
# Read in 1 MiB requests: a 512-byte direct read each is minutes under TCG.
read_sectors() {
	$DD if="$1" bs=1M skip=$(($2 * 512)) count=$(($3 * 512)) iflag=direct,skip_bytes,count_bytes 2>/dev/null
}
count_byte() {
	read_sectors "$1" "$2" "$3" | tr -dc "$4" | wc -c
}
digest() {
	read_sectors "$1" "$2" "$3" | wb_digest
}
sectors_written() {
	awk '{ print $7 }' "/sys/block/$1/stat"
}
# whole_blocks <dev> <byte>: the 4 KiB blocks of <dev> made of <byte> only.
whole_blocks() {
	$WBSTAMP blocks-of "$1" --byte "$2" | sed -n 's/^blocks_of=//p'
}
dm_queue() {
	cat "/sys/block/dm-$($DMSETUP info -c --noheadings -o minor "$1" | tr -d ' ')/queue/$2"
}

if wb_has_upstream; then
	wb_load_target upstream
	wb_zero_cache /dev/vdb
	wb_start
	wb_report upstream_discard_max "$(dm_queue wb discard_max_bytes)"
	if busybox blkdiscard -o 4194304 -l 8388608 /dev/mapper/wb 2>/tmp/bd.err; then
		wb_report upstream_blkdiscard accepted
	else
		wb_report upstream_blkdiscard refused
	fi
	$DMSETUP remove wb || wb_fail "remove on upstream failed"
	wb_unload_target upstream
fi

wb_load_target wbkit
# case <tag> <backing device> <backing disk for its stat> <reload before drop_caches: yes|no>
case_discard() {
	tag=$1 backing=$2 disk=$3 reload_first=$4
	wb_zero_cache /dev/vdb
	# What the backing device holds before: 0x5A, not zeros (a tombstone's data).
	fill "$backing" 4 20 "$FA"
	WB_TABLE="0 $(wb_sectors "$backing") writeboost $backing /dev/vdb"
	wb_dm_create wb "$WB_TABLE"
	wb_report "${tag}_discard_max" "$(dm_queue wb discard_max_bytes)"
	wb_report "${tag}_backing_discard_max" "$(cat /sys/block/$disk/queue/discard_max_bytes)"
	fill /dev/mapper/wb 4 8 "$AB"
	fill /dev/mapper/wb 12 4 "$CD"
	sync_dev=/dev/mapper/wb
	$DD if=/dev/null of=$sync_dev conv=fsync,notrunc 2>/dev/null || wb_fail "flush failed"
	# Newer copies of a MiB of the range (0xEF) in later segments: the
	# 0xAB copies there are superseded, dirty and still to be written back
	# when the discard comes.
	fill /dev/mapper/wb 5 1 "$EF"
	# And 512 bytes of 0xEF in a block of 0xAB at 6 MiB: merged at run
	# time with the older copy's dirty sectors into one full new copy.
	head -c 512 /dev/zero | tr '\0' "$EF" |
		$DD of=/dev/mapper/wb bs=512 seek=$((6 * 2048 + 3)) oflag=direct 2>/dev/null || wb_fail "partial write failed"
	$DD if=/dev/null of=$sync_dev conv=fsync,notrunc 2>/dev/null || wb_fail "flush failed"
	# Four blocks in the open RAM segment, no flush after them.
	head -c 16384 /dev/zero | tr '\0' "$AB" |
		$DD of=/dev/mapper/wb bs=4k seek=5120 oflag=direct 2>/dev/null || wb_fail "open blocks failed"
	dirty_before=$(wb_status_field 7)
	busybox blkdiscard -o $((4194304 + 512)) -l $((8388608 - 1024)) /dev/mapper/wb ||
		wb_fail "$tag: blkdiscard of the dirty range failed"
	busybox blkdiscard -o $((5120 * 4096)) -l 16384 /dev/mapper/wb ||
		wb_fail "$tag: blkdiscard of the open blocks failed"
	dirty_after=$(wb_status_field 7)
	wb_report "${tag}_dirty_dropped" $((dirty_before - dirty_after))
	# The whole blocks of the range: 8 MiB less the 2 partial blocks.
	range="8200 16368"
	d1=$(digest /dev/mapper/wb $range)
	d2=$(digest /dev/mapper/wb $range)
	[ "$d1" = "$d2" ] || wb_fail "$tag: the discarded range reads differently twice"
	[ "$d1" = "$(digest "$backing" $range)" ] || wb_fail "$tag: the discarded range does not read the backing device's content"
	o1=$(digest /dev/mapper/wb 40960 32)
	[ "$o1" = "$(digest "$backing" 40960 32)" ] || wb_fail "$tag: the discarded open blocks do not read the backing device's content"
	wb_report "${tag}_partial_kept" "$(count_byte /dev/mapper/wb 8192 8 "$AB"),$(count_byte /dev/mapper/wb 24568 8 "$AB")"
	$DD if=/dev/null of=$sync_dev conv=fsync,notrunc 2>/dev/null || wb_fail "flush failed"
	replayed() {
		wb_report "${tag}_dirty_replayed" "$(wb_status_field 7)"
		wb_report "${tag}_range_5a_replayed" "$(count_byte /dev/mapper/wb $range "$FA")"
		[ "$(digest /dev/mapper/wb $range)" = "$d1" ] || wb_fail "$tag: the discarded range changed with a reload"
		[ "$(digest /dev/mapper/wb 40960 32)" = "$o1" ] || wb_fail "$tag: the discarded open blocks changed with a reload"
	}
	if [ "$reload_first" = yes ]; then
		# The log replayed with the tombstones in it, nothing written back yet.
		$DMSETUP remove wb || wb_fail "remove failed"
		wb_dm_create wb "$WB_TABLE"
		replayed
	fi
	# Without a reload first, writeback meets the superseded 0xAB copies as
	# the target left them at run time (a replay would make them obsolete).
	before=$(sectors_written "$disk")
	$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
	wb_report "${tag}_backing_sectors_written" $(($(sectors_written "$disk") - before))
	wb_report "${tag}_backing_sectors_discarded" "$(awk '{ print $14 }' "/sys/block/$disk/stat")"
	wb_report "${tag}_dirty_left" "$(wb_status_field 7)"
	[ "$(digest /dev/mapper/wb $range)" = "$d1" ] || wb_fail "$tag: the discarded range changed with drop_caches"
	wb_report "${tag}_backing_ab" "$(count_byte "$backing" $range "$AB"),$(count_byte "$backing" 40960 32 "$AB"),$(count_byte "$backing" $range "$EF")"
	wb_report "${tag}_kept_cd" "$(count_byte "$backing" 24576 8192 "$CD")"
	$DMSETUP remove wb || wb_fail "remove failed"
	wb_dm_create wb "$WB_TABLE"
	[ "$(digest /dev/mapper/wb $range)" = "$d1" ] || wb_fail "$tag: the discarded range changed with a reload after drop_caches"
	[ "$reload_first" = yes ] || replayed
	$DMSETUP remove wb || wb_fail "remove failed"
	wb_report "${tag}_done" ok
}
case_discard passdown /dev/vda vda no
# A backing device without discard: QEMU's virtio disks all offer it, so
# the guest turns it off on vdc.
echo 0 >/sys/block/vdc/queue/discard_max_bytes || wb_fail "cannot turn discard off on vdc"
case_discard nopassdown /dev/vdc vdc yes

# A discard after a partial write, replayed: a block of 0xAB written back by
# drop_caches (the superblock record is not kept, so the log still holds
# its copy as dirty), 512 bytes of 0xEF into it (a partial entry: its
# older copy was clean at run time), the block discarded, then remove +
# create. The replay leaves the 0xAB copy's other 7 sectors to the backing
# device; the tombstone after both voids them, or they land over the
# discarded block.
wb_zero_cache /dev/vdb
WB_TABLE="0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
wb_dm_create wb "$WB_TABLE"
head -c 4096 /dev/zero | tr '\0' "$AB" |
	$DD of=/dev/mapper/wb bs=4k seek=6656 oflag=direct 2>/dev/null || wb_fail "kept_void: write failed"
$DD if=/dev/null of=/dev/mapper/wb conv=fsync,notrunc 2>/dev/null || wb_fail "flush failed"
$DMSETUP message wb 0 drop_caches || wb_fail "kept_void: drop_caches failed"
head -c 512 /dev/zero | tr '\0' "$EF" |
	$DD of=/dev/mapper/wb bs=512 seek=$((6656 * 8 + 3)) oflag=direct 2>/dev/null || wb_fail "kept_void: partial write failed"
$DD if=/dev/null of=/dev/mapper/wb conv=fsync,notrunc 2>/dev/null || wb_fail "flush failed"
busybox blkdiscard -o $((6656 * 4096)) -l 4096 /dev/mapper/wb || wb_fail "kept_void: blkdiscard failed"
$DD if=/dev/null of=/dev/mapper/wb conv=fsync,notrunc 2>/dev/null || wb_fail "flush failed"
wb_report kept_void_before "$(count_byte /dev/mapper/wb $((6656 * 8)) 8 "$AB"),$(count_byte /dev/mapper/wb $((6656 * 8)) 8 "$EF")"
$DMSETUP remove wb || wb_fail "remove failed"
wb_dm_create wb "$WB_TABLE"
wb_report kept_void_replayed "$(count_byte /dev/mapper/wb $((6656 * 8)) 8 "$AB"),$(count_byte /dev/mapper/wb $((6656 * 8)) 8 "$EF")"
$DMSETUP remove wb || wb_fail "remove failed"

# Discards racing writeback of the same blocks: 16 MiB of 0xAB dirty at
# 4 MiB, drop_caches writing it back in the background, and meanwhile 64
# discards of every other 128 KiB of it. Whatever the order, each
# discarded chunk reads zeros (the backing disk's, after the passdown) and
# each other chunk 0xAB, through the target and on the backing disk once
# writeback is done, and again after remove + create.
wb_zero_cache /dev/vdb
fill /dev/vda 4 16 "$FA"
wb_dm_create wb "$WB_TABLE"
fill /dev/mapper/wb 4 16 "$AB"
$DD if=/dev/null of=/dev/mapper/wb conv=fsync,notrunc 2>/dev/null || wb_fail "flush failed"
race_dirty=$(wb_status_field 7)
$DMSETUP message wb 0 drop_caches &
dc_pid=$!
i=0
while [ $i -lt 64 ]; do
	busybox blkdiscard -o $((4194304 + i * 262144)) -l 131072 /dev/mapper/wb || wb_fail "race: blkdiscard $i failed"
	[ $i != 0 ] || race_dirty_first=$(wb_status_field 7)
	i=$((i + 1))
done
race_dirty_last=$(wb_status_field 7)
wait $dc_pid || wb_fail "race: drop_caches failed"
wb_report race_dirty "$race_dirty,$race_dirty_first,$race_dirty_last,$(wb_status_field 7)"
# race_check <device> <key>: the 16 MiB against what it must hold, zeros
# in every discarded chunk and 0xAB in the others (one read: a dd per chunk
# is seconds under TCG).
head -c 131072 /dev/zero >/tmp/zeros
head -c 131072 /dev/zero | tr '\0' "$AB" >/tmp/abs
: >/tmp/race.expect
i=0
while [ $i -lt 64 ]; do
	cat /tmp/zeros /tmp/abs >>/tmp/race.expect
	i=$((i + 1))
done
race_check() {
	if read_sectors "$1" 8192 32768 | cmp - /tmp/race.expect >/tmp/cmp.out 2>&1; then
		wb_report "$2" same
	else
		wb_report "$2" "differs: $(head -n 1 /tmp/cmp.out)"
	fi
}
race_check /dev/mapper/wb race_read
race_check /dev/vda race_backing
$DMSETUP remove wb || wb_fail "remove failed"
wb_dm_create wb "$WB_TABLE"
race_check /dev/mapper/wb race_replayed
$DMSETUP remove wb || wb_fail "remove failed"

# The fault table's row: a discard the backing device fails. The backing
# device is a linear over vda, swapped under the live target for dm-flakey
# failing every write (a discard is one; it offers discard as vda does)
# once 4 dirty blocks at 24 MiB are cached; they are discarded.
wb_zero_cache /dev/vdb
LA=$(wb_sectors /dev/vda)
$DMSETUP create faulty --table "0 $LA linear /dev/vda 0" || wb_fail "faulty backing failed"
$DMSETUP mknodes faulty
wb_dm_create wb "0 $LA writeboost /dev/mapper/faulty /dev/vdb"
head -c 16384 /dev/zero | tr '\0' "$AB" |
	$DD of=/dev/mapper/wb bs=4k seek=6144 oflag=direct 2>/dev/null || wb_fail "dirty blocks over the error failed"
$DMSETUP suspend faulty && $DMSETUP load faulty --table "0 $LA flakey /dev/vda 0 0 60 1 error_writes" &&
	$DMSETUP resume faulty || wb_fail "the swap to dm-flakey failed"
if busybox blkdiscard -o $((6144 * 4096)) -l 16384 /dev/mapper/wb 2>/dev/null; then
	wb_report passdown_error_discard succeeded
else
	wb_report passdown_error_discard failed
fi
wb_report passdown_error_dirty "$(wb_status_field 7)"
wb_report passdown_error_counts "$($DMSETUP message wb 0 error_counts | tr ' ' ,)"
wb_report passdown_error_dead "$(wb_dm_status wb | awk '{ for (i = 1; i < NF; i++) if ($i == "dead") print $(i + 1) }')"
# The target goes on: a write and its read elsewhere.
head -c 4096 /dev/zero | tr '\0' "$CD" | $DD of=/dev/mapper/wb bs=4k seek=100 oflag=direct 2>/dev/null ||
	wb_fail "a write after the failed discard failed"
wb_report passdown_error_after "$(count_byte /dev/mapper/wb 800 8 "$CD")"
$DMSETUP suspend faulty && $DMSETUP load faulty --table "0 $LA linear /dev/vda 0" &&
	$DMSETUP resume faulty || wb_fail "the swap back to linear failed"
$DMSETUP remove wb || wb_fail "remove failed"
$DMSETUP remove faulty || wb_fail "remove of faulty failed"

# ext4 on the target: an 8 MiB file of 0xAB written and synced, deleted,
# then fstrim (or the discard mount option); drop_caches must put none of
# it on the backing disk.
modprobe ext4 || wb_fail "modprobe ext4 failed"
mkdir -p /mnt
# delete_and_trim <tag> <mount options> <deleted byte> <kept byte>: on the
# file system mounted at /mnt over wb, an 8 MiB file of <deleted byte> and
# 1 MiB of <kept byte> written and synced, the first deleted, then fstrim
# (or, with -o discard, a wait for the file system's own discards); the
# dirty blocks dropped reported, then umount, drop_caches and remove.
delete_and_trim() {
	tag=$1 opts=$2
	head -c 8388608 /dev/zero | tr '\0' "$3" >/mnt/deleted || wb_fail "$tag: writing the file failed"
	head -c 1048576 /dev/zero | tr '\0' "$4" >/mnt/kept || wb_fail "$tag: writing the file failed"
	/usr/bin/sync -f /mnt || wb_fail "$tag: sync failed"
	dirty_before=$(wb_status_field 7)
	rm /mnt/deleted
	/usr/bin/sync -f /mnt
	case $opts in
	*discard*)
		# The discards come after the journal commit, in the
		# background: up to 30 s for the file's 2048 blocks to go.
		for _ in $(seq 60); do
			[ $((dirty_before - $(wb_status_field 7))) -lt 2048 ] || break
			sleep 0.5
		done
		;;
	*) busybox fstrim /mnt || wb_fail "$tag: fstrim failed" ;;
	esac
	wb_report "${tag}_dirty_dropped" $((dirty_before - $(wb_status_field 7)))
	umount /mnt || wb_fail "$tag: umount failed"
	$DMSETUP message wb 0 drop_caches || wb_fail "$tag: drop_caches failed"
	$DMSETUP remove wb || wb_fail "$tag: remove failed"
}
ext4_case() {
	tag=$1 opts=$2
	wb_zero_cache /dev/vdb
	$DD if=/dev/zero of=/dev/vda bs=1M count=32 oflag=direct 2>/dev/null || wb_fail "zeroing vda failed"
	wb_dm_create wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdb"
	# 4 KiB blocks, as on any disk of a real size (mke2fs picks 1 KiB
	# for 32 MiB): only whole 4 KiB blocks are discarded.
	/sbin/mkfs.ext4 -q -F -b 4096 -E nodiscard /dev/mapper/wb || wb_fail "$tag: mkfs.ext4 failed"
	mount -t ext4 -o "$opts" /dev/mapper/wb /mnt || wb_fail "$tag: mount failed"
	delete_and_trim "$tag" "$opts" "$AB" "$CD"
	wb_report "${tag}_backing_ab" "$(count_byte /dev/vda 0 65536 "$AB")"
	wb_report "${tag}_backing_cd" "$(count_byte /dev/vda 0 65536 "$CD")"
	wb_report "${tag}_backing_blocks" "$(whole_blocks /dev/vda 0xab),$(whole_blocks /dev/vda 0xcd)"
}
ext4_case ext4_fstrim defaults
ext4_case ext4_discard discard

# XFS, the same way, on vdd (320 MiB: XFS wants 300 at least). mkfs.xfs
# goes to the disk itself, not through the cache: its 64 MiB log would
# only wrap the 32 MiB cache. Each case deletes and keeps its own byte, as
# mkfs does not clear the data the first case left.
if [ -x /usr/sbin/mkfs.xfs ] && modprobe xfs 2>/dev/null; then
	xfs_case() {
		tag=$1 opts=$2 deleted=$3 kept=$4 deleted_hex=$5 kept_hex=$6
		wb_zero_cache /dev/vdb
		/usr/sbin/mkfs.xfs -q -f -K /dev/vdd || wb_fail "$tag: mkfs.xfs failed"
		wb_dm_create wb "0 $(wb_sectors /dev/vdd) writeboost /dev/vdd /dev/vdb"
		mount -t xfs -o "$opts" /dev/mapper/wb /mnt || wb_fail "$tag: mount failed"
		delete_and_trim "$tag" "$opts" "$deleted" "$kept"
		# One read of the disk for both counts.
		read_sectors /dev/vdd 0 655360 | tr -dc "$deleted$kept" >/tmp/xfs.bytes
		wb_report "${tag}_backing_ab" "$(tr -dc "$deleted" </tmp/xfs.bytes | wc -c)"
		wb_report "${tag}_backing_cd" "$(tr -dc "$kept" </tmp/xfs.bytes | wc -c)"
		wb_report "${tag}_backing_blocks" "$(whole_blocks /dev/vdd "$deleted_hex"),$(whole_blocks /dev/vdd "$kept_hex")"
	}
	xfs_case xfs_fstrim defaults "$AB" "$CD" 0xab 0xcd
	xfs_case xfs_discard discard "$EF" "$FA" 0xef 0x5a
else
	wb_report xfs skipped
fi
GUEST
guest_passed
echo "upstream: discard_max_bytes $(vm_result upstream_discard_max), blkdiscard $(vm_result upstream_blkdiscard)"
fail=0
if [ -n "$(vm_result upstream_blkdiscard)" ]; then
	wbkit_expect upstream_discard_max 0 || fail=1
	wbkit_expect upstream_blkdiscard refused || fail=1
fi
for tag in passdown nopassdown; do
	echo "$tag: discard_max_bytes $(vm_result ${tag}_discard_max) (backing $(vm_result ${tag}_backing_discard_max))," \
		"dirty dropped $(vm_result ${tag}_dirty_dropped), partial blocks' 0xAB bytes $(vm_result ${tag}_partial_kept)," \
		"backing sectors written by drop_caches $(vm_result ${tag}_backing_sectors_written)," \
		"0xAB bytes in the backing's discarded range and open blocks, 0xEF bytes there $(vm_result ${tag}_backing_ab)," \
		"sectors discarded on the backing disk $(vm_result ${tag}_backing_sectors_discarded)"
	wbkit_expect "${tag}_done" ok || fail=1
	wbkit_expect "${tag}_dirty_dropped" $((2046 + 4)) || fail=1
	# A partial block is left out of the discard: all its 8 sectors stay.
	wbkit_expect "${tag}_partial_kept" "4096,4096" || fail=1
done
# The 4 MiB kept and the two partial blocks, the discarded ones not.
# Replayed after drop_caches too: the superblock record is not kept
# (update_sb_record_interval 0), so the log's dirty blocks come back.
wbkit_expect nopassdown_dirty_replayed $((1024 + 2)) || fail=1
wbkit_expect passdown_dirty_replayed $((1024 + 2)) || fail=1
for tag in passdown nopassdown; do
	wbkit_expect "${tag}_dirty_left" 0 || fail=1
	wbkit_expect "${tag}_backing_ab" "0,0,0" || fail=1
	wbkit_expect "${tag}_kept_cd" 4194304 || fail=1
	# The 4 MiB kept and the two partial blocks: 8192 + 16 sectors, no more.
	[ "$(vm_result ${tag}_backing_sectors_written)" -le 8208 ] || { echo "$tag: drop_caches wrote more than the blocks kept"; fail=1; }
done
# The passdown: every whole block of both ranges, and nothing without it.
[ "$(vm_result passdown_backing_sectors_discarded)" -ge $((16368 + 32)) ] || { echo "passdown: the backing disk saw too few discarded sectors"; fail=1; }
wbkit_expect nopassdown_backing_sectors_discarded 0 || fail=1
# Without the passdown the range reads the backing disk's 0x5A after the
# replay, not a tombstone's zeros; with it, the disk's discarded zeros.
wbkit_expect nopassdown_range_5a_replayed $((16368 * 512)) || fail=1
wbkit_expect passdown_range_5a_replayed 0 || fail=1
wbkit_expect passdown_discard_max 1073741824 || fail=1
wbkit_expect nopassdown_discard_max 1073741824 || fail=1
[ "$(vm_result nopassdown_backing_discard_max)" = 0 ] || { echo "the plain backing disk supports discard"; fail=1; }
# The discarded block reads the backing disk's zeros, before the replay
# and after it.
echo "kept_void: 0xAB,0xEF bytes of the discarded block $(vm_result kept_void_before), after the replay $(vm_result kept_void_replayed)"
wbkit_expect kept_void_before 0,0 || fail=1
wbkit_expect kept_void_replayed 0,0 || fail=1
# The race: zeros in every discarded chunk, 0xAB in the others, through
# the target, on the backing disk, after the replay.
echo "race: dirty blocks before, after the first and the last discard, after drop_caches $(vm_result race_dirty);" \
	"the 16 MiB against zeros and 0xAB: read $(vm_result race_read), backing $(vm_result race_backing), replayed $(vm_result race_replayed)"
for k in race_read race_backing race_replayed; do
	wbkit_expect $k same || fail=1
done
echo "passdown_error: blkdiscard $(vm_result passdown_error_discard), dirty $(vm_result passdown_error_dirty)," \
	"error_counts $(vm_result passdown_error_counts), dead $(vm_result passdown_error_dead)"
wbkit_expect passdown_error_discard failed || fail=1
# The passdown comes first: the cache keeps its 4 dirty blocks.
wbkit_expect passdown_error_dirty 4 || fail=1
wbkit_expect passdown_error_dead 0 || fail=1
wbkit_expect passdown_error_after 4096 || fail=1
case ",$(vm_result passdown_error_counts)," in
*,backing_write,1,*failed_requests,1,*) ;;
*) echo "passdown_error: error_counts do not name the failed discard"; fail=1 ;;
esac
xfs_tags=xfs_fstrim\ xfs_discard
if [ "$(vm_result xfs)" = skipped ]; then
	# mkfs.xfs comes with xfsprogs (scripts/install-deps.sh).
	echo "PARTIAL: XFS left out: no mkfs.xfs or xfs module in the guest"
	[ "${WBKIT_REQUIRE_ALL_TESTS:-0}" != 1 ] || fail=1
	xfs_tags=
fi
for tag in ext4_fstrim ext4_discard $xfs_tags; do
	echo "$tag: dirty blocks dropped $(vm_result ${tag}_dirty_dropped), the deleted file's bytes on the backing disk $(vm_result ${tag}_backing_ab)," \
		"the kept file's bytes $(vm_result ${tag}_backing_cd); 4 KiB blocks of the deleted and the kept file's byte there $(vm_result ${tag}_backing_blocks)"
	# Not one block of the deleted file; all 256 of the file kept.
	wbkit_expect "${tag}_backing_blocks" 0,256 || fail=1
	# The deleted file's 2048 blocks at least (ext4 may trim more free space).
	[ "$(vm_result ${tag}_dirty_dropped)" -ge 2048 ] || { echo "$tag: the deleted file's blocks stayed dirty"; fail=1; }
	# Less than a block of 0xAB (file system metadata holds a few such
	# bytes by chance), and the whole 1 MiB kept.
	[ "$(vm_result ${tag}_backing_ab)" -lt 4096 ] || { echo "$tag: a block of the deleted file reached the backing disk"; fail=1; }
	[ "$(vm_result ${tag}_backing_cd)" -ge 1048576 ] || { echo "$tag: the file kept is not on the backing disk"; fail=1; }
done
[ "$fail" = 0 ]
