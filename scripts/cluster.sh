#!/usr/bin/env bash
# A local 3-node timemachine cluster on loopback, from bin/timemachine
# (run `make build` first; `make cluster` does both).
#
#   scripts/cluster.sh start            # start n1..n3 (those not running), wait until ready
#   scripts/cluster.sh stop             # SIGTERM every node, wait for each to exit
#   scripts/cluster.sh status           # which processes run, then `admin status`
#   scripts/cluster.sh logs [nN] [-f]   # the last lines of every log, or one node's (-f: follow)
#
# Ports (chosen not to clash with `make run`, which uses 8080/7000/7946):
#   n1  HTTP 127.0.0.1:8081  bind 127.0.0.1:7001  serf 127.0.0.1:7947
#   n2  HTTP 127.0.0.1:8082  bind 127.0.0.1:7002  serf 127.0.0.1:7948
#   n3  HTTP 127.0.0.1:8083  bind 127.0.0.1:7003  serf 127.0.0.1:7949
# Data in ./.cluster/nN, logs in ./.cluster/nN.log, pids in ./.cluster/nN.pid.
# The data survives stop/start; remove ./.cluster for a fresh cluster.
#
# Environment: BIN (default bin/timemachine), READY_TIMEOUT (seconds, default
# 60), STOP_TIMEOUT (seconds per node, default 30), LOG_LINES (for logs, default 30).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/timemachine}
DIR=.cluster
NODES=(n1 n2 n3)
READY_TIMEOUT=${READY_TIMEOUT:-60}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}

idx() { echo "${1#n}"; }
http_addr() { echo "127.0.0.1:$((8080 + $(idx "$1")))"; }
bind_addr() { echo "127.0.0.1:$((7000 + $(idx "$1")))"; }
serf_addr() { echo "127.0.0.1:$((7946 + $(idx "$1")))"; }

die() { echo "cluster.sh: $*" >&2; exit 1; }

need_bin() {
  [ -x "$BIN" ] || die "$BIN not found or not executable: run \`make build\` first"
}

# pid_of N prints the pid of node N if its process is running (and really
# is a timemachine server: a stale pid file may name a reused pid).
pid_of() {
  local f="$DIR/$1.pid" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "timemachine server" || return 1
  echo "$pid"
}

# port_busy ADDR: something listens on ADDR's TCP port.
port_busy() {
  (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null
}

start_node() {
  local n=$1 pid joins=()
  if pid=$(pid_of "$n"); then
    echo "$n already running (pid $pid)"
    return 0
  fi
  for m in "${NODES[@]}"; do
    [ "$m" = "$n" ] || joins+=("$(serf_addr "$m")")
  done
  mkdir -p "$DIR/$n"
  echo "=== cluster.sh: start at $(date -u +%Y-%m-%dT%H:%M:%SZ) ===" >>"$DIR/$n.log"
  nohup "$BIN" server \
    --node-id "$n" \
    --data-dir "$DIR/$n" \
    --http-addr "$(http_addr "$n")" \
    --bind-addr "$(bind_addr "$n")" \
    --serf-addr "$(serf_addr "$n")" \
    --join "$(IFS=,; echo "${joins[*]}")" \
    --bootstrap-expect 3 \
    >>"$DIR/$n.log" 2>&1 </dev/null &
  echo $! >"$DIR/$n.pid"
  echo "$n started (pid $!): HTTP $(http_addr "$n"), bind $(bind_addr "$n"), serf $(serf_addr "$n"), data $DIR/$n"
}

readyz() { curl -s -m 2 -o /dev/null -w '%{http_code}' "http://$1/readyz" 2>/dev/null || true; }

cmd_start() {
  need_bin
  mkdir -p "$DIR"
  local running=0
  for n in "${NODES[@]}"; do pid_of "$n" >/dev/null && running=$((running + 1)); done
  if [ "$running" -eq "${#NODES[@]}" ]; then
    echo "the cluster is already running (stop it with: scripts/cluster.sh stop)"
  fi
  # Check every port of the nodes to start before starting any of them.
  for n in "${NODES[@]}"; do
    pid_of "$n" >/dev/null && continue
    for a in "$(http_addr "$n")" "$(bind_addr "$n")" "$(serf_addr "$n")"; do
      if port_busy "$a"; then
        die "$n: $a is already in use by another process (a \`make run\` server, or another cluster?); nothing started"
      fi
    done
  done
  for n in "${NODES[@]}"; do start_node "$n"; done

  echo "waiting (at most ${READY_TIMEOUT}s) until /readyz is 200 on every node..."
  local deadline=$((SECONDS + READY_TIMEOUT)) notready
  while :; do
    notready=()
    for n in "${NODES[@]}"; do
      if ! pid_of "$n" >/dev/null; then
        echo "$n exited; the end of its log ($DIR/$n.log):" >&2
        tail -n 30 "$DIR/$n.log" >&2
        exit 1
      fi
      [ "$(readyz "$(http_addr "$n")")" = 200 ] || notready+=("$n")
    done
    [ "${#notready[@]}" -eq 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "not ready after ${READY_TIMEOUT}s: ${notready[*]}" >&2
      for n in "${notready[@]}"; do
        echo "--- $n: GET /readyz: $(curl -s -m 2 "http://$(http_addr "$n")/readyz" || echo unreachable)" >&2
        tail -n 20 "$DIR/$n.log" >&2
      done
      echo "(the nodes are left running: inspect them, then scripts/cluster.sh stop)" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "ready."
  echo
  echo "\$ $BIN admin status --addr $(http_addr n1)"
  "$BIN" admin status --addr "$(http_addr n1)" || true
}

cmd_stop() {
  local any=0 pids=() names=()
  for n in "${NODES[@]}"; do
    local pid
    if pid=$(pid_of "$n"); then
      any=1
      echo "$n: SIGTERM (pid $pid)"
      kill -TERM "$pid"
      pids+=("$pid")
      names+=("$n")
    else
      rm -f "$DIR/$n.pid"
    fi
  done
  if [ "$any" -eq 0 ]; then
    echo "the cluster is not running"
    return 0
  fi
  local failed=0
  for i in "${!pids[@]}"; do
    local pid=${pids[$i]} n=${names[$i]} deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$n did not exit ${STOP_TIMEOUT}s after SIGTERM; sending SIGKILL (see $DIR/$n.log)" >&2
      kill -KILL "$pid" 2>/dev/null || true
      failed=1
    else
      echo "$n stopped"
    fi
    rm -f "$DIR/$n.pid"
  done
  return "$failed"
}

cmd_status() {
  local addr=""
  for n in "${NODES[@]}"; do
    local pid
    if pid=$(pid_of "$n"); then
      echo "$n running (pid $pid), HTTP $(http_addr "$n"), /readyz $(readyz "$(http_addr "$n")")"
      [ -n "$addr" ] || addr=$(http_addr "$n")
    else
      echo "$n not running"
    fi
  done
  if [ -z "$addr" ]; then
    echo "the cluster is not running (start it with: scripts/cluster.sh start)"
    return 1
  fi
  need_bin
  echo
  echo "\$ $BIN admin status --addr $addr"
  "$BIN" admin status --addr "$addr"
}

cmd_logs() {
  local follow=0 which=()
  for a in "$@"; do
    case "$a" in
      -f|--follow) follow=1 ;;
      n1|n2|n3) which+=("$a") ;;
      *) die "logs: unknown argument $a (want n1, n2, n3 or -f)" ;;
    esac
  done
  [ "${#which[@]}" -gt 0 ] || which=("${NODES[@]}")
  local files=()
  for n in "${which[@]}"; do
    if [ -f "$DIR/$n.log" ]; then files+=("$DIR/$n.log"); else echo "($n: no log yet)"; fi
  done
  [ "${#files[@]}" -gt 0 ] || return 0
  if [ "$follow" -eq 1 ]; then
    exec tail -n "${LOG_LINES:-30}" -F "${files[@]}"
  fi
  for f in "${files[@]}"; do
    echo "==> $f <=="
    tail -n "${LOG_LINES:-30}" "$f"
    echo
  done
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  logs) shift; cmd_logs "$@" ;;
  *)
    echo "usage: scripts/cluster.sh start|stop|status|logs [n1|n2|n3] [-f]" >&2
    exit 2
    ;;
esac
