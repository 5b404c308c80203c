#!/usr/bin/env bash
# Issue 13's side-by-side comparison: the same workloads against asynq +
# Redis and against a fresh single-node `timemachine server`, in one run on
# this machine, printed as one table (docs/benchmarks.md, "timemachine vs
# asynq"). Everything listens on loopback; every count and wait is bounded;
# everything started here is stopped at the end.
#
#   scripts/vs-asynq.sh                 # create, one job per request, 64 clients
#   scripts/vs-asynq.sh create timers   # also 100k over 10 s, 40k over 20 s, 100k at one instant
#   INSTALL=1 scripts/vs-asynq.sh       # apt-get install -y redis-server first when it is missing
#   JOBS=30000 scripts/vs-asynq.sh      # fewer creates (default 100000)
#   SMALL=1 scripts/vs-asynq.sh timers  # the timer workloads with 1/20 of the jobs (a quick check)
#   PIPELINE=1 scripts/vs-asynq.sh timers  # timemachine's callbacks through a pipelined route
#
# Redis runs as asynq is usually deployed for durability: appendonly yes,
# appendfsync everysec (an acknowledged task can be lost in the last second
# of a crash). timemachine acknowledges a create only after its raft entry is
# fsynced, and keeps that here.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/timemachine}
JOBS=${JOBS:-100000}
DIV=1; [ -n "${SMALL:-}" ] && DIV=20
T100=$((100000 / DIV)); T40=$((40000 / DIV))
DIR=$(mktemp -d "${TMPDIR:-/tmp}/tm-vsasynq-XXXXXX")
RPID=
TPID=
cleanup() {
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
  [ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT

if ! command -v redis-server >/dev/null; then
  if [ -n "${INSTALL:-}" ]; then
    apt-get install -y redis-server >&2
  else
    echo "redis-server is not installed; run with INSTALL=1 to apt-get install it" >&2; exit 2
  fi
fi
[ -x "$BIN" ] || { echo "$BIN missing: make build first" >&2; exit 2; }
(cd tools/vsasynq && go build -o "$DIR/vsasynq" .)

# A free loopback port: bind to 0 and read what the kernel gave.
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

RPORT=$(freeport)
mkdir -p "$DIR/redis"
redis-server --bind 127.0.0.1 --port "$RPORT" --dir "$DIR/redis" --save '' \
  --appendonly yes --appendfsync everysec --daemonize no --logfile "$DIR/redis.log" &
RPID=$!
for _ in $(seq 1 100); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
redis-cli -p "$RPORT" ping >/dev/null || { echo "redis did not start"; cat "$DIR/redis.log"; exit 1; }

HTTP=127.0.0.1:$(freeport)
BIND=127.0.0.1:$(freeport)
SERF=127.0.0.1:$(freeport)
tm_fresh() {
  if [ -n "$TPID" ]; then kill "$TPID"; wait "$TPID" || true; TPID=; fi
  rm -rf "$DIR/tm"
  "$BIN" server --data-dir "$DIR/tm" --http-addr "$HTTP" --bind-addr "$BIND" --serf-addr "$SERF" >"$DIR/tm.log" 2>&1 &
  TPID=$!
  for _ in $(seq 1 200); do curl -sf "http://$HTTP/readyz" >/dev/null && return 0; sleep 0.05; done
  echo "timemachine did not become ready; log:" >&2; cat "$DIR/tm.log" >&2; exit 1
}
asynq_fresh() { redis-cli -p "$RPORT" flushall >/dev/null; }

N=0
ARGS=()
CPU=()
TCK=$(getconf CLK_TCK)
# ticks PID: the process's CPU time (user + system) in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# cpuline SIDE JSON CLIENTTIME SERVERTICKS: CPU seconds of the load
# generator and of the server for one workload, and µs per job created.
cpuline() {
  python3 - "$@" "$TCK" <<'PY'
import json, sys
side, js, ct, st, tck = sys.argv[1:6]
n = json.load(open(js)).get("jobs_created", 0)
u, s = (float(x) for x in open(ct).read().split()[-2:])
srv = float(st) / float(tck)
per = (u + s + srv) / n * 1e6 if n else 0
print(f"| {side} | {n} | {u + s:.2f} s | {srv:.2f} s | {per:.0f} µs |")
PY
}
# side runs one workload on both sides: $1 = vsasynq subcommand and flags,
# $2 = timemachine bench flags. Each side starts from an empty store. The
# CPU time of both processes of each side (load generator, server) is
# recorded for the create workload.
side() {
  N=$((N + 1))
  asynq_fresh
  echo "== asynq: vsasynq $1  (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  local t0
  t0=$(ticks "$RPID")
  # shellcheck disable=SC2086
  timeout 300 /usr/bin/time -f "%U %S" -o "$DIR/a$N.time" "$DIR/vsasynq" $1 --redis "127.0.0.1:$RPORT" --json >"$DIR/a$N.json"
  CPU+=("$(cpuline "asynq: $1" "$DIR/a$N.json" "$DIR/a$N.time" $(($(ticks "$RPID") - t0)))")
  ARGS+=("asynq=$DIR/a$N.json")
  tm_fresh
  echo "== timemachine: timemachine bench $2  (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  t0=$(ticks "$TPID")
  # shellcheck disable=SC2086
  timeout 300 /usr/bin/time -f "%U %S" -o "$DIR/t$N.time" "$BIN" bench --addr "$HTTP" $2 --json >"$DIR/t$N.json" 2>"$DIR/t$N.log" ||
    { echo "timemachine bench failed:" >&2; tail -5 "$DIR/t$N.log" >&2; exit 1; }
  CPU+=("$(cpuline "timemachine: bench $2" "$DIR/t$N.json" "$DIR/t$N.time" $(($(ticks "$TPID") - t0)))")
  ARGS+=("timemachine=$DIR/t$N.json")
}

echo "machine: $(nproc) CPUs, $(uname -sr), $(redis-server --version | cut -d' ' -f1-3), asynq $(cd tools/vsasynq && go list -m -f '{{.Version}}' github.com/hibiken/asynq)"
echo "date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short HEAD)  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "redis: appendonly yes, appendfsync everysec (asynq's usual durable setup); asynq server: 100 workers, 100 ms poll"
echo "timemachine: one node, acknowledges after the raft entry is fsynced"
# PIPELINE=1: timemachine's timers go through a route with "pipeline": true
# (one callback per job, HTTP/1.1-pipelined; docs/api.md).
PIPE=${PIPELINE:+--pipeline}
if [ -n "$PIPE" ]; then echo "timemachine timers: through a pipelined route (--pipeline)"; fi
for w in "${@:-create}"; do
  case "$w" in
    create) side "create --jobs $JOBS --concurrency 64" "--jobs $JOBS --concurrency 64 --create-only" ;;
    timers)
      # Leads long enough for asynq's one-by-one enqueues to finish before
      # the first due time (both sides get the same lead).
      side "timers --jobs $T100 --window 10s --lead 10s" "--jobs $T100 --window 10s --batch 1000 --lead 10s $PIPE"
      side "timers --jobs $T40 --window 20s --lead 10s" "--jobs $T40 --window 20s --batch 1000 --lead 10s $PIPE"
      side "timers --jobs $T100 --at-once --lead 15s" "--jobs $T100 --at-once --batch 1000 --lead 15s $PIPE" ;;
    *) echo "unknown workload $w (create, timers)" >&2; exit 2 ;;
  esac
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
"$DIR/vsasynq" table "${ARGS[@]}"
echo
echo "CPU time per workload: load generator (vsasynq: enqueuers, and for timers asynq's workers and the receiver; timemachine bench: creators and receiver) and server (redis-server; timemachine server), on the same cores:"
echo "| side: workload | jobs created | load generator | server | CPU per job |"
echo "|---|---|---|---|---|"
printf '%s\n' "${CPU[@]}"
