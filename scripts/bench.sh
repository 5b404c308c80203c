#!/usr/bin/env bash
# The product benchmarks of docs/benchmarks.md, against a fresh single-node
# server started here on loopback. Each scenario prints the report of
# `timemachine bench`. Bounded: every scenario has a fixed job count and the
# bench's own wait timeout; the server is stopped at the end.
#
#   scripts/bench.sh            # all scenarios (a few minutes)
#   scripts/bench.sh fire       # one scenario: create-batch create-single lateness fire burst
#   scripts/bench.sh scale      # 10M pending jobs: RSS, disk, restart time (~5 min, ~2 GB disk)
#   scripts/bench.sh cluster    # the 3-node scenarios (cluster-create-batch ... cluster-fire)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/timemachine}
HTTP=${HTTP:-127.0.0.1:18480}
BIND=${BIND:-127.0.0.1:17480}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/tm-bench-XXXXXX")
PID=
CPIDS=()
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  for p in "${CPIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${CPIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$DIR"
}
trap cleanup EXIT

SERF=${SERF:-127.0.0.1:17490}
start() {
  "$BIN" server --data-dir "$DIR/data" --http-addr "$HTTP" --bind-addr "$BIND" --serf-addr "$SERF" >"$DIR/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do curl -sf "http://$HTTP/readyz" >/dev/null && return 0; sleep 0.05; done
  echo "server did not become ready; log:" >&2; cat "$DIR/server.log" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" || true; PID=; }

# A 3-node cluster on loopback (replication factor 3), every node in this
# machine: ports 1848x (HTTP), 1748x (internal), 1758x (gossip).
CADDRS=127.0.0.1:18481,127.0.0.1:18482,127.0.0.1:18483
cluster_stop() {
  for p in "${CPIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${CPIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  CPIDS=()
}
cluster_fresh() {
  [ -n "$PID" ] && stop
  cluster_stop
  rm -rf "$DIR"/c*
  for i in 1 2 3; do
    join=(); [ "$i" -gt 1 ] && join=(--join 127.0.0.1:17581)
    "$BIN" server --node-id "n$i" --data-dir "$DIR/c$i" --http-addr "127.0.0.1:1848$i" --bind-addr "127.0.0.1:1748$i" \
      --serf-addr "127.0.0.1:1758$i" --bootstrap-expect 3 "${join[@]}" >"$DIR/c$i.log" 2>&1 &
    CPIDS+=($!)
  done
  for i in 1 2 3; do
    for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:1848$i/readyz" >/dev/null && break; sleep 0.1; done
  done
  # Let leadership spread evenly before measuring.
  for _ in $(seq 1 100); do
    "$BIN" admin status --addr 127.0.0.1:18481 2>/dev/null | awk '$1 ~ /^n[0-9]$/ && $4 != 4 {bad=1} END {exit bad}' && break
    sleep 0.2
  done
  "$BIN" admin status --addr 127.0.0.1:18481 | sed -n '1,7p'
}
cbench() { echo; echo "\$ timemachine bench --addr $CADDRS $*"; "$BIN" bench --addr "$CADDRS" "$@" 2>/dev/null; }
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
      echo "peak rss while loading: $(awk '/VmHWM/{print $2, $3}' "/proc/$PID/status")"
      echo "disk: $(du -sb "$DIR/data" | cut -f1) bytes ($(du -sh "$DIR/data" | cut -f1))"
      stop
      t0=$(date +%s.%N); start; t1=$(date +%s.%N)
      echo "restart to ready: $(echo "$t1 - $t0" | bc) s"
      echo "rss_bytes after restart: $(curl -s "http://$HTTP/metrics" | awk '/^process_resident_memory_bytes/{print $2}')"
      kill -9 "$PID"; wait "$PID" 2>/dev/null || true; PID=
      t0=$(date +%s.%N); start; t1=$(date +%s.%N)
      echo "kill -9, restart to ready: $(echo "$t1 - $t0" | bc) s"
      echo "pending after kill -9: $(curl -s "http://$HTTP/metrics" | awk '/^timemachine_pending_jobs/{s+=$2} END{print s}')"
      ;;
    cluster-create-batch) cluster_fresh; cbench --jobs 300000 --batch 1000 --create-only ;;
    cluster-create-single) cluster_fresh; cbench --jobs 30000 --concurrency 64 --create-only; cbench --jobs 30000 --concurrency 64 --create-only ;;
    cluster-lateness) cluster_fresh; cbench --jobs 60000 --window 30s --batch 1000 --lead 5s ;;
    cluster-fire) cluster_fresh; cbench --jobs 150000 --window 10s --batch 1000 --lead 8s ;;
    cluster) for c in cluster-create-batch cluster-create-single cluster-lateness cluster-fire; do echo; echo "== $c"; scenario "$c"; done ;;
    *) echo "unknown scenario $1" >&2; exit 2 ;;
  esac
}

machine
if [ $# -eq 0 ]; then set -- create-batch create-single lateness burst fire; fi
for s in "$@"; do echo; echo "== $s"; scenario "$s"; done
