#!/usr/bin/env bash
# shows: the upstream target replays every committed upstream fixture to its
#   recorded logical image
#
# The committed fixtures must still be what the upstream target makes of
# them: a changed kernel, module or a damaged fixture shows up here before
# it misleads the tests that trust fixtures/upstream/. Also the template for
# holding our own target to the same fixtures (vm_replay_fixtures wbkit ...).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

vm_prepare
vm_has_upstream || { echo "skip: $(vm_upstream_why)"; exit 77; }
fixtures=("$WBKIT_ROOT"/fixtures/upstream/*/)
[ -d "${fixtures[0]}" ] || { echo "no fixtures under fixtures/upstream"; exit 77; }
fixtures=("${fixtures[@]%/}")

rc=0
vm_replay_fixtures upstream "${fixtures[@]}" || rc=$?
echo "boot+replay of ${#fixtures[@]} fixtures: ${VM_ELAPSED}s"
[ "$rc" = 0 ] || exit 1

failed=0
for i in "${!fixtures[@]}"; do
	vm_check_fixture_replay "$i" "${fixtures[$i]}" || failed=1
done
exit $failed
