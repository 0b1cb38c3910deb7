#!/usr/bin/env bash
# shows: a list of table lines upstream accepts, loaded on both: same `dmsetup
#   table`, status layout and values
#
# Table lines dm-writeboost 2.2.17 accepts load on dm-wbkit with the same
# meaning. Each line of the list below is loaded on the upstream module
# (the reference), then on dm-wbkit, in one boot; compared per line:
# whether it loads, `dmsetup table` (after the device numbers), the status
# layout read as upstream documents it (24 numbers, a count, that many
# tokens as key/value pairs; dm-wbkit adds the pair "dead" after upstream's
# five) and the values of the five pairs upstream's status shows. Each line
# gets a freshly formatted cache. Lines marked "~"
# load with the same meaning but print differently: dm-wbkit prints the
# keys it understood (lower case, once, current values), upstream the words
# as typed.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
wbkit_upstream_parts
VM_TIMEOUT=900

# list (/dev/vdd): the table lines below, zeros after them.
make_devices backing 16M cache-up 4M cache-wb 4M list 1M

# <mark> <optional arguments>; "-" for none
cat >"$work/tables.txt" <<'EOF'
= -
= 0
= 2 writeback_threshold 70
= 4 writeback_threshold 70 read_cache_threshold 31
= 2 nr_max_batched_writeback 1
= 2 nr_max_batched_writeback 32
= 4 update_sb_record_interval 3600 sync_data_interval 3600
= 4 sync_data_interval 1 update_sb_record_interval 0
= 2 read_cache_threshold 127
= 4 read_cache_threshold 1 nr_read_cache_cells 1
= 4 nr_read_cache_cells 2048 read_cache_threshold 8
= 2 write_around_mode 1
= 2 write_around_mode 0
= 6 write_around_mode 1 read_cache_threshold 4 nr_read_cache_cells 16
= 14 writeback_threshold 100 nr_max_batched_writeback 16 update_sb_record_interval 10 sync_data_interval 10 read_cache_threshold 20 write_around_mode 0 nr_read_cache_cells 64
= 14 nr_read_cache_cells 7 write_around_mode 0 read_cache_threshold 3 sync_data_interval 2 update_sb_record_interval 4 nr_max_batched_writeback 5 writeback_threshold 6
~ 2 WriteBack_Threshold 40
~ 4 writeback_threshold 10 writeback_threshold 20
~ 2 writeback_threshold 5 extra words
~ 0 writeback_threshold 5
EOF
dd if="$work/tables.txt" of="$work/list.img" conv=notrunc status=none

run_guest <<'GUEST'
tr -d '\000' </dev/vdd >/tmp/tables
LB=$(wb_sectors /dev/vda)
# layout <status>: "ok <count> <keys>" or what is wrong
layout() {
	echo "$1" | awk '{
		if (NF < 25) { print "short: " NF " tokens"; exit }
		for (i = 1; i <= 24; i++) if ($i !~ /^[0-9]+$/) { print "field " i " not a number"; exit }
		n = $25
		if (NF != 25 + n) { print "count " n " but " NF - 25 " tokens follow"; exit }
		keys = ""
		for (i = 26; i <= NF; i += 2) keys = keys (keys == "" ? "" : ",") $i
		print "ok " n " " keys
	}'
}
# the values of upstream's five pairs
values() { echo "$1" | awk '{ print $27 "," $29 "," $31 "," $33 "," $35 }'; }
run() { # <cache> <tag>
	i=0
	while read -r mark args; do
		i=$((i + 1))
		[ "$args" = - ] && args=
		# A fresh cache per line (both format it): upstream writes back
		# while it constructs on a wrapped log, which would show in
		# nr_cur_batched_writeback.
		wb_zero_cache "$1"
		if $DMSETUP create wb --table "0 $LB writeboost /dev/vda $1 $args" 2>/dev/null; then
			wb_report "t${i}_loads_$2" yes
			wb_report "t${i}_table_$2" "$($DMSETUP table wb | cut -d' ' -f6-)"
			st=$(wb_dm_status wb)
			wb_report "t${i}_layout_$2" "$(layout "$st")"
			wb_report "t${i}_values_$2" "$(values "$st")"
			$DMSETUP remove wb || wb_fail "$2: remove failed after line $i"
		else
			wb_report "t${i}_loads_$2" no
		fi
	done </tmp/tables
	wb_report "lines_$2" "$i"
}
wb_on_both_modules run /dev/vdb /dev/vdc
GUEST
echo "tables: ${VM_ELAPSED}s"
guest_passed
fail=0
n=$(wc -l <"$work/tables.txt")
for m in $(modules_ran upstream wbkit); do
	expect_all "$n" "lines_$m"
done
up_keys="writeback_threshold,nr_cur_batched_writeback,sync_data_interval,update_sb_record_interval,read_cache_threshold"
wb_keys="$up_keys,dead,nr_discarded_blocks,nr_discarded_dirty"
i=0
while read -r mark args; do
	i=$((i + 1))
	echo "line $i ($mark): $args"
	if [ "$with_upstream" = 0 ]; then
		# Without the reference: it loads, and the status has upstream's
		# documented layout; the table and the values are shown only.
		[ "$(vm_result "t${i}_loads_wbkit")" = yes ] || { echo "  dm-wbkit refuses it"; fail=1; }
		[ "$(vm_result "t${i}_layout_wbkit")" = "ok 16 $wb_keys" ] ||
			{ echo "  dm-wbkit's status layout: $(vm_result "t${i}_layout_wbkit")"; fail=1; }
		echo "  table '$(vm_result "t${i}_table_wbkit")', values '$(vm_result "t${i}_values_wbkit")'"
		continue
	fi
	for k in loads table layout values; do
		up=$(vm_result "t${i}_${k}_upstream")
		wb=$(vm_result "t${i}_${k}_wbkit")
		case $k in
		loads) [ "$up" = yes ] || { echo "  upstream refuses it: the list is wrong"; fail=1; } ;;
		table) [ "$mark" = "~" ] && { echo "  table: upstream '$up', dm-wbkit '$wb'"; continue; } ;;
		layout)
			[ "$up" = "ok 10 $up_keys" ] || { echo "  upstream's status layout: $up"; fail=1; }
			up="ok 16 $wb_keys"
			;;
		esac
		[ "$up" = "$wb" ] || { echo "  $k: upstream '$up', dm-wbkit '$wb'"; fail=1; }
	done
done <"$work/tables.txt"
exit $fail
