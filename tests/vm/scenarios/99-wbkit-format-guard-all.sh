#!/usr/bin/env bash
# shows: the format rule over every common signature, each made by its own
#   tool on the host (ext2/3/4, XFS, btrfs, f2fs, nilfs2, JFS, ReiserFS, ISO
#   9660, swap, LUKS2, LVM2, MD 0.90/1.0/1.2, bcache, dm-writecache, GPT, DOS),
#   data only in the last MiB and a `WBst` sector 0 that is no superblock: each
#   refused with its name and left byte-identical, a zero device formatted, in
#   one boot (one disk, a dm-linear slice each). The module before the total
#   rule (845bb85) formatted f2fs, nilfs2, JFS, ReiserFS, ISO 9660, MD 0.90, MD
#   1.0 and the last-MiB data, and replayed the bad `WBst`
#
# Issue 57, item 3: the format guard refuses every common signature, not
# only those of a hand-kept list. A device is blank (formatted as a new
# cache) only when its first and last MiB are zeros; a `WBst` sector 0 must
# be a valid superblock. Each foreign device below is made on the host with
# Debian's own tools (checked with blkid -p there), laid side by side in one
# image, and presented to the guest as a dm-linear slice of exactly its own
# size (MD 0.90 and 1.0 are found from the end). Each one must be refused
# with a message naming what it holds, and left byte-identical (hashed on
# the host before and after). A zero slice is formatted, as a control.
#
# The module before the total rule (845bb85) formats f2fs, nilfs2, JFS,
# ReiserFS, ISO 9660, MD 0.90/1.0 and last-MiB data, and replays a bad
# `WBst`: run this scenario with VM_WBKIT_KO=<that module> (and a VM_WORK of
# its own) to see it fail on those.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=600

need() { command -v "$1" >/dev/null || { echo "skip: $1 not installed (scripts/install-deps.sh)"; exit 77; }; }
for t in blkid mkfs.ext4 mkfs.xfs mkfs.btrfs mkfs.f2fs mkfs.nilfs2 mkfs.jfs mkfs.reiserfs \
	xorriso mkswap cryptsetup pvcreate losetup make-bcache sfdisk python3; do
	need "$t"
done

# backing is /dev/vda; the disk of foreign devices ($all, /dev/vdb) is made below.
make_devices backing 32M
loopdev=
# The exit trap (instead of make_devices'): the loop device too.
cleanup() {
	[ -z "$loopdev" ] || losetup -d "$loopdev" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
img=$work/img
mkdir -p "$img"

# case name, expected words in the refusal. Sizes: the tools' minimums
# (XFS 300 MiB, btrfs 109 MiB, nilfs2 128 MiB), else 16 MiB; all sparse.
mk() { truncate -s "$2" "$img/$1.img"; }
q() { "$@" >/dev/null 2>&1 || { echo "$* failed"; exit 1; }; }
mk ext2 16M && q mkfs.ext2 -q -F "$img/ext2.img"
mk ext3 16M && q mkfs.ext3 -q -F "$img/ext3.img"
mk ext4 16M && q mkfs.ext4 -q -F "$img/ext4.img"
mk xfs 320M && q mkfs.xfs -q -f "$img/xfs.img"
mk btrfs 120M && q mkfs.btrfs -q -f "$img/btrfs.img"
mk f2fs 64M && q mkfs.f2fs -q -f "$img/f2fs.img"
mk nilfs2 140M && q mkfs.nilfs2 -q -f "$img/nilfs2.img"
mk jfs 32M && q mkfs.jfs -q "$img/jfs.img"
mk reiserfs 64M && q mkfs.reiserfs -q -f "$img/reiserfs.img"
mkdir -p "$work/isodir" && echo "an ISO 9660 image" >"$work/isodir/readme"
q xorriso -as mkisofs -quiet -o "$img/iso9660.img" "$work/isodir"
truncate -s 8M "$img/iso9660.img"
mk swap 16M && q mkswap "$img/swap.img"
printf 'wbkit' >"$work/key"
mk luks 32M && q cryptsetup luksFormat -q --type luks2 --key-file "$work/key" \
	--pbkdf pbkdf2 --pbkdf-force-iterations 1000 "$img/luks.img"
# LVM2: pvcreate wants a block device (a loop device; no device-mapper needed).
mk lvm2 16M
loopdev=$(losetup -f --show "$img/lvm2.img")
q pvcreate -ff -y "$loopdev"
losetup -d "$loopdev"
loopdev=
# MD: the host has no md driver for mdadm --create; mkmd.py writes the
# superblock mdadm would (blkid verifies the 1.x checksum).
for v in 0.90 1.0 1.2; do
	mk "md${v/./}" 16M && q python3 "$(dirname "$0")/../mkmd.py" "$img/md${v/./}.img" "$v"
done
mk bcache 16M && q make-bcache --bucket 16k -C "$img/bcache.img"
# dm-writecache's superblock (struct wc_memory_superblock: magic, version 1,
# block size 4096, n_blocks, seq_count); the host has no device-mapper and
# libblkid has no probe for it.
mk writecache 16M
printf '\x21\x93\x48\x23\x01\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x0f\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00' |
	dd of="$img/writecache.img" conv=notrunc status=none
mk gpt 16M && printf 'label: gpt\n,8M\n' | q sfdisk -q "$img/gpt.img"
mk dos 16M && printf 'label: dos\n,8M\n' | q sfdisk -q "$img/dos.img"
# Zeros everywhere but the last MiB (data that sector 0 alone never sees).
mk lastmib 16M
printf 'data in the last MiB' | dd of="$img/lastmib.img" bs=1 seek=$((16 * 1024 * 1024 - 300 * 1024)) conv=notrunc status=none
# The writeboost magic in sector 0, then bytes that no superblock has.
mk badwbst 16M
printf 'tsBWnot a superblock' | dd of="$img/badwbst.img" conv=notrunc status=none
# Control: all zeros, formatted.
mk blank 16M

cases="ext2 ext3 ext4 xfs btrfs f2fs nilfs2 jfs reiserfs iso9660 swap luks lvm2 md090 md10 md12 bcache writecache gpt dos lastmib badwbst"
declare -A want=(
	[ext2]="an ext2/3/4 file system" [ext3]="an ext2/3/4 file system" [ext4]="an ext2/3/4 file system"
	[xfs]="an XFS file system" [btrfs]="a btrfs file system" [f2fs]="an f2fs file system"
	[nilfs2]="a nilfs2 file system" [jfs]="a JFS file system" [reiserfs]="a ReiserFS file system"
	[iso9660]="an ISO 9660 file system" [swap]="a swap area" [luks]="a LUKS header"
	[lvm2]="an LVM2 physical volume label" [md090]="an MD RAID superblock (0.90)"
	[md10]="an MD RAID superblock (1.0)" [md12]="an MD RAID superblock (1.2)"
	[bcache]="a bcache superblock" [writecache]="a dm-writecache superblock"
	[gpt]="a GPT partition table" [dos]="a DOS partition table"
	[lastmib]="non-zero data at byte $((16 * 1024 * 1024 - 300 * 1024))"
	[badwbst]="the writeboost magic but not a valid superblock"
)
# What libblkid calls each (none for those it has no probe for).
declare -A blk=(
	[ext2]=ext2 [ext3]=ext3 [ext4]=ext4 [xfs]=xfs [btrfs]=btrfs [f2fs]=f2fs [nilfs2]=nilfs2
	[jfs]=jfs [reiserfs]=reiserfs [iso9660]=iso9660 [swap]=swap [luks]=crypto_LUKS
	[lvm2]=LVM2_member [md090]=linux_raid_member [md10]=linux_raid_member
	[md12]=linux_raid_member [bcache]=bcache [gpt]=gpt [dos]=dos
)
fail=0
for c in $cases; do
	[ -n "${blk[$c]:-}" ] || continue
	got=$(blkid -p -o export "$img/$c.img" | sed -n 's/^\(TYPE\|PTTYPE\)=//p' | head -n 1)
	if [ "$got" != "${blk[$c]}" ]; then
		echo "$c: blkid -p finds '$got', not ${blk[$c]}: the image is not what it should be"
		fail=1
	fi
done
[ "$fail" = 0 ] || exit 1

# One disk: each image at a 1 MiB boundary, sparse. The guest gets
# "name start length" (sectors) for each slice.
all=$work/foreign.img
manifest=
off=0
for c in $cases blank; do
	sz=$(stat -c %s "$img/$c.img")
	dd if="$img/$c.img" of="$all" bs=1M seek=$off conv=notrunc,sparse status=none
	manifest="$manifest$c $((off * 2048)) $((sz / 512))
"
	eval "slice_$c='$off $sz'"
	off=$((off + (sz + 1048575) / 1048576))
	rm -f "$img/$c.img"
done
slice_sum() {
	local o s
	read -r o s <<<"$(eval echo "\$slice_$1")"
	dd if="$all" bs=1M skip="$o" count=$(((s + 1048575) / 1048576)) status=none | head -c "$s" | sha256sum | cut -c1-64
}
declare -A before
for c in $cases; do before[$c]=$(slice_sum "$c"); done

run_guest "$all" <<GUEST
wb_load_target wbkit
LB=\$(wb_sectors /dev/vda)
echo "$manifest" | while read -r name start len; do
	[ -n "\$name" ] || continue
	\$DMSETUP create "s_\$name" --table "0 \$len linear /dev/vdb \$start" || wb_fail "slice \$name"
	\$DMSETUP mknodes "s_\$name"
	echo "wbscenario: guard \$name" >/dev/kmsg
	if \$DMSETUP create "g_\$name" --table "0 \$LB writeboost /dev/vda /dev/mapper/s_\$name" 2>/dev/null; then
		wb_report "refused_\$name" no
		\$DMSETUP remove "g_\$name"
	else
		wb_report "refused_\$name" yes
	fi
	wb_report "magic_\$name" "\$(\$DD if=/dev/mapper/s_\$name bs=512 count=1 iflag=direct 2>/dev/null | head -c 4 | od -An -tx1 | tr -d ' \n')"
	wb_report "msg_\$name" "\$(dmesg | sed -n "/wbscenario: guard \$name\\\$/,\\\$p" | grep writeboost | grep -v ioctl |
		sed 's/^\[[^]]*\] //' | tr '\n' '|')"
	\$DMSETUP remove "s_\$name"
done
GUEST
echo "guest: ${VM_ELAPSED:-?}s"
[ "$rc" = 0 ] || exit 1

formatted= replayed=
for c in $cases; do
	msg=$(vm_result "msg_$c")
	changed=no
	[ "$(slice_sum "$c")" = "${before[$c]}" ] || changed=yes
	echo "$c: refused=$(vm_result "refused_$c") changed=$changed: $msg"
	if [ "$(vm_result "refused_$c")" != yes ]; then
		if [ "$c" = badwbst ]; then replayed="$replayed $c"; else formatted="$formatted $c"; fi
		fail=1
	fi
	case "$msg" in
	*"holds ${want[$c]}"* | *"${want[$c]}"*) ;;
	*) echo "$c: the message does not say '${want[$c]}'"; fail=1 ;;
	esac
	[ "$changed" = no ] || { echo "$c: the device changed"; fail=1; }
done
echo "formatted:${formatted:- none}"
echo "replayed:${replayed:- none}"
# The control: zeros at both ends are a request for a new cache.
wbkit_expect refused_blank no || fail=1
wbkit_expect magic_blank 74734257 || fail=1
exit $fail
