#!/usr/bin/env bash
# The product benchmarks of docs/benchmarks.md, against a fresh single-node
# server started here on loopback. Each scenario prints the report of
# `timemachine bench`. Bounded: every scenario has a fixed job count and the
# bench's own wait timeout; the server is stopped at the end.
#
#   scripts/bench.sh            # all scenarios (a few minutes)
#   scripts/bench.sh fire       # one scenario: create-batch create-single lateness fire burst
#   SCALE=1 scripts/bench.sh scale   # 10M pending jobs: RSS, disk, restart time (~5 min, ~2 GB disk)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/timemachine}
HTTP=${HTTP:-127.0.0.1:18480}
BIND=${BIND:-127.0.0.1:17480}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/tm-bench-XXXXXX")
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT

start() {
  "$BIN" server --data-dir "$DIR/data" --http-addr "$HTTP" --bind-addr "$BIND" >"$DIR/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do curl -sf "http://$HTTP/readyz" >/dev/null && return 0; sleep 0.05; done
  echo "server did not become ready; log:" >&2; cat "$DIR/server.log" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" || true; PID=; }
fresh() { [ -n "$PID" ] && stop; rm -rf "$DIR/data"; start; }
bench() { echo; echo "\$ timemachine bench $*"; "$BIN" bench --addr "$HTTP" "$@" 2>/dev/null; }

machine() {
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(go version | cut -d' ' -f3)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
}

scenario() {
  case "$1" in
    create-batch) fresh; bench --jobs 500000 --batch 1000 --create-only ;;
    create-single) fresh; bench --jobs 100000 --concurrency 64 --create-only ;;
    lateness) fresh; bench --jobs 60000 --window 30s --batch 1000 --lead 5s ;;
    burst) fresh; bench --jobs 100000 --at-once --batch 1000 --lead 5s ;;
    fire) fresh; bench --jobs 400000 --window 20s --batch 1000 --lead 5s ;;
    scale)
      fresh
      bench --jobs 10000000 --batch 1000 --create-only --id-prefix scale
      curl -s "http://$HTTP/v1/admin/compact" -X POST >/dev/null
      echo "pending: $(curl -s "http://$HTTP/metrics" | awk '/^timemachine_pending_jobs/{s+=$2} END{print s}')"
      echo "rss_bytes: $(curl -s "http://$HTTP/metrics" | awk '/^process_resident_memory_bytes/{print $2}')"
      echo "disk: $(du -sb "$DIR/data" | cut -f1) bytes ($(du -sh "$DIR/data" | cut -f1))"
      stop
      t0=$(date +%s.%N); start; t1=$(date +%s.%N)
      echo "restart to ready: $(echo "$t1 - $t0" | bc) s"
      echo "rss_bytes after restart: $(curl -s "http://$HTTP/metrics" | awk '/^process_resident_memory_bytes/{print $2}')"
      ;;
    *) echo "unknown scenario $1" >&2; exit 2 ;;
  esac
}

machine
if [ $# -eq 0 ]; then set -- create-batch create-single lateness burst fire; fi
for s in "$@"; do echo; echo "== $s"; scenario "$s"; done
