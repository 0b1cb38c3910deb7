#!/usr/bin/env bash
# shows: the upstream target replays every committed upstream fixture to its
#   recorded logical image
#
# The committed fixtures must still be what the upstream target makes of
# them: a changed kernel, module or a damaged fixture shows up here before
# it misleads the tests that trust fixtures/upstream/. Also the template for
# holding our own target to the same fixtures (vm_replay_fixtures wbkit ...).
source "$(dirname "$0")/wbkit-lib.inc"

vm_prepare
vm_has_upstream || { echo "skip: $(vm_upstream_why)"; exit 77; }
upstream_fixtures
fixtures_replay_as_recorded upstream
