#!/usr/bin/env bash
# The nemesis (`make nemesis`, issue 10): a cluster of real bin/timemachine
# processes under a create/read/replace/delete/fire workload and a fault
# schedule drawn from a printed seed (kill -9, SIGSTOP/SIGCONT, partitions,
# packet loss and delay, clock offsets, SIGTERM, membership changes), then
# the history checkers. Exit 0: no violation; 1: violations (listed, with
# the command that replays the seed); 2: the run could not be carried out.
# It builds nothing: run `make build` first (`make nemesis` does).
# Network faults need root (network namespaces + iptables); without them the
# run falls back to loopback and says which faults it could not cover.
#
#   scripts/nemesis.sh                           # CYCLES=100 NODES=3
#   CYCLES=20 scripts/nemesis.sh
#   SEED=1234 CYCLES=20 scripts/nemesis.sh       # replay a run's schedule
#   FAULTS=kill-leader,partition-one scripts/nemesis.sh
#   OUT=/tmp/nem scripts/nemesis.sh              # keep the run's files there
#   RAFT_LOG_LEVEL=info scripts/nemesis.sh       # raft's elections in the servers' logs
#   CHECK_ONLY=/tmp/nem scripts/nemesis.sh       # re-check a recorded run
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${TIMEMACHINE_BIN:-$PWD/bin/timemachine}
if [ -z "${CHECK_ONLY:-}" ] && [ ! -x "$BIN" ]; then
  echo "nemesis.sh: $BIN not found or not executable: run \`make build\` first" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/nemesis" ./internal/nemesis/cmd/nemesis

if [ -n "${CHECK_ONLY:-}" ]; then
  exec "$tmp/nemesis" -check-only "$CHECK_ONLY"
fi
args=(-bin "$BIN" -nodes "${NODES:-3}" -cycles "${CYCLES:-100}" -faults "${FAULTS:-all}")
[ -n "${SEED:-}" ] && args+=(-seed "$SEED")
[ -n "${OUT:-}" ] && args+=(-out "$OUT")
[ -n "${MAX_HOLD:-}" ] && args+=(-max-hold "$MAX_HOLD")
[ -n "${NETWORK:-}" ] && args+=(-network "$NETWORK")
[ -n "${RAFT_LOG_LEVEL:-}" ] && args+=(-raft-log-level "$RAFT_LOG_LEVEL")
"$tmp/nemesis" "${args[@]}"
