#!/usr/bin/env bash
# The soak (`make soak`): TIMEMACHINE_SOAK_CYCLES (default 20) cycles of
# kill -9 / restart of a node of a 3-node cluster of bin/timemachine under
# a steady create-and-fire workload; at the end every acknowledged job must
# have been delivered at least once and none early (e2e/soak_test.go).
# It builds nothing: run `make build` first (`make soak` does).
#
#   scripts/soak.sh
#   TIMEMACHINE_SOAK_CYCLES=5 scripts/soak.sh
#   TIMEMACHINE_SOAK_SEED=1234 scripts/soak.sh        # repeat a run's random choices
#   TIMEMACHINE_E2E_LOGDIR=/tmp/soak-logs scripts/soak.sh   # keep the node logs
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${TIMEMACHINE_BIN:-$PWD/bin/timemachine}
if [ ! -x "$BIN" ]; then
  echo "soak.sh: $BIN not found or not executable: run \`make build\` first" >&2
  exit 1
fi
export TIMEMACHINE_BIN=$BIN
export TIMEMACHINE_SOAK=1
export TIMEMACHINE_SOAK_CYCLES=${TIMEMACHINE_SOAK_CYCLES:-20}
if [ -n "${TIMEMACHINE_SOAK_SEED:-}" ]; then export TIMEMACHINE_SOAK_SEED; fi

echo "soak: $TIMEMACHINE_SOAK_CYCLES kill -9/restart cycles against a 3-node cluster of $BIN ($("$BIN" version 2>/dev/null || echo 'version unknown'))"
exec go test -count=1 -timeout 60m -run '^TestSoak$' -v ./e2e/
