#!/usr/bin/env bash
# Runs one step of `make test` (a make target) and says how long it took, so
# a CI log shows where the 60-minute budget goes. The times are also kept in
# $WBKIT_STEP_TIMES, which `make test` prints whole at its end.
# Usage: make-step.sh TARGET [MAKE ARGS...]
set -uo pipefail
target=$1
start=$SECONDS
rc=0
"${MAKE:-make}" "$@" || rc=$?
took=$((SECONDS - start))
line=$(printf '%-22s %5d s  %s' "$target" "$took" "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")
echo "make test: $line"
if [ -n "${WBKIT_STEP_TIMES:-}" ]; then
	mkdir -p "$(dirname "$WBKIT_STEP_TIMES")"
	echo "$line" >>"$WBKIT_STEP_TIMES"
fi
exit $rc
