#!/usr/bin/env bash
# shows: a 300 GiB (sparse) cache formats, takes writes and replays; prints
#   memory per cache block; a 64 MiB cache takes at most 10 MiB of vmalloc
#
# No size cap: a 300 GiB cache device (a sparse file; the guest gets the
# RAM its metadata needs) is formatted, takes writes, and is replayed after
# remove + re-create with every flushed write intact. kvmalloc refuses more
# than INT_MAX bytes, which the metablock array of a cache this size needs.
# Also prints the target's memory per cache block (vmalloc'ed bytes of the
# device over its cache blocks), and checks the fixed part on a 64 MiB
# cache: the RAM buffer pool and writeback's stream, 8 MiB (a batch that
# held its segments' data took the pool to 28 MiB).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=${VM_TIMEOUT_LARGE:-600}
VM_MEM=${WBKIT_LARGE_CACHE_MEM:-3584}	# the sanitizer kernel needs more (test-vm-debug.sh)
CACHE_SIZE=${WBKIT_LARGE_CACHE:-300G}

# The images are sparse: the large cache takes little room on the host.
make_devices backing 64M cache "$CACHE_SIZE" small 64M

# Zero writes (the format) become holes: the file stays sparse.
VM_DRIVE_OPTS_vdb=discard=unmap,detect-zeroes=unmap \
run_guest <<'GUEST'
wb_load_target wbkit
T=$(wb_table)
W="--seed 76 --size 32M --ops 2000 --flush-every 50 --partial-pct 20"
vmalloc() { sed -n 's/^VmallocUsed: *\([0-9]*\) kB/\1/p' /proc/meminfo; }
now() { cut -d' ' -f1 /proc/uptime; }
m0=$(vmalloc)
wb_dm_create wbsmall "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdc"
wb_report small_vmalloc_kib "$(($(vmalloc) - m0))"
$DMSETUP remove wbsmall || wb_fail "remove of the small cache failed"
m0=$(vmalloc)
t0=$(now)
wb_dm_create wb "$T"
t1=$(now)
m1=$(vmalloc)
st=$(wb_dm_status wb)
wb_report created "$st"
wb_report nr_cache_blocks "$(echo "$st" | cut -d' ' -f2)"
wb_report vmalloc_kib "$((m1 - m0))"
wb_report create_s "$t0 $t1"
$WBSTAMP write /dev/mapper/wb $W --final-flush | sed 's/^/WB: /'
$DMSETUP remove wb || wb_fail "remove failed"
t2=$(now)
wb_dm_create wb "$T"
t3=$(now)
wb_report replay_s "$t2 $t3"
wb_report replayed "$(wb_dm_status wb)"
$WBSTAMP verify /dev/mapper/wb $W --flushed 2000 >/tmp/v.out 2>&1 && wb_report verify ok || wb_report verify failed
head -5 /tmp/v.out | sed 's/^/WB: v_/'
$DMSETUP remove wb || wb_fail "final remove failed"
GUEST
echo "large cache ($CACHE_SIZE): ${VM_ELAPSED}s, $(du -h "$work/cache.img" | cut -f1) allocated on the host"
[ "$rc" = 0 ] || { vm_results | grep -E "^fail|^created" ; exit 1; }
blocks=$(vm_result nr_cache_blocks)
kib=$(vm_result vmalloc_kib)
read -r c0 c1 <<<"$(vm_result create_s)"
read -r r0 r1 <<<"$(vm_result replay_s)"
echo "created: $(vm_result created)"
echo "replayed: $(vm_result replayed)"
small_kib=$(vm_result small_vmalloc_kib)
echo "64 MiB cache: $((small_kib / 1024)) MiB vmalloc'ed"
awk -v b="$blocks" -v k="$kib" -v c0="$c0" -v c1="$c1" -v r0="$r0" -v r1="$r1" 'BEGIN {
	printf "%d cache blocks, %.1f MiB vmalloc'\''ed: %.2f bytes per cache block; format %.1f s, replay %.1f s\n",
		b, k / 1024, k * 1024 / b, c1 - c0, r1 - r0 }'
fail=0
# 8 MiB fixed, 16,256 blocks at ~40 bytes, the read cache's cell index.
[ "$small_kib" -le $((10 * 1024)) ] || { echo "a 64 MiB cache took $small_kib KiB of vmalloc, more than 10 MiB"; fail=1; }
[ "$(vm_result last_flushed)" = 2000 ] || { echo "the workload did not complete"; fail=1; }
wbkit_expect verify ok || fail=1
[ "$fail" = 0 ] || vm_results | grep "^v_" | head -5
exit $fail
