#!/usr/bin/env bash
# Records what a writeboost target writes when it constructs on a crash state
# (its replay writes the backing device and the cache), optionally takes new
# stamped writes, writes everything back (drop_caches) and is removed: the
# input of the enumeration of power cuts during and after recovery.
# Backing and cache are two linear parts of one device under dm-log-writes
# (the layout of mode both) that starts out holding the state.
#
#   record-continue.sh TARGET STATE_DIR OUTDIR [NEW_OPS] [FLUSH_EVERY]
#     TARGET     wbkit or upstream
#     STATE_DIR  made by `wbcrash REC --save-state final|midlog --save-to DIR`:
#                base.img (backing then cache) and base.kv
#     NEW_OPS    stamped writes after the construction (default 0), numbered
#                on from the source recording's, each group of FLUSH_EVERY
#                (default 8) ended by an fsync and a mark f<N>
#
# OUTDIR gets base.img (the starting state), log.img, final-data.img and
# meta.kv (with base=, first=, prior_level=, prior_limit=, prior_any=).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../vm/lib.sh"
source "$here/target.inc"

target=${1:?target: wbkit|upstream}
state=${2:?state directory (wbcrash --save-state)}
out=${3:?output directory}
new_ops=${4:-0}
flush_every=${5:-8}

crash_prepare_target "$target"

kv() { sed -n "s/^$1=//p" "$state/base.kv"; }
backing_bytes=$(kv backing_bytes)
cache_bytes=$(kv cache_bytes)
src_ops=$(kv source_ops)
seed=$(kv seed)
partial_pct=$(kv partial_pct)
discard_pct=$(kv discard_pct)
[ -n "$backing_bytes" ] && [ -n "$cache_bytes" ] && [ -n "$src_ops" ] || { echo "bad $state/base.kv"; exit 2; }
[ "$(stat -c %s "$state/base.img")" = $((backing_bytes + cache_bytes)) ] || { echo "$state/base.img has the wrong size"; exit 2; }

mkdir -p "$out"
rm -f "$out"/log.img "$out"/final-data.img "$out"/meta.kv
[ "$(cd "$state" && pwd)" = "$(cd "$out" && pwd)" ] || cp --sparse=always "$state/base.img" "$out/base.img"
cp --sparse=always "$out/base.img" "$out/final-data.img"
vm_image "$out/log.img" 1G

backing_sectors=$((backing_bytes / 512))
cache_sectors=$((cache_bytes / 512))
first=$((src_ops + 1))
ops=$((src_ops + new_ops))
workload="--seed $seed --size $backing_bytes --partial-pct $partial_pct --discard-pct ${discard_pct:-0}"
VM_TIMEOUT=${CRASH_VM_TIMEOUT:-900}
guest=$(cat <<GUEST
. /lib/wbguest.sh
wb_load_target $target
wb_dm_create lw "0 $((backing_sectors + cache_sectors)) log-writes /dev/vda /dev/vdb"
wb_dm_create bk "0 $backing_sectors linear /dev/mapper/lw 0"
wb_dm_create cc "0 $cache_sectors linear /dev/mapper/lw $backing_sectors"
wb_dm_create wb "0 $backing_sectors writeboost /dev/mapper/bk /dev/mapper/cc"
wb_report replayed "\$(wb_dm_status wb)"
first=$first
while [ \$first -le $ops ]; do
	last=\$((first + $flush_every - 1))
	[ \$last -le $ops ] || last=$ops
	\$WBSTAMP write /dev/mapper/wb $workload --first \$first --ops \$last --flush-every $flush_every --final-flush >/tmp/w.out 2>&1 || { cat /tmp/w.out; wb_fail "workload failed at \$first"; }
	grep -q "^last_flushed=\$last\$" /tmp/w.out || { cat /tmp/w.out; wb_fail "write \$last not flushed"; }
	\$DMSETUP message lw 0 mark f\$last || wb_fail "mark f\$last failed"
	first=\$((last + 1))
done
\$DMSETUP message wb 0 drop_caches || wb_fail "drop_caches failed"
wb_report status "\$(wb_dm_status wb)"
\$DMSETUP remove wb || wb_fail "remove wb failed"
\$DMSETUP remove bk cc || wb_fail "remove bk cc failed"
wb_report log_status "\$(\$DMSETUP status lw | cut -d' ' -f4-)"
\$DMSETUP remove lw || wb_fail "remove lw failed"
wb_report recorded yes
GUEST
)
for attempt in 1 2 3; do
	rc=0
	vm_run - "$out/final-data.img" "$out/log.img" <<<"$guest" || rc=$?
	# A boot that panicked in the timer check never reached the script.
	[ "$rc" = 125 ] && tr -d '\r' <"$VM_LOG" | grep "IO-APIC + timer" >/dev/null || break
	vm_log "boot panicked in the timer check, retrying"
	cp --sparse=always "$out/base.img" "$out/final-data.img"
done
[ -z "$(vm_result skip)" ] || { echo "skip: $(vm_result skip)"; exit 77; }
if [ "$rc" != 0 ] || [ "$(vm_result recorded)" != yes ]; then
	echo "recording failed (rc $rc), log: $VM_LOG"
	exit 1
fi
{
	echo "target=$target"
	echo "mode=both"
	echo "workload=stamp"
	echo "seed=$seed"
	echo "ops=$ops"
	echo "first=$first"
	echo "flush_every=$flush_every"
	echo "partial_pct=$partial_pct"
	[ "${discard_pct:-0}" = 0 ] || echo "discard_pct=$discard_pct"
	echo "backing_bytes=$backing_bytes"
	echo "cache_bytes=$cache_bytes"
	echo "log_backing_offset=0"
	echo "log_cache_offset=$backing_bytes"
	echo "base=base.img"
	grep -E '^(prior_level|prior_limit|prior_any|source|source_target|source_mode|source_ops|source_damage)=' "$state/base.kv"
	echo "replayed=$(vm_result replayed)"
	echo "status=$(vm_result status)"
	echo "log_status=$(vm_result log_status)"
	echo "vm_seconds=$VM_ELAPSED"
} >"$out/meta.kv"
echo "recorded $target on $(kv source) with $new_ops new writes in ${VM_ELAPSED}s: $(vm_result log_status) (log entries, last sector)"
