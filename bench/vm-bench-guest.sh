# Helpers for the guest scripts of the VM benchmarks (busybox sh), after
# /lib/wbguest.sh. vm_bench_dbench_tar puts this file in the extras tar as
# /lib/wbbench.sh; a guest script sources it once the tar is unpacked.

# now <var>: the uptime in centiseconds into <var>, without a fork: a command
# substitution with tr and cut cost ~20 ms of the measured time under TCG.
now() {
	read -r up_s _ </proc/uptime
	eval "$1=${up_s%.*}${up_s#*.}"
}
# The backing disk's busy time so far (ms): io_ticks, field 10 of its stat.
busy_ms() { awk '{ print $10 }' /sys/block/${HDD#/dev/}/stat; }
# Terse v3: read IOPS field 8, read bandwidth (KiB/s) 7, read completion
# latency mean (us) 16, write IOPS 49, write completion latency max 56.
fio_terse() {
	$FIO --direct=1 --randrepeat=1 --output-format=terse --terse-version=3 "$@" \
		>/tmp/fio.out 2>/tmp/fio.err || { cat /tmp/fio.err; wb_fail "fio $* failed"; }
}
terse() { cut -d';' -f"$1" /tmp/fio.out | head -1; }
# terse_write_pct <percentile>: the write completion latency (us) at that
# percentile (50, 99, 99.9...), found by its label in fields 59-78.
terse_write_pct() {
	head -1 /tmp/fio.out | cut -d';' -f59-78 | tr ';' '\n' |
		awk -F= -v p="$1" '{ sub(/%$/, "", $1) } $1 + 0 == p + 0 { print $2; exit }'
}
