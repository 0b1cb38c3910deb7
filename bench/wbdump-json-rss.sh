#!/usr/bin/env bash
# Peak RSS of `wbdump --metablocks` in text and in JSON mode, side by side in
# one run, on a sparse cache of about 4 million metablocks (every segment
# full, zero data): the JSON document is written as the log is walked, so
# its peak must stay within 1.5x of the text mode's.
# Usage: bench/wbdump-json-rss.sh BUILD_DIR [METABLOCKS] [WORK_DIR]
set -euo pipefail
build=$(realpath "${1:?usage: $0 BUILD_DIR [METABLOCKS] [WORK_DIR]}")
metablocks=${2:-4000000}
work=${3:-$(mktemp -d /var/tmp/wbkit-bench.XXXXXX)}
trap 'rm -rf "$work"' EXIT
wbdump="$build/tools/wbdump/wbdump"

echo "load $(cut -d' ' -f1-3 /proc/loadavg); making a sparse cache of $metablocks metablocks..."
"$build/bench/replay_synth" sparse "$work/cache.img" "$work/backing.img" "$metablocks" >/dev/null
rm -f "$work/backing.img"

peak_kib() { # mode args...: prints the peak RSS in KiB and checks the exit status
	local out="$work/time.$1"
	shift
	/usr/bin/time -f %M -o "$out" "$wbdump" "$work/cache.img" --metablocks "$@" >"$work/stdout" 2>/dev/null || {
		rc=$?
		[ "$rc" -le 1 ] || { echo "wbdump $* failed with $rc" >&2; exit 1; }
	}
	cat "$out"
}
text=$(peak_kib text)
text_lines=$(wc -l <"$work/stdout")
json=$(peak_kib json --json)
json_entries=$(grep -c '"segment_id"' "$work/stdout")
echo "text mode: peak RSS $((text / 1024)) MiB ($text_lines lines)"
echo "json mode: peak RSS $((json / 1024)) MiB ($json_entries metablocks in the document)"
awk -v t="$text" -v j="$json" 'BEGIN { printf "ratio json/text: %.2f (target <= 1.50)\n", j / t }'
