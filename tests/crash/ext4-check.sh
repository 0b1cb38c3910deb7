#!/usr/bin/env bash
# Checks one crash state of the ext4 workload (record-ext4.sh), given the
# logical image the offline replay produced (wbcrash --state-check runs it):
#  1. the journal is recovered (e2fsck -E journal_only, on this scratch image);
#  2. e2fsck -fn finds nothing to fix;
#  3. every file an operation up to mark f<LEVEL> wrote holds that content,
#     read with debugfs (no mount). A file the operation just after the mark
#     replaced (in flight) may hold the old content or the new one.
#   ext4-check.sh IMAGE LEVEL RECORDING_DIR
# Exit 0 when all holds; else 1, and the last line says what is wrong.
set -uo pipefail
img=${1:?image}
level=${2:?level}
rec=${3:?recording}

out=$(e2fsck -E journal_only -y "$img" 2>&1)
rc=$?
if [ $rc -gt 1 ]; then
	echo "$out" | tail -n 5
	echo "journal recovery: e2fsck -E journal_only exit $rc"
	exit 1
fi
out=$(e2fsck -fn "$img" 2>&1)
rc=$?
if [ $rc != 0 ]; then
	echo "$out" | grep -v -e '^Pass ' -e '^e2fsck ' | head -n 20
	echo "e2fsck -fn exit $rc: $(echo "$out" | grep -v -e '^Pass ' -e '^e2fsck ' | head -n 2 | tr '\n' ' ')"
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ext4-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# path wanted-sha256 alternative-sha256 (or -), for every file acknowledged by f<LEVEL>.
sed -n 's/^op\.\([0-9]*\)=\([^ ]*\) \([0-9a-f]*\)$/\1 \2 \3/p' "$rec/meta.kv" | sort -n |
	awk -v level="$level" '$1 <= level { want[$2] = $3 } $1 == level + 1 { alt[$2] = $3 }
		END { for (p in want) print p, want[p], (p in alt ? alt[p] : "-") }' >"$tmp/expect"
i=0
while read -r path _ _; do
	i=$((i + 1))
	echo "dump $path $tmp/file$i"
done <"$tmp/expect" >"$tmp/cmds"
[ -s "$tmp/cmds" ] && debugfs -f "$tmp/cmds" "$img" >/dev/null 2>&1
# One sha256sum for all files: a process per file costs more than the check.
(cd "$tmp" && sha256sum file* 2>/dev/null) >"$tmp/sums"
awk -v level="$level" 'FILENAME ~ /sums$/ { sub(/^file/, "", $2); got[$2] = $1; next }
	{ i++; if (!(i in got)) { bad = $1 " is missing (acknowledged by f" level ")" }
	  else if (got[i] != $2 && got[i] != $3) { bad = $1 " holds other content than acknowledged by f" level " (sha256 " got[i] ")" } }
	END { if (bad != "") { print bad; exit 1 } }' "$tmp/sums" "$tmp/expect"
