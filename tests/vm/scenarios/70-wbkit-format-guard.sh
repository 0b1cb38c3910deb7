#!/usr/bin/env bash
# shows: ext4, a bit-flipped magic and unknown data refused and unchanged;
#   read-only tables refused; a blank device formatted; backing write and read
#   errors name operation and start sector
#
# The target formats only a cache device whose first and last MiB are all
# zeros. A device holding anything else without the writeboost magic (a
# file system on a mistyped path, a superblock with one flipped bit, unknown
# data, a bcache cache device, whose sector 0 is zero) is refused with a
# message naming the device and what it holds, and left byte-identical
# (99-wbkit-format-guard-all checks every common signature). Read-only tables are refused without a write. A failed
# write on the backing device names the right operation and start sector in
# the dead state; a failed read miss fails alone and says where in the log.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
command -v mkfs.ext4 >/dev/null || { echo "skip: mkfs.ext4 not installed"; exit 77; }
command -v zstd >/dev/null || { echo "skip: zstd not installed"; exit 77; }
VM_TIMEOUT=600

# vda: the backing device; vdb: an ext4 file system, the classic mistyped path.
make_devices backing 32M ext4 8M
mkfs.ext4 -q -F "$work/ext4.img"
# vdc: a real cache (upstream fixture) with one bit of its magic flipped.
zstd -d -q "$WBKIT_ROOT/fixtures/upstream/sb-record/cache.img.zst" -o "$work/flipped.img"
printf '\x75' | dd of="$work/flipped.img" bs=1 seek=0 conv=notrunc status=none
# vdd: unknown data in sector 0, zeros elsewhere.
vm_image "$work/junk.img" 8M
printf 'not a cache, just some bytes' | dd of="$work/junk.img" bs=1 seek=100 conv=notrunc status=none
# vde, vdf: blank caches (all zeros) for the read-only and error cases.
vm_image "$work/blank1.img" 8M
vm_image "$work/blank2.img" 8M
# vdg: a bcache cache device, as make-bcache leaves it: the superblock at
# 4 KiB, sector 0 zero (a blank cache, by sector 0 alone).
vm_image "$work/bcache.img" 8M
command -v make-bcache >/dev/null || { echo "make-bcache is not installed (bcache-tools)"; exit 1; }
make-bcache --bucket 16k -C "$work/bcache.img" >/dev/null
[ "$(head -c 512 "$work/bcache.img" | tr -d '\0' | wc -c)" = 0 ] || { echo "make-bcache wrote sector 0"; exit 1; }
keep_digests ext4 flipped junk bcache

run_guest "$work/flipped.img" "$work/junk.img" "$work/blank1.img" "$work/blank2.img" "$work/bcache.img" <<'GUEST'
wb_load_target wbkit
LB=$(wb_sectors /dev/vda)

# refuse <case> <cache dev> [dmsetup options]: the table must not load.
# Its messages are the kernel log's lines after a marker.
refuse() {
	wb_log_mark "refuse $1"
	if $DMSETUP create "g_$1" $3 --table "0 $LB writeboost /dev/vda $2" 2>/tmp/err; then
		wb_report "refused_$1" no
		$DMSETUP remove "g_$1"
	else
		wb_report "refused_$1" yes
	fi
	wb_report "msg_$1" "$(wb_log_since "refuse $1" | grep writeboost | grep -v ioctl |
		sed 's/^\[[^]]*\] //' | tr '\n' '|')"
	$DMSETUP remove "g_$1" 2>/dev/null || true
}
refuse ext4 /dev/vdb
refuse flipped /dev/vdc
refuse junk /dev/vdd
refuse bcache /dev/vdg
# The blank device is formatted below: its digest is taken here, around the
# refusal, by direct reads.
blank_sum() { $DD if=/dev/vde bs=1M iflag=direct 2>/dev/null | $SHA256SUM | cut -c1-64; }
before=$(blank_sum)
refuse readonly /dev/vde --readonly
[ "$(blank_sum)" = "$before" ] && wb_report readonly_unchanged yes || wb_report readonly_unchanged no

# A blank cache still formats (the documented way to ask for one).
wb_dm_create fresh "0 $LB writeboost /dev/vda /dev/vde"
echo hello | $DD of=/dev/mapper/fresh bs=4k count=1 conv=sync,fsync oflag=direct 2>/dev/null ||
	wb_fail "write to the freshly formatted cache failed"
$DMSETUP remove fresh || wb_fail "remove failed"
wb_report fresh_magic "$($DD if=/dev/vde bs=512 count=1 iflag=direct 2>/dev/null | head -c 4 | od -An -tx1 | tr -d ' \n')"

# Errors name the right place: a backing device whose 4 KiB block at
# sector 4096 fails (dm "error" in the middle of linear mappings).
E=4096
wb_dm_create bk "0 $E linear /dev/vda 0
$E 8 error
$((E + 8)) $((LB - E - 8)) linear /dev/vda $((E + 8))"
wb_dm_create ew "0 $LB writeboost /dev/mapper/bk /dev/vdf"
$DD if=/dev/urandom of=/dev/mapper/ew bs=4k count=4 seek=$((E / 8 - 1)) oflag=direct conv=fsync 2>/dev/null ||
	wb_fail "write into the cache failed"
$DMSETUP message ew 0 drop_caches 2>/dev/null && wb_report drop_caches_succeeded yes
wb_report write_status "$(wb_dm_status ew)"
wb_report write_cause "$($DMSETUP message ew 0 dead_cause)"
$DMSETUP remove ew || wb_fail "remove of the dead target failed"
wb_zero_cache /dev/vdf
wb_dm_create er "0 $LB writeboost /dev/mapper/bk /dev/vdf"
$DD if=/dev/mapper/er of=/dev/null bs=512 count=2 skip=$((E + 3)) iflag=direct 2>/dev/null && wb_report read_succeeded yes
wb_report read_status "$(wb_dm_status er)"
wb_report read_cause "$($DMSETUP message er 0 dead_cause)"
dmesg | grep -q "backing device read error -5 at sector $((E + 3)): this request fails, the target goes on" &&
	wb_report read_logged yes || wb_report read_logged no
$DMSETUP remove er bk || wb_fail "remove failed"
GUEST
guest_passed

fail=0
expect_refused() {
	local c=$1 want=$2 msg
	msg=$(vm_result "msg_$c")
	echo "$c: $msg"
	wbkit_expect "refused_$c" yes || fail=1
	case "$msg" in
	*"$want"*) ;;
	*) echo "$c: the message does not say '$want'"; fail=1 ;;
	esac
}
expect_refused ext4 "ext2/3/4 file system"
expect_refused flipped "damaged writeboost superblock"
expect_refused junk "non-zero data at byte 100"
expect_refused bcache "a bcache superblock"
expect_refused readonly "Read-only tables are not supported"
expect_unchanged ext4 flipped junk bcache
wbkit_expect readonly_unchanged yes || fail=1
wbkit_expect fresh_magic 74734257 || fail=1

ws=$(vm_result write_status)
rs=$(vm_result read_status)
echo "backing write error: $(vm_result write_cause)"
echo "backing read error:  $(vm_result read_cause)"
[ -z "$(vm_result drop_caches_succeeded)" ] || { echo "drop_caches succeeded over a failing block"; fail=1; }
[ -z "$(vm_result read_succeeded)" ] || { echo "a read of a failing block succeeded"; fail=1; }
case "$ws" in *" dead 1 "*) ;; *) echo "write error: the status does not say dead 1"; fail=1 ;; esac
# A read miss touched nothing the cache holds: it fails alone.
case "$rs" in *" dead 0 "*) ;; *) echo "read error: the status does not say dead 0"; fail=1 ;; esac
wbkit_expect write_cause "backing write 4096 -5" || fail=1
wbkit_expect read_cause "alive" || fail=1
wbkit_expect read_logged yes || fail=1
exit $fail
