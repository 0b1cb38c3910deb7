#!/usr/bin/env bash
# shows: the status line parsed as upstream documents it, on upstream and on
#   dm-wbkit (alive and dead)
#
# The status line reads with a parser that follows dm-writeboost's
# documentation: 24 numeric fields (7 log values, 16 statistics, the
# partial-flush count), then a count and exactly that many tokens as
# key/value pairs, upstream's five tunables first and in its order. Run on
# the upstream module first (the reference), then on dm-wbkit, in one boot;
# a dead dm-wbkit must still parse: every value of the line is an integer
# (dead 0 or 1; dm-wbkit's pairs, dead and the discard counters, come
# after upstream's), and the cause is the reply to the message dead_cause.
# Also records the documented numbering difference: 100 writes to one block
# after a format leave upstream's current_id at 2 (it logs an empty segment
# 1 first), dm-wbkit's at 1 (kmod/README.md says why).
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=600

make_devices backing 16M cache-up 8M cache-wb 8M

run_guest <<'GUEST'
LB=$(wb_sectors /dev/vda)
# parse <status>: "ok <count> <keys>" or what is wrong.
parse() {
	echo "$1" | awk '{
		if (NF < 25) { print "short: " NF " tokens"; exit }
		for (i = 1; i <= 24; i++) if ($i !~ /^[0-9]+$/) { print "field " i " not a number: " $i; exit }
		n = $25
		if (n !~ /^[0-9]+$/ || n % 2) { print "bad count " n; exit }
		if (NF != 25 + n) { print "count " n " but " NF - 25 " tokens follow"; exit }
		split("writeback_threshold nr_cur_batched_writeback sync_data_interval update_sb_record_interval read_cache_threshold", want, " ")
		keys = ""
		for (i = 26; i <= NF; i += 2) keys = keys (keys == "" ? "" : ",") $i
		for (k = 1; k <= 5; k++) {
			if ($(24 + 2 * k) != want[k]) { print "pair " k " is " $(24 + 2 * k) ", not " want[k]; exit }
			if ($(25 + 2 * k) !~ /^[0-9]+$/) { print want[k] " is not a number"; exit }
		}
		for (i = 27; i <= NF; i += 2) if ($i !~ /^[0-9]+$/) { print "the value of " $(i - 1) " is not a number: " $i; exit }
		print "ok " n " " keys
	}'
}
run() { # <cache> <tag>
	wb_dm_create wb "0 $LB writeboost /dev/vda $1 2 writeback_threshold 0"
	for i in $(seq 100); do
		$DD if=/dev/zero of=/dev/mapper/wb bs=4k count=1 seek=7 oflag=direct 2>/dev/null || wb_fail "$2: write failed"
	done
	wb_report "current_id_$2" "$(wb_dm_status wb | cut -d' ' -f4)"
	$WBSTAMP write /dev/mapper/wb --seed 80 --size 4M --ops 300 --flush-every 30 --final-flush >/dev/null ||
		wb_fail "$2: writes failed"
	st=$(wb_dm_status wb)
	wb_report "status_$2" "$st"
	wb_report "parse_$2" "$(parse "$st")"
	$DMSETUP remove wb || wb_fail "$2: remove failed"
}

wb_on_both_modules run /dev/vdb /dev/vdc
# Dead: the cause travels inside the counted pairs.
wb_dm_create bk "0 $LB linear /dev/vda 0"
wb_dm_create wb "0 $LB writeboost /dev/mapper/bk /dev/vdc"
$DD if=/dev/zero of=/dev/mapper/wb bs=4k count=1 seek=3000 oflag=direct conv=fsync 2>/dev/null ||
	wb_fail "write before the failure failed"
$DMSETUP load bk --table "0 $LB error" && $DMSETUP resume bk || wb_fail "cannot fail the backing device"
$DMSETUP message wb 0 drop_caches 2>/dev/null
st=$(wb_dm_status wb)
wb_report status_dead "$st"
wb_report parse_dead "$(parse "$st")"
wb_report cause_dead "$($DMSETUP message wb 0 dead_cause)"
$DMSETUP remove wb bk || wb_fail "remove failed"
GUEST
guest_passed
fail=0
for c in $(modules_ran upstream wbkit) dead; do
	echo "$c: $(vm_result "status_$c")"
	echo "  parsed: $(vm_result "parse_$c")"
done
[ "$with_upstream" = 0 ] || case "$(vm_result parse_upstream)" in
"ok 10 writeback_threshold,nr_cur_batched_writeback,sync_data_interval,update_sb_record_interval,read_cache_threshold") ;;
*) echo "upstream's status does not parse as documented: the parser is wrong"; fail=1 ;;
esac
case "$(vm_result parse_wbkit)" in
"ok 16 writeback_threshold,nr_cur_batched_writeback,sync_data_interval,update_sb_record_interval,read_cache_threshold,dead,nr_discarded_blocks,nr_discarded_dirty") ;;
*) echo "dm-wbkit's status does not parse like upstream's"; fail=1 ;;
esac
case "$(vm_result parse_dead)" in "ok 16 "*",dead,nr_discarded_blocks,nr_discarded_dirty") ;; *) echo "a dead dm-wbkit's status does not parse"; fail=1 ;; esac
up_id=$(vm_result current_id_upstream)
echo "current_id after 100 writes to one block: upstream ${up_id:-not run}, dm-wbkit $(vm_result current_id_wbkit)"
[ "$with_upstream" = 0 ] || wbkit_expect current_id_upstream 2 || fail=1
wbkit_expect current_id_wbkit 1 || fail=1
case "$(vm_result status_wbkit)" in *" dead 0 "*) ;; *) echo "alive, but the dead pair is not 0"; fail=1 ;; esac
case "$(vm_result status_dead)" in *" dead 1 "*) ;; *) echo "dead, but the dead pair is not 1"; fail=1 ;; esac
case "$(vm_result cause_dead)" in "backing write "*" -5") ;; *) echo "dead_cause: '$(vm_result cause_dead)', want backing write <sector> -5"; fail=1 ;; esac
exit $fail
