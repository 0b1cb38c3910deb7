#!/usr/bin/env bash
# shows: a 300 GiB (sparse) cache formats, takes writes and replays; its
#   kernel memory, and a 64 MiB cache's, stay within kmod/README.md's formula
#
# No size cap: a 300 GiB cache device (a sparse file; the guest gets the
# RAM its metadata needs) is formatted, takes writes, and is replayed after
# remove + re-create with every flushed write intact. kvmalloc refuses more
# than INT_MAX bytes, which the metablock array of a cache this size needs.
# Also measures the target's kernel memory (slab + vmalloc growth over the
# construction) at both sizes and holds it to kmod/README.md's "Memory":
# 15.756 bytes per cache block plus 8 MiB (WB_MEM_*), plus what the kernel
# allocates for any dm device (measured here on a dm-linear one) and 512 KiB
# for the target's threads and workqueues, which the formula leaves out.
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
kernel_kib() { awk '/^Slab:|^VmallocUsed:/ { kb += $2 } END { print kb }' /proc/meminfo; }
now() { cut -d' ' -f1 /proc/uptime; }
# What a dm device costs whatever its target: a dm-linear one, the same size.
m0=$(kernel_kib)
wb_dm_create wblinear "0 $(wb_sectors /dev/vda) linear /dev/vda 0"
wb_report linear_kernel_kib "$(($(kernel_kib) - m0))"
$DMSETUP remove wblinear || wb_fail "remove of the linear device failed"
m0=$(kernel_kib)
wb_dm_create wbsmall "0 $(wb_sectors /dev/vda) writeboost /dev/vda /dev/vdc"
wb_report small_kernel_kib "$(($(kernel_kib) - m0))"
$DMSETUP remove wbsmall || wb_fail "remove of the small cache failed"
m0=$(kernel_kib)
t0=$(now)
wb_dm_create wb "$T"
t1=$(now)
m1=$(kernel_kib)
st=$(wb_dm_status wb)
wb_report created "$st"
wb_report nr_cache_blocks "$(echo "$st" | cut -d' ' -f2)"
wb_report kernel_kib "$((m1 - m0))"
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
kib=$(vm_result kernel_kib)
read -r c0 c1 <<<"$(vm_result create_s)"
read -r r0 r1 <<<"$(vm_result replay_s)"
echo "created: $(vm_result created)"
echo "replayed: $(vm_result replayed)"
small_kib=$(vm_result small_kernel_kib)
linear_kib=$(vm_result linear_kernel_kib)
echo "64 MiB cache: $small_kib KiB of slab + vmalloc (a dm-linear device: $linear_kib KiB)"
awk -v b="$blocks" -v k="$kib" -v c0="$c0" -v c1="$c1" -v r0="$r0" -v r1="$r1" 'BEGIN {
	printf "%d cache blocks, %.1f MiB of slab + vmalloc: %.2f bytes per cache block; format %.1f s, replay %.1f s\n",
		b, k / 1024, k * 1024 / b, c1 - c0, r1 - r0 }'
fail=0
# kmod/README.md's bound, in KiB: 15.756 bytes a block, 8 MiB, the dm
# device, 512 KiB for threads and workqueues.
bound_kib() { echo $((($1 * 15756 / 1000 + 8 * 1048576) / 1024 + linear_kib + 512)); }
small_blocks=$(((64 * 2048 - 2048) / 1024 * 127))
case $VM_KVER in
*kdebug*)
	# KASAN's shadow and the slab's redzones and debug records count too.
	echo "a sanitizer kernel ($VM_KVER): the memory is printed, not held to the formula"
	;;
*)
	[ "$small_kib" -le "$(bound_kib $small_blocks)" ] ||
		{ echo "a 64 MiB cache took $small_kib KiB, more than the formula's $(bound_kib $small_blocks) KiB"; fail=1; }
	[ "$kib" -le "$(bound_kib "$blocks")" ] ||
		{ echo "the $CACHE_SIZE cache took $kib KiB, more than the formula's $(bound_kib "$blocks") KiB"; fail=1; }
	;;
esac
[ "$(vm_result last_flushed)" = 2000 ] || { echo "the workload did not complete"; fail=1; }
wbkit_expect verify ok || fail=1
[ "$fail" = 0 ] || vm_results | grep "^v_" | head -5
exit $fail
