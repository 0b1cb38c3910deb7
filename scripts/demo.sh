#!/usr/bin/env bash
# The main job on the bundled demo cache: dump and validate it, look up one
# backing sector, then show what an offline replay would write.
set -euo pipefail
build=$(realpath "${1:-build}")
root=$(cd "$(dirname "$0")/.." && pwd)
work="$build/demo"
mkdir -p "$work"
zstd -q -d -f "$root/fixtures/synthetic/demo/cache.img.zst" -o "$work/cache.img"
zstd -q -d -f "$root/fixtures/synthetic/demo/backing.img.zst" -o "$work/backing.img"

echo "== wbdump $work/cache.img --backing $work/backing.img"
status=0
"$build/tools/wbdump/wbdump" "$work/cache.img" --backing "$work/backing.img" || status=$?
echo "(exit status $status: 0 no damage, 1 damage found)"
echo
# The first metablock of the newest segment in the log: a sector worth looking up.
sector=$("$build/tools/wbdump/wbdump" "$work/cache.img" --json --metablocks |
	/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["metablocks"][-1]["sector"])')
echo "== wbdump --block $sector: where the newest copy of backing sector $sector lives"
"$build/tools/wbdump/wbdump" "$work/cache.img" --block "$sector" | sed -n '/^backing sector/,$p' | head -8
if [ -x "$build/tools/wbreplay/wbreplay" ]; then
	echo
	echo "== wbreplay --dry-run: what replaying the log onto the backing image would write"
	"$build/tools/wbreplay/wbreplay" --cache "$work/cache.img" --backing "$work/backing.img" --dry-run
fi
