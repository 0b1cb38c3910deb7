#!/usr/bin/env bash
# Runs the kernel's checkpatch.pl on the module sources (kmod/).
#
#   scripts/check-kmod-style.sh [CACHE_DIR]     (default: build/checkpatch)
#
# checkpatch.pl ships inside Debian's linux-source-6.1 tarball
# (/usr/src/linux-source-6.1.tar.xz, scripts/install-deps.sh installs it).
# Only checkpatch.pl and the data files it reads are extracted, once, into
# CACHE_DIR; a newer tarball replaces them.
#
# Flags: --no-tree (an out-of-tree module: no kernel tree to look things up
# in), --file (whole files, not patches), --strict (the CHECK level that
# subsystem maintainers apply too). Ignored:
#   LONG_LINE_STRING  a --strict CHECK on log and error strings over 100
#                     columns; the kernel's coding style says never to break
#                     user-visible strings, so that grep finds them.
# Exit 0 when clean, 1 on any finding, 3 when checkpatch cannot be set up.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${1:-$root/build/checkpatch}
tarball=$(ls /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$tarball" ]; then
	echo "check-kmod-style: no /usr/src/linux-source-*.tar.xz (apt-get install linux-source-6.1)" >&2
	exit 3
fi

stamp=$cache/.source
if [ ! -f "$cache/scripts/checkpatch.pl" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$tarball $(stat -c %Y "$tarball")" ]; then
	rm -rf "$cache"
	mkdir -p "$cache"
	top=$(basename "$tarball" .tar.xz)
	tar -xJf "$tarball" -C "$cache" --strip-components=1 \
		"$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" \
		"$top/scripts/const_structs.checkpatch" ||
		{ echo "check-kmod-style: cannot extract checkpatch.pl from $tarball" >&2; exit 3; }
	echo "$tarball $(stat -c %Y "$tarball")" >"$stamp"
fi

cd "$root"
# The module's own sources; kbuild's generated dm-wbkit.mod.c is not one.
files=(kmod/dm-wbkit*.h kmod/dm-wbkit-*.c)
perl "$cache/scripts/checkpatch.pl" --no-tree --file --strict --terse --show-types \
	--ignore LONG_LINE_STRING "${files[@]}" >"$cache/report.txt" 2>&1 || {
	grep -v '^total: 0 errors, 0 warnings, 0 checks' "$cache/report.txt"
	echo "check-kmod-style: checkpatch.pl reports findings in kmod/" >&2
	exit 1
}
echo "check-kmod-style: ${#files[@]} files clean (checkpatch.pl from $(basename "$tarball"))"
