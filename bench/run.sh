#!/usr/bin/env bash
# Runs every benchmark script in bench/ with the build directory. Benchmarks
# print figures measured side by side in one run; they are not tests.
# Usage: bench/run.sh BUILD_DIR
set -euo pipefail
build=$(realpath "${1:-build}")
here=$(cd "$(dirname "$0")" && pwd)
for script in "$here"/*.sh; do
	[ "$(basename "$script")" = run.sh ] && continue
	echo "== $(basename "$script")"
	"$script" "$build"
	echo
done
