#!/usr/bin/env bash
# Idle cost per slot: start a fresh loopback cluster (3 nodes unless NODES
# says otherwise) with --slots N, time how long until every node is ready
# and every slot has a leader, then measure IDLE seconds of doing nothing:
# CPU from /proc/<pid>/stat (utime + stime of the servers, so other load on
# the machine does not count), RSS and threads from /proc/<pid>/status, and
# what each node wrote through write(2) from /proc/<pid>/io (wchar: at idle
# the node connections' frames — raft heartbeats, liveness pings — and
# serf's TCP exchanges; serf's UDP gossip is not counted) beside what reached
# storage (write_bytes, page-cache writeback: it should stay near 0).
#
#   scripts/density.sh 12 128 256 1024     # one line per slot count
#   NODES=5 scripts/density.sh 12 256      # five nodes (RF 3)
#
# Environment: NODES (1-9, default 3; RF is min(3, NODES)), BIN (default
# bin/timemachine), IDLE (seconds, default 60),
# SETTLE (seconds to wait after ready before measuring, default 10),
# PORT_BASE (default 17100: HTTP base+1..3, bind base+11..13, serf
# base+21..23), READY_TIMEOUT (default 120), KEEP=1 keeps the data dir,
# PPROF=1 serves pprof on base+31..33 and saves a heap profile of n1 to
# $OUT/heap-N.pb.gz before stopping, OUT (default /tmp/density).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/timemachine}
IDLE=${IDLE:-60}
SETTLE=${SETTLE:-10}
PORT_BASE=${PORT_BASE:-17100}
READY_TIMEOUT=${READY_TIMEOUT:-120}
OUT=${OUT:-/tmp/density}
[ -x "$BIN" ] || { echo "density.sh: $BIN not found: run make build" >&2; exit 1; }
[ $# -gt 0 ] || set -- 12 128 256 1024
mkdir -p "$OUT"
HZ=$(getconf CLK_TCK)
COUNT=${NODES:-3}
case "$COUNT" in [1-9]) ;; *) echo "density.sh: NODES must be 1-9, not $COUNT" >&2; exit 2 ;; esac
NODES=($(seq 1 "$COUNT"))
PIDS=()

cpu_ticks() { # utime+stime of pid
  awk '{print $14+$15}' "/proc/$1/stat"
}
rss_mb() {
  awk '/^VmRSS:/ {printf "%d", $2/1024}' "/proc/$1/status"
}
threads() {
  awk '/^Threads:/ {print $2}' "/proc/$1/status"
}
io_field() { # pid field: a counter of /proc/<pid>/io (0 if unreadable)
  awk -v f="$2:" '$1 == f {print $2; found=1} END {if (!found) print 0}' "/proc/$1/io" 2>/dev/null || echo 0
}

stop_all() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] || continue
    for _ in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  PIDS=()
}
trap stop_all EXIT

# leaders_ok HTTP: every slot of /v1/cluster has a leader.
leaders_ok() {
  curl -s -m 5 "http://$1/v1/cluster" 2>/dev/null | python3 -c '
import json,sys
try:
    c=json.load(sys.stdin)
except Exception:
    sys.exit(1)
s=c.get("slots") or []
n=c.get("slot_count",0)
ok=len(s)==n and n>0 and all(x.get("leader") for x in s)
sys.exit(0 if ok else 1)'
}

printf "%-6s %-8s %-10s %-16s %-16s %-10s %-16s %-10s %s\n" slots ready_s cpu_pct cpu_pct_node rss_mb_nodes threads wchar_kBps_node disk_kBps loadavg
for N in "$@"; do
  DATA=$(mktemp -d "$OUT/data-$N.XXXX")
  PIDS=()
  t0=$(date +%s.%N)
  for i in "${NODES[@]}"; do
    joins=()
    for j in "${NODES[@]}"; do [ "$j" = "$i" ] || joins+=("127.0.0.1:$((PORT_BASE + 20 + j))"); done
    extra=()
    [ ${#joins[@]} -gt 0 ] && extra+=(--join "$(IFS=,; echo "${joins[*]}")")
    [ "${PPROF:-}" = 1 ] && extra+=(--pprof-addr "127.0.0.1:$((PORT_BASE + 30 + i))")
    "$BIN" server --node-id "n$i" --data-dir "$DATA/n$i" \
      --http-addr "127.0.0.1:$((PORT_BASE + i))" --bind-addr "127.0.0.1:$((PORT_BASE + 10 + i))" \
      --serf-addr "127.0.0.1:$((PORT_BASE + 20 + i))" \
      --bootstrap-expect "$COUNT" --slots "$N" "${extra[@]}" >"$DATA/n$i.log" 2>&1 </dev/null &
    PIDS+=($!)
  done
  deadline=$((SECONDS + READY_TIMEOUT))
  while :; do
    ok=1
    for i in "${NODES[@]}"; do
      code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$((PORT_BASE + i))/readyz" 2>/dev/null || true)
      [ "$code" = 200 ] || { ok=0; break; }
    done
    [ $ok = 1 ] && leaders_ok "127.0.0.1:$((PORT_BASE + 1))" && break
    if [ $SECONDS -ge $deadline ]; then echo "slots=$N: not ready after ${READY_TIMEOUT}s" >&2; tail -5 "$DATA"/n1.log >&2; break; fi
    sleep 0.2
  done
  ready=$(echo "$(date +%s.%N) - $t0" | bc)
  sleep "$SETTLE"
  declare -a c0=() w0=() b0=()
  for k in "${!PIDS[@]}"; do
    c0[k]=$(cpu_ticks "${PIDS[k]}")
    w0[k]=$(io_field "${PIDS[k]}" wchar)
    b0[k]=$(io_field "${PIDS[k]}" write_bytes)
  done
  s0=$(date +%s.%N)
  sleep "$IDLE"
  s1=$(date +%s.%N)
  total=0; disk=0; per=(); rss=(); thr=(); wr=()
  for k in "${!PIDS[@]}"; do
    d=$(( $(cpu_ticks "${PIDS[k]}") - c0[k] ))
    total=$((total + d))
    per+=("$(echo "scale=1; 100 * $d / $HZ / ($s1 - $s0)" | bc)")
    rss+=("$(rss_mb "${PIDS[k]}")")
    thr+=("$(threads "${PIDS[k]}")")
    wr+=("$(echo "scale=1; ($(io_field "${PIDS[k]}" wchar) - ${w0[k]}) / 1024 / ($s1 - $s0)" | bc)")
    disk=$((disk + $(io_field "${PIDS[k]}" write_bytes) - b0[k]))
  done
  pct=$(echo "scale=1; 100 * $total / $HZ / ($s1 - $s0)" | bc)
  dkb=$(echo "scale=1; $disk / 1024 / ($s1 - $s0)" | bc)
  if [ "${PPROF:-}" = 1 ]; then
    curl -s -m 30 -o "$OUT/heap-$N.pb.gz" "http://127.0.0.1:$((PORT_BASE + 31))/debug/pprof/heap" || true
    curl -s -m 30 -o "$OUT/goroutine-$N.txt" "http://127.0.0.1:$((PORT_BASE + 31))/debug/pprof/goroutine?debug=1" || true
    curl -s -m 60 -o "$OUT/cpu-$N.pb.gz" "http://127.0.0.1:$((PORT_BASE + 31))/debug/pprof/profile?seconds=20" || true
  fi
  printf "%-6s %-8.1f %-10s %-16s %-16s %-10s %-16s %-10s %s\n" "$N" "$ready" "$pct" "$(IFS=/; echo "${per[*]}")" "$(IFS=/; echo "${rss[*]}")" "$(IFS=/; echo "${thr[*]}")" "$(IFS=/; echo "${wr[*]}")" "$dkb" "$(cut -d' ' -f1-3 /proc/loadavg)"
  stop_all
  [ "${KEEP:-}" = 1 ] || rm -rf "$DATA"
done
