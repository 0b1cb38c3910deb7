#!/usr/bin/env bash
# fio write throughput in one VM boot, side by side: the raw backing device,
# dm-wbkit, and the upstream dm-writeboost target on the same backing device.
# 4 KiB random-write IOPS and 1 MiB sequential-write bandwidth; the goal is
# dm-wbkit >= upstream. Writeback is off (writeback_threshold 0) and each
# cache is larger than everything one round writes, so both targets measure
# their write path only, never the backing device.
# The figures are TCG-emulated (no KVM here) and the machine is shared:
# compare the columns of one run, not runs of different days.
# Usage: bench/vm-fio-throughput.sh [BUILD_DIR]
#   WBKIT_BENCH_ROUNDS (3), WBKIT_BENCH_RUNTIME (8 s per fio job),
#   WBKIT_BENCH_IO_CAP (1536M: most bytes one job writes, so the cache holds them)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/vm-bench.inc"

rounds=${WBKIT_BENCH_ROUNDS:-3}
runtime=${WBKIT_BENCH_RUNTIME:-8}
io_cap=${WBKIT_BENCH_IO_CAP:-1536M}

vm_bench_prepare
targets="wbkit"
if vm_has_upstream; then
	targets="wbkit upstream"
else
	echo "upstream dm-writeboost.ko not built for $VM_KVER: measuring raw and dm-wbkit only"
fi

work=$(mktemp -d "$VM_WORK/bench-fio.XXXXXX") # not tmpfs: cache=none needs O_DIRECT
trap 'rm -rf "$work"' EXIT
# Sparse images. Random writes go to the first GiB, sequential ones start at
# 2 GiB, so on the raw device the second job never overwrites the first's
# blocks. Each target has its own cache: in every round both write into
# host file blocks in the same state (new in round 1, rewritten after).
vm_image "$work/backing.img" 4G
vm_image "$work/cache-wbkit.img" 4G
vm_image "$work/cache-upstream.img" 4G

# lib.sh sets VM_TIMEOUT (240 s) already: too short for a 3-round run.
VM_TIMEOUT=${WBKIT_BENCH_VM_TIMEOUT:-600}
{
	echo "ROUNDS=$rounds RUNTIME=$runtime IO_CAP=$io_cap TARGETS='$targets'"
	cat <<'GUEST'
. /lib/wbguest.sh
# One fio job; prints "<write KiB> <KiB/s> <IOPS> <runtime ms>" (terse v3
# fields 47-50). io_size caps the bytes so that the cache never fills.
fio_job() {
	name=$1 dev=$2 rw=$3 bs=$4 offset=$5 size=$6 depth=$7
	$FIO --name="$name" --filename="$dev" --rw="$rw" --bs="$bs" \
		--offset="$offset" --size="$size" --io_size="$IO_CAP" \
		--runtime="$RUNTIME" --direct=1 --ioengine=libaio --iodepth="$depth" \
		--randrepeat=1 --output-format=terse --terse-version=3 \
		>/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fio $name on $dev failed"; }
	cut -d';' -f47-50 /tmp/fio.out | tr ';' ' '
}
measure() {
	# wb_fail in a command substitution only leaves the subshell.
	res=$(fio_job rand "$2" randwrite 4k 0 1G 32) || wb_fail "$res"
	wb_report "r$r.$1.rand" "$res"
	res=$(fio_job seq "$2" write 1M 2G 2G 8) || wb_fail "$res"
	wb_report "r$r.$1.seq" "$res"
}
run_target() {
	t=$1 cache=$2
	case $t in
	wbkit) mod=dm_wbkit ;;
	upstream) mod=dm_writeboost ;;
	esac
	wb_load_target "$t"
	# An invalid magic makes either target format the cache: every round
	# starts from an empty log.
	wb_zero_cache "$cache"
	wb_dm_create wb "0 $(wb_sectors /dev/vda) writeboost /dev/vda $cache 4 writeback_threshold 0 nr_max_batched_writeback 32"
	measure "$t" /dev/mapper/wb
	# last_writeback_id (6th field) must still be 0: nothing was written back.
	wb_report "r$r.$t.status" "$(wb_dm_status wb)"
	$DMSETUP remove wb || wb_fail "remove failed ($t)"
	# Both modules register "writeboost": only one may be loaded at a time.
	rmmod "$mod" || wb_fail "rmmod $mod failed"
}
r=1
while [ $r -le "$ROUNDS" ]; do
	# Odd rounds raw first, even rounds raw last: drift of the shared
	# machine's load then favours no device.
	order="raw $TARGETS"
	if [ $((r % 2)) = 0 ]; then
		rev=
		for t in $order; do rev="$t $rev"; done
		order=$rev
	fi
	for t in $order; do
		case $t in
		raw) measure raw /dev/vda ;;
		wbkit) run_target wbkit /dev/vdb ;;
		upstream) run_target upstream /dev/vdc ;;
		esac
	done
	r=$((r + 1))
done
GUEST
} >"$work/guest.sh"

vrc=0
vm_run "$work/guest.sh" "$work/backing.img" "$work/cache-wbkit.img" "$work/cache-upstream.img" || vrc=$?
echo "VM: ${VM_ELAPSED}s, log $VM_LOG; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$vrc" != 0 ]; then
	echo "the VM run failed (rc $vrc): $(vm_result fail)"
	exit 1
fi
[ -z "$(vm_result skip)" ] || { echo "skipped: $(vm_result skip)"; exit 0; }

# Per round, then the best round of each device (best, not mean: on a
# shared machine the slow rounds are other people's load).
vm_results | awk -v rounds="$rounds" -v targets="raw $targets" '
	function mb(kib) { return kib * 1024 / 1e6 }
	function median(a, dev,   v, m, r, j, x) {
		m = 0
		for (r = 1; r <= rounds; r++) {
			x = a[r, dev]
			for (j = m; j > 0 && v[j] > x; j--) v[j + 1] = v[j]
			v[j + 1] = x; m++
		}
		return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
	}
	/^r[0-9]+\.[a-z]+\.(rand|seq)=/ {
		split($0, kv, "="); split(kv[1], k, "."); split(kv[2], v, " ")
		r = substr(k[1], 2); dev = k[2]; job = k[3]
		if (job == "rand") { val = v[3]; if (val > best_iops[dev]) best_iops[dev] = val; iops[r, dev] = val }
		else { val = mb(v[2]); if (val > best_bw[dev]) best_bw[dev] = val; bw[r, dev] = val }
		next
	}
	/^r[0-9]+\.[a-z]+\.status=/ {
		split($0, kv, "="); split(kv[1], k, "."); split(kv[2], s, " ")
		if (s[6] != 0) printf "warning: %s wrote back during round %s (last_writeback_id %s): the cache filled\n", k[2], substr(k[1], 2), s[6]
	}
	END {
		n = split(targets, devs, " ")
		name["raw"] = "raw backing"; name["wbkit"] = "dm-wbkit"; name["upstream"] = "upstream"
		printf "%-12s %6s %14s %14s\n", "device", "round", "4k rand IOPS", "seq MB/s"
		for (r = 1; r <= rounds; r++)
			for (i = 1; i <= n; i++)
				printf "%-12s %6d %14.0f %14.1f\n", name[devs[i]], r, iops[r, devs[i]], bw[r, devs[i]]
		for (i = 1; i <= n; i++)
			printf "%-12s %6s %14.0f %14.1f\n", name[devs[i]], "best", best_iops[devs[i]], best_bw[devs[i]]
		# The median too: when best and median disagree on which target
		# is ahead, the load was too uneven for the difference to count.
		for (i = 1; i <= n; i++)
			printf "%-12s %6s %14.0f %14.1f\n", name[devs[i]], "median", median(iops, devs[i]), median(bw, devs[i])
		printf "ratios of the best rounds:\n"
		if (best_iops["upstream"] > 0)
			printf "  dm-wbkit / upstream: IOPS %.2f, MB/s %.2f (goal >= 1)\n", best_iops["wbkit"] / best_iops["upstream"], best_bw["wbkit"] / best_bw["upstream"]
		if (best_iops["raw"] > 0) {
			printf "  dm-wbkit / raw:      IOPS %.2f, MB/s %.2f\n", best_iops["wbkit"] / best_iops["raw"], best_bw["wbkit"] / best_bw["raw"]
			if (best_iops["upstream"] > 0)
				printf "  upstream / raw:      IOPS %.2f, MB/s %.2f\n", best_iops["upstream"] / best_iops["raw"], best_bw["upstream"] / best_bw["raw"]
		}
	}'
