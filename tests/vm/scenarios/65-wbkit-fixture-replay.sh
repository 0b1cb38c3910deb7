#!/usr/bin/env bash
# shows: the committed upstream fixtures replayed by dm-wbkit match what
#   upstream recorded
#
# dm-wbkit replays the committed upstream fixtures (fixtures/upstream/*:
# caches written by dm-writeboost, incl. partial blocks, a wrapped log and a
# superblock record) to the same logical content and log position that the
# upstream target recorded for them.
set -euo pipefail
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=300
fixtures=("$WBKIT_ROOT"/fixtures/upstream/*/)
[ -d "${fixtures[0]}" ] || { echo "no fixtures under fixtures/upstream"; exit 77; }
command -v zstd >/dev/null || { echo "zstd not installed"; exit 77; }
fixtures=("${fixtures[@]%/}")

rc=0
vm_replay_fixtures wbkit "${fixtures[@]}" || rc=$?
echo "boot+replay of ${#fixtures[@]} fixtures: ${VM_ELAPSED}s"
[ "$rc" = 0 ] || exit 1

failed=0
for i in "${!fixtures[@]}"; do
	vm_check_fixture_replay "$i" "${fixtures[$i]}" || failed=1
done
exit $failed
