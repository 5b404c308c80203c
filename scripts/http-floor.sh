#!/usr/bin/env bash
# The floor under a single create (issue 13): `timemachine bench
# --create-only` against internal/httpfloor, a server that answers as a node
# would and stores nothing, with the same clients and jobs as
# scripts/vs-asynq.sh create. Prints the rate and the CPU per job of each
# side for -mode nop (a fixed answer) and -mode json (decode + encode).
#   scripts/http-floor.sh               # 100,000 creates, 64 clients, both modes
#   JOBS=30000 RUNS=3 scripts/http-floor.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/timemachine}
JOBS=${JOBS:-100000}
RUNS=${RUNS:-1}
[ -x "$BIN" ] || { echo "$BIN missing: make build first" >&2; exit 2; }
DIR=$(mktemp -d)
trap 'kill "${SP:-}" 2>/dev/null || true; rm -rf "$DIR"' EXIT
go build -o "$DIR/httpfloor" ./internal/httpfloor
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
echo "machine: $(nproc) CPUs, $(uname -sr); date: $(date -u +%FT%TZ); commit: $(git rev-parse --short HEAD 2>/dev/null || echo -)"
echo "| mode | creates/s | bench CPU per job | server CPU per job |"
echo "|---|---|---|---|"
for run in $(seq "$RUNS"); do
  for mode in nop json; do
    port=$((28900 + RANDOM % 90))
    "$DIR/httpfloor" -addr "127.0.0.1:$port" -mode "$mode" & SP=$!
    for _ in $(seq 50); do curl -s -o /dev/null "127.0.0.1:$port" && break; sleep 0.1; done
    t0=$(ticks "$SP")
    /usr/bin/time -f "%U %S" -o "$DIR/bench.time" "$BIN" bench --addr "127.0.0.1:$port" --jobs "$JOBS" \
      --concurrency 64 --create-only --json >"$DIR/bench.json" 2>"$DIR/bench.log"
    t1=$(ticks "$SP")
    kill "$SP"; wait "$SP" 2>/dev/null || true
    python3 - "$mode" "$t0" "$t1" "$DIR" "$(getconf CLK_TCK)" <<'PY'
import json, sys
mode, t0, t1, d, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
r = json.load(open(d + "/bench.json"))
u, s = map(float, open(d + "/bench.time").read().split())
n = r["jobs_created"]
print("| %s | %.1fk/s | %.1f µs | %.1f µs |" % (mode, r["create_rate"] / 1000, (u + s) * 1e6 / n, (t1 - t0) / hz * 1e6 / n))
PY
  done
done
