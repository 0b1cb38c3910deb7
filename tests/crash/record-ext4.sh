#!/usr/bin/env bash
# Records every write a writeboost target issues to its cache, with
# dm-log-writes under the cache (as mode cache of record.sh: the cache never
# writes back, the backing device stays zero), while ext4 runs on it:
# mkfs.ext4, then files written and fsynced one operation at a time.
#
#   record-ext4.sh TARGET OUTDIR [OPS] [SEED]
#
# Operation N creates /d/f<N> (write, fsync the file, fsync /d), or every
# fourth one replaces an older file the safe way (write /d/tmp, fsync, rename
# over it, fsync /d). After it returns, `mark f<N>` goes into the log and
# meta.kv gets op.N=PATH SHA256: from that mark on PATH must hold that
# content after any power cut (tests/crash/ext4-check.sh). Mark f0 follows
# mkfs, mount and the first directory: before it there is no file system.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../vm/lib.sh"
source "$here/target.inc"

target=${1:?target: wbkit|upstream}
out=${2:?output directory}
ops=${3:-${CRASH_EXT4_OPS:-40}}
seed=${4:-21}

crash_prepare_target "$target"

backing_bytes=$((32 << 20))
# Every fsync seals a partly filled segment or two: the cache must hold all
# of them without wrapping.
cache_bytes=$((256 << 20))
mkdir -p "$out"
rm -f "$out"/log.img "$out"/final-data.img "$out"/final-backing.img "$out"/meta.kv
vm_image "$out/log.img" 1G
vm_image "$out/final-backing.img" "$backing_bytes"
vm_image "$out/final-data.img" "$cache_bytes"

VM_TIMEOUT=${CRASH_VM_TIMEOUT:-900}
guest=$(cat <<GUEST
. /lib/wbguest.sh
wb_load_target $target
modprobe ext4 || wb_fail "modprobe ext4 failed"
SYNC=/usr/bin/sync
wb_dm_create lw "0 $((cache_bytes / 512)) log-writes /dev/vdb /dev/vdc"
wb_dm_create wb "0 $((backing_bytes / 512)) writeboost /dev/vda /dev/mapper/lw"
/sbin/mkfs.ext4 -q -F -b 4096 -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 /dev/mapper/wb || wb_fail "mkfs.ext4 failed"
mkdir -p /mnt
mount -t ext4 -o noinit_itable /dev/mapper/wb /mnt || wb_fail "mount failed"
mkdir /mnt/d && \$SYNC /mnt/d /mnt || wb_fail "mkdir failed"
\$DMSETUP message lw 0 mark f0 || wb_fail "mark f0 failed"
i=1
while [ \$i -le $ops ]; do
	size=\$(( (i * 7919 + $seed) % 7 * 3000 + 512 ))
	if [ \$((i % 4)) = 0 ]; then
		name=f\$((i / 2))
		tmp=/mnt/d/tmp
	else
		name=f\$i
		tmp=/mnt/d/\$name
	fi
	yes "ext4 crash workload seed $seed op \$i file \$name" | head -c \$size >/tmp/content
	sum=\$(\$SHA256SUM /tmp/content | cut -d' ' -f1)
	\$DD if=/tmp/content of=\$tmp bs=64k conv=fsync status=none || wb_fail "writing \$tmp failed"
	[ "\$tmp" = /mnt/d/\$name ] || mv \$tmp /mnt/d/\$name || wb_fail "rename failed"
	\$SYNC /mnt/d || wb_fail "fsync of /mnt/d failed"
	wb_report op.\$i "/d/\$name \$sum"
	\$DMSETUP message lw 0 mark f\$i || wb_fail "mark f\$i failed"
	i=\$((i + 1))
done
umount /mnt || wb_fail "umount failed"
wb_report status "\$(wb_dm_status wb)"
\$DMSETUP remove wb || wb_fail "remove wb failed"
wb_report log_status "\$(\$DMSETUP status lw | cut -d' ' -f4-)"
\$DMSETUP remove lw || wb_fail "remove lw failed"
wb_report recorded yes
GUEST
)
for attempt in 1 2 3; do
	rc=0
	vm_run - "$out/final-backing.img" "$out/final-data.img" "$out/log.img" <<<"$guest" || rc=$?
	# A boot that panicked in the timer check never reached the script.
	[ "$rc" = 125 ] && tr -d '\r' <"$VM_LOG" | grep "IO-APIC + timer" >/dev/null || break
	vm_log "boot panicked in the timer check, retrying"
done
[ -z "$(vm_result skip)" ] || { echo "skip: $(vm_result skip)"; exit 77; }
if [ "$rc" != 0 ] || [ "$(vm_result recorded)" != yes ]; then
	echo "recording failed (rc $rc), log: $VM_LOG"
	exit 1
fi
# The enumeration assumes the unlogged backing device stayed zero.
if ! cmp -s -n "$backing_bytes" "$out/final-backing.img" /dev/zero; then
	echo "the target wrote to the unlogged backing device: the cache must never write back"
	exit 1
fi
rm -f "$out/final-backing.img"
{
	echo "target=$target"
	echo "mode=cache"
	echo "workload=ext4"
	echo "seed=$seed"
	echo "ops=$ops"
	echo "flush_every=1"
	echo "backing_bytes=$backing_bytes"
	echo "cache_bytes=$cache_bytes"
	echo "log_backing_offset=none"
	echo "log_cache_offset=0"
	vm_results | grep '^op\.'
	echo "status=$(vm_result status)"
	echo "log_status=$(vm_result log_status)"
	echo "vm_seconds=$VM_ELAPSED"
} >"$out/meta.kv"
[ "$(grep -c '^op\.' "$out/meta.kv")" = "$ops" ] || { echo "recorded $(grep -c '^op\.' "$out/meta.kv") of $ops operations"; exit 1; }
echo "recorded ext4 on $target in ${VM_ELAPSED}s: $(vm_result log_status) (log entries, last sector)"
