#!/usr/bin/env bash
# shows: the committed upstream fixtures replayed by dm-wbkit match what
#   upstream recorded
#
# dm-wbkit replays the committed upstream fixtures (fixtures/upstream/*:
# caches written by dm-writeboost, incl. partial blocks, a wrapped log and a
# superblock record) to the same logical content and log position that the
# upstream target recorded for them.
source "$(dirname "$0")/wbkit-lib.inc"
wbkit_prepare
VM_TIMEOUT=300
upstream_fixtures
command -v zstd >/dev/null || { echo "zstd not installed"; exit 77; }
fixtures_replay_as_recorded wbkit
