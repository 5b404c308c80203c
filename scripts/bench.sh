#!/usr/bin/env bash
# The product benchmarks of docs/benchmarks.md, against a fresh single-node
# server started here on loopback. Each scenario prints the report of
# `timemachine bench`. Bounded: every scenario has a fixed job count and the
# bench's own wait timeout; the server is stopped at the end.
#
#   scripts/bench.sh            # all scenarios (a few minutes)
#   scripts/bench.sh fire       # one scenario: create-batch create-single lateness fire burst burst-pipeline fire-only
#                               # route-limit route-batch (route delivery control, issue 11)
#   scripts/bench.sh scale      # 10M pending jobs: RSS, disk, restart time (~5 min, ~2 GB disk)
#   scripts/bench.sh cluster    # the 3-node scenarios (cluster-create-batch ... cluster-fire)
#   scripts/bench.sh cluster-schedules  # issue 11 (c): 10,000 every-1s schedules on 3 nodes
#   scripts/bench.sh cluster-schedules-pipeline  # the same through a route with "pipeline": true
#   SECURE=1 scripts/bench.sh … # the same with everything on: HTTPS and API tokens (an admin token,
#                               # as bench creates its collection); clusters also with peer mTLS and
#                               # a gossip key. Certificates are made here with openssl.
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

SCHEME=http
CURL=(curl -s)
SECURE_FLAGS=()
PEER_FLAGS=()
if [ -n "${SECURE:-}" ]; then
  # A CA and one certificate for 127.0.0.1 (HTTPS and peer TLS alike), an
  # admin token, a gossip key; the client commands read TIMEMACHINE_TOKEN
  # and TIMEMACHINE_CA_CERT. (Not in $DIR/c*: cluster_fresh removes those.)
  PKI=$DIR/pki; mkdir -p "$PKI"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -keyout "$PKI/ca-key.pem" -out "$PKI/ca.pem" -subj "/CN=bench CA" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$PKI/node-key.pem" -out "$PKI/node.csr" -subj "/CN=node" 2>/dev/null
  printf "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n" >"$PKI/node.ext"
  openssl x509 -req -in "$PKI/node.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca-key.pem" -CAcreateserial -days 2 \
    -out "$PKI/node.pem" -extfile "$PKI/node.ext" 2>/dev/null
  "$BIN" token new --role admin --name bench 2>/dev/null >"$PKI/token.txt"
  printf '{"tokens":[%s]}\n' "$(sed -n 2p "$PKI/token.txt")" >"$PKI/auth.json"
  export TIMEMACHINE_TOKEN; TIMEMACHINE_TOKEN=$(sed -n 1p "$PKI/token.txt")
  export TIMEMACHINE_CA_CERT=$PKI/ca.pem
  export TIMEMACHINE_GOSSIP_KEY; TIMEMACHINE_GOSSIP_KEY=$(openssl rand -base64 32)
  SCHEME=https
  CURL=(curl -s --cacert "$PKI/ca.pem" -H "Authorization: Bearer $TIMEMACHINE_TOKEN")
  SECURE_FLAGS=(--auth-file "$PKI/auth.json" --tls-cert "$PKI/node.pem" --tls-key "$PKI/node-key.pem")
  PEER_FLAGS=(--peer-tls-cert "$PKI/node.pem" --peer-tls-key "$PKI/node-key.pem" --peer-tls-ca "$PKI/ca.pem")
fi

SERF=${SERF:-127.0.0.1:17490}
start() {
  "$BIN" server --data-dir "$DIR/data" --http-addr "$HTTP" --bind-addr "$BIND" --serf-addr "$SERF" "${SECURE_FLAGS[@]}" >"$DIR/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do "${CURL[@]}" -f "$SCHEME://$HTTP/readyz" >/dev/null && return 0; sleep 0.05; done
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
      --serf-addr "127.0.0.1:1758$i" --bootstrap-expect 3 "${join[@]}" "${SECURE_FLAGS[@]}" "${PEER_FLAGS[@]}" >"$DIR/c$i.log" 2>&1 &
    CPIDS+=($!)
  done
  for i in 1 2 3; do
    for _ in $(seq 1 300); do "${CURL[@]}" -f "$SCHEME://127.0.0.1:1848$i/readyz" >/dev/null && break; sleep 0.1; done
  done
  # Let leadership spread evenly before measuring.
  for _ in $(seq 1 100); do
    "$BIN" admin status --addr 127.0.0.1:18481 2>/dev/null | awk '$1 ~ /^n[0-9]$/ && $4 != 4 {bad=1} END {exit bad}' && break
    sleep 0.2
  done
  "$BIN" admin status --addr 127.0.0.1:18481 | sed -n '1,7p'
}
# Server CPU (user+system) of processes, in clock ticks: on a shared host
# the rates move with the neighbours' load, CPU per job much less.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
cpu_report() { awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "server cpu %.2f s\n", (b - a) / hz}'; }
cbench() {
  echo; echo "\$ timemachine bench --addr $CADDRS $*"
  local t0; t0=$(ticks "${CPIDS[@]}")
  # A failed clean-up DELETE makes bench exit non-zero; the figures above
  # it stand, so report the servers' CPU anyway (set -e stopped here).
  "$BIN" bench --addr "$CADDRS" "$@" 2>/dev/null || echo "bench exited with status $?"
  cpu_report "$t0" "$(ticks "${CPIDS[@]}")"
}
fresh() { [ -n "$PID" ] && stop; rm -rf "$DIR/data"; start; }
bench() {
  echo; echo "\$ timemachine bench $*"
  local t0; t0=$(ticks "$PID")
  "$BIN" bench --addr "$HTTP" "$@" 2>/dev/null
  cpu_report "$t0" "$(ticks "$PID")"
}

machine() {
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), $(go version | cut -d' ' -f3)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [ -n "${SECURE:-}" ]; then echo "mode: secure (HTTPS, API token; clusters also peer mTLS and gossip key)"; else echo "mode: plain"; fi
}

scenario() {
  case "$1" in
    create-batch) fresh; bench --jobs 500000 --batch 1000 --create-only ;;
    create-single) fresh; bench --jobs 100000 --concurrency 64 --create-only ;;
    lateness) fresh; bench --jobs 60000 --window 30s --batch 1000 --lead 5s ;;
    burst) fresh; bench --jobs 100000 --at-once --batch 1000 --lead 5s ;;
    # the same burst through a route with "pipeline": true (docs/api.md):
    # one callback per job, HTTP/1.1-pipelined
    burst-pipeline) fresh; bench --jobs 100000 --at-once --batch 1000 --lead 5s --pipeline ;;
    fire) fresh; bench --jobs 400000 --window 20s --batch 1000 --lead 5s ;;
    # fire with the creates over well before the first trigger, so the fire
    # rate is not mixed with create traffic (the plain/secure comparison)
    fire-only) fresh; bench --jobs 200000 --window 10s --batch 1000 --lead 15s ;;
    # issue 11 (a): a burst held to a route's rate limit: 100,000 due at
    # once at 5,000/s (default burst 500) should drain in ~19.9 s, none early
    route-limit) fresh; bench --jobs 100000 --at-once --batch 1000 --lead 10s --rate-limit 5000 --wait 60s ;;
    # issue 11 (b): batched delivery (100 jobs a POST) of 1,000,000 jobs due
    # over 10 s on one node: delivered rate and lateness
    route-batch) fresh; bench --jobs 1000000 --window 10s --batch 1000 --lead 90s --batch-max-jobs 100 --batch-max-wait 10ms --wait 60s ;;
    scale)
      fresh
      bench --jobs 10000000 --batch 1000 --create-only --id-prefix scale
      "${CURL[@]}" "$SCHEME://$HTTP/v1/admin/compact" -X POST >/dev/null
      echo "pending: $("${CURL[@]}" "$SCHEME://$HTTP/metrics" | awk '/^timemachine_pending_jobs/{s+=$2} END{print s}')"
      echo "rss_bytes: $("${CURL[@]}" "$SCHEME://$HTTP/metrics" | awk '/^process_resident_memory_bytes/{print $2}')"
      echo "peak rss while loading: $(awk '/VmHWM/{print $2, $3}' "/proc/$PID/status")"
      echo "disk: $(du -sb "$DIR/data" | cut -f1) bytes ($(du -sh "$DIR/data" | cut -f1))"
      stop
      t0=$(date +%s.%N); start; t1=$(date +%s.%N)
      echo "restart to ready: $(echo "$t1 - $t0" | bc) s"
      echo "rss_bytes after restart: $("${CURL[@]}" "$SCHEME://$HTTP/metrics" | awk '/^process_resident_memory_bytes/{print $2}')"
      kill -9 "$PID"; wait "$PID" 2>/dev/null || true; PID=
      t0=$(date +%s.%N); start; t1=$(date +%s.%N)
      echo "kill -9, restart to ready: $(echo "$t1 - $t0" | bc) s"
      echo "pending after kill -9: $("${CURL[@]}" "$SCHEME://$HTTP/metrics" | awk '/^timemachine_pending_jobs/{s+=$2} END{print s}')"
      ;;
    cluster-create-batch) cluster_fresh; cbench --jobs 300000 --batch 1000 --create-only ;;
    cluster-create-single) cluster_fresh; cbench --jobs 30000 --concurrency 64 --create-only; cbench --jobs 30000 --concurrency 64 --create-only ;;
    cluster-lateness) cluster_fresh; cbench --jobs 60000 --window 30s --batch 1000 --lead 5s ;;
    cluster-fire) cluster_fresh; cbench --jobs 150000 --window 10s --batch 1000 --lead 8s ;;
    # issue 11 (c): 10,000 every-1s schedules (10,000 occurrences/s) on
    # three nodes: fires/s, lateness, duplicates, early
    cluster-schedules) cluster_fresh; cbench --schedules 10000 --duration 20s ;;
    # the same, the schedules naming a route with "pipeline": true
    cluster-schedules-pipeline) cluster_fresh; cbench --schedules 10000 --duration 20s --pipeline ;;
    cluster) for c in cluster-create-batch cluster-create-single cluster-lateness cluster-fire; do echo; echo "== $c"; scenario "$c"; done ;;
    *) echo "unknown scenario $1" >&2; exit 2 ;;
  esac
}

machine
if [ $# -eq 0 ]; then set -- create-batch create-single lateness burst fire; fi
for s in "$@"; do echo; echo "== $s"; scenario "$s"; done
