# wbkit: the one reader of /etc/writeboosttab, sourced (not run) by every part
# of wbkit that boots writeboost devices: the initramfs-tools hook and boot
# script (packaging/initramfs/), and wbkit-boot (packaging/boot/), which the
# udev rule and the systemd units of a running system call. Installed as
# /usr/lib/wbkit/writeboosttab.sh; the hook copies it into the initramfs.
# POSIX sh plus `local`, as dash, busybox and klibc sh have it.
#
# The file's format is Debian's writeboost package's (writeboosttab(5)), read
# the way its /sbin/writeboost reads it: one device per line,
#
#   <name> <backing device> <cache device> [<key>=<value>,...]
#
# fields separated by spaces or tabs; a line whose first field starts with
# `#` is a comment, one whose name starts with `/` is skipped (not a map
# name), and a line with fewer than three fields is skipped. A device is a
# path (/dev/sdb2, /dev/disk/by-id/...) or, unlike that script, UUID=,
# LABEL=, PARTUUID= or PARTLABEL=, resolved as initramfs-tools'
# resolve_device resolves root= (blkid -l -t).
# shellcheck shell=sh disable=SC3043 disable=SC2034 # local; WHY is for the callers

WBTAB=${WBTAB:-/etc/writeboosttab}

# wbtab_say <message>: how the callers report; they may define their own
# after sourcing this file.
wbtab_say()
{
	echo "writeboost: $*"
}

# wbtab_entries: the entries, one a line, as "name backing cache options"
# (options empty when the line has none).
wbtab_entries()
{
	awk '$1 !~ /^#/ && $1 !~ /^\// && NF >= 3 { print $1, $2, $3, $4 }' "$WBTAB" 2>/dev/null
}

# wbtab_names: the names of the entries, separated by spaces.
wbtab_names()
{
	wbtab_entries | awk '{ printf "%s%s", sep, $1; sep = " " }'
}

# wbtab_entry <name>: the entry of device <name>, or nothing (status 1).
wbtab_entry()
{
	wbtab_entries | awk -v n="$1" '$1 == n { print; found = 1; exit } END { exit !found }'
}

# wbtab_resolve <spec>: the block device a path, UUID=, LABEL=, PARTUUID= or
# PARTLABEL= names, as the kernel's name (/dev/sda2), or nothing yet
# (status 1).
wbtab_resolve()
{
	local dev
	case "$1" in
	LABEL=* | UUID=* | PARTLABEL=* | PARTUUID=*)
		dev=$(blkid -l -t "$1" -o device 2>/dev/null) || return 1
		;;
	*) dev=$1 ;;
	esac
	[ -n "$dev" ] && [ -e "$dev" ] || return 1
	dev=$(readlink -f "$dev") || return 1
	[ -b "$dev" ] && echo "$dev"
}

# wbtab_sectors <device>: its size in 512-byte sectors, from sysfs (an
# initramfs may have no blockdev).
wbtab_sectors()
{
	cat "/sys/class/block/${1##*/}/size" 2>/dev/null
}

wbtab_mapped()
{
	dmsetup info "$1" >/dev/null 2>&1
}

# wbtab_create <name> <backing> <cache> <options>: `dmsetup create <name>
# --table "0 <backing size> writeboost <backing> <cache>"`, then `dmsetup
# message <name> 0 <key> <value>` per option, as Debian's /sbin/writeboost
# does: the device comes up the same whichever of them made it, and an option
# the module refuses is a warning, not a device that does not come up.
# Returns 0 created, 1 a device is not there yet, 2 dmsetup refused; WHY
# says why.
wbtab_create()
{
	local name="$1" backing cache size opt IFS_SAVE
	if ! backing=$(wbtab_resolve "$2"); then
		WHY="backing device $2 not found"
		return 1
	fi
	if ! cache=$(wbtab_resolve "$3"); then
		WHY="cache device $3 not found"
		return 1
	fi
	size=$(wbtab_sectors "$backing")
	if [ -z "$size" ] || [ "$size" = 0 ]; then
		WHY="backing device $2 ($backing) has no size yet"
		return 1
	fi
	wbtab_say "creating $name: backing $backing, cache $cache"
	if ! dmsetup create "$name" --table "0 $size writeboost $backing $cache"; then
		WHY="dmsetup create failed (backing $backing, cache $cache; the kernel's reason is in dmesg)"
		return 2
	fi
	# dmsetup makes /dev/mapper/<name> with udev or without it.
	dmsetup mknodes "$name" >/dev/null 2>&1 || true
	if [ -n "$4" ]; then
		IFS_SAVE=$IFS
		IFS=,
		for opt in $4; do
			IFS=$IFS_SAVE
			dmsetup message "$name" 0 "${opt%%=*}" "${opt#*=}" ||
				wbtab_say "warning: $name: option $opt refused"
		done
		IFS=$IFS_SAVE
	fi
	wbtab_say "$name created"
	return 0
}

# wbtab_is <spec> [<link>...]: whether <spec> names the block device of the
# udev event being processed, from what udev knows of it: the environment
# of a udev program (DEVNAME, ID_FS_UUID, ID_FS_LABEL, ID_PART_ENTRY_UUID,
# ID_PART_ENTRY_NAME) and its symlinks so far ($links: disk/by-id/...,
# relative to /dev). Nothing is read from the device: the device may be
# the backing one, and udev has probed it already.
wbtab_is()
{
	local spec="$1" link target
	shift
	case "$spec" in
	UUID=*) [ -n "${ID_FS_UUID:-}" ] && [ "${spec#UUID=}" = "$ID_FS_UUID" ]; return ;;
	LABEL=*) [ -n "${ID_FS_LABEL:-}" ] && [ "${spec#LABEL=}" = "$ID_FS_LABEL" ]; return ;;
	PARTUUID=*) [ -n "${ID_PART_ENTRY_UUID:-}" ] && [ "${spec#PARTUUID=}" = "$ID_PART_ENTRY_UUID" ]; return ;;
	PARTLABEL=*) [ -n "${ID_PART_ENTRY_NAME:-}" ] && [ "${spec#PARTLABEL=}" = "$ID_PART_ENTRY_NAME" ]; return ;;
	esac
	[ -n "${DEVNAME:-}" ] || return 1
	[ "$spec" = "$DEVNAME" ] && return 0
	for link in "$@"; do
		[ "$spec" = "/dev/${link#/dev/}" ] && return 0
	done
	# A link made by an earlier event (a change event, or a name outside
	# /dev/disk).
	target=$(readlink -f "$spec" 2>/dev/null) && [ "$target" = "$DEVNAME" ]
}

# wbtab_udev [<link>...]: for a udev IMPORT{program}: prints
# WBKIT_BACKING_OF=<name> when the event's device is the backing device of
# entry <name>, WBKIT_CACHE_OF=<name> when it is its cache device. The
# writeboost device itself (DM_NAME=<name>) carries the backing device's
# file system and UUID, and is neither.
wbtab_udev()
{
	local name backing cache
	wbtab_entries | {
		while read -r name backing cache _; do
			[ "${DM_NAME:-}" = "$name" ] && continue
			if wbtab_is "$backing" "$@"; then
				echo "WBKIT_BACKING_OF=$name"
				break
			fi
			if wbtab_is "$cache" "$@"; then
				echo "WBKIT_CACHE_OF=$name"
				break
			fi
		done
	}
}
