#!/usr/bin/env bash
# Scale a cluster out and back in under load: 3 → 5 nodes (start n4 and n5,
# `admin rebalance --wait`), then back to 3 (`admin drain --wait` and
# `admin remove` of n5, then of n4), while a steady create+fire load runs.
# Prints each step, the moves, the time each step took to healthy, and at
# the end the jobs created, fired, lost, duplicated and early; exits 1 on
# any lost, duplicate or early callback (docs/operations.md, "Scaling out
# and in"; figures in docs/benchmarks.md).
#
#   scripts/scale.sh                  # or: make scale
#
# Before the load, PENDING jobs (default 20000) due in a day are created, so
# every slot moved carries data. The load is `timemachine bench` in LOADERS
# loops (default 2, started ROUND_WINDOW/LOADERS apart), each round creating
# ROUND_JOBS jobs (default 600, single POSTs, concurrency 4) due over
# ROUND_WINDOW (default 10s) and waiting for every callback; rounds repeat
# until the last step is done, so creates and fires go on during every
# move. Each bench receiver counts deliveries per Idempotency-Key. Between
# steps the script waits SETTLE seconds (default 5) under load.
#
# Environment: BIN (default bin/timemachine), BASE_PORT (default 18880: HTTP
# BASE_PORT+i, bind BASE_PORT+100+i, serf BASE_PORT+200+i for n1..n5),
# PENDING, LOADERS, ROUND_JOBS, ROUND_WINDOW, SETTLE, WAIT_TIMEOUT (per --wait, default 10m),
# KEEP=1 keeps the data dir and logs.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/timemachine}
BASE_PORT=${BASE_PORT:-18880}
PENDING=${PENDING:-20000}
LOADERS=${LOADERS:-2}
ROUND_JOBS=${ROUND_JOBS:-600}
SETTLE=${SETTLE:-5}
ROUND_WINDOW=${ROUND_WINDOW:-10s}
WAIT_TIMEOUT=${WAIT_TIMEOUT:-10m}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/tm-scale.XXXXXX")
declare -A PID
LOAD_PIDS=()

[ -x "$BIN" ] || { echo "scale.sh: $BIN not found: run \`make build\` first" >&2; exit 1; }
command -v jq >/dev/null || { echo "scale.sh: needs jq" >&2; exit 1; }

http() { echo "127.0.0.1:$((BASE_PORT + ${1#n}))"; }
serf() { echo "127.0.0.1:$((BASE_PORT + 200 + ${1#n}))"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
step() { echo; echo "=== $(date -u +%H:%M:%S) $*"; }
run() { echo "\$ timemachine $*"; "$BIN" "$@"; }

cleanup() {
  touch "$DIR/stop"
  for p in "${LOAD_PIDS[@]}"; do pkill -INT -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  for n in "${!PID[@]}"; do kill -TERM "${PID[$n]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "data and logs kept in $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

start_node() { # start_node nN [server flags…]
  local n=$1
  shift
  "$BIN" server --node-id "$n" --data-dir "$DIR/$n" --http-addr "$(http "$n")" \
    --bind-addr "127.0.0.1:$((BASE_PORT + 100 + ${n#n}))" --serf-addr "$(serf "$n")" "$@" >"$DIR/$n.log" 2>&1 &
  PID[$n]=$!
  echo "started $n (pid ${PID[$n]}): HTTP $(http "$n")"
}

wait_until() { # wait_until SECONDS DESCRIPTION COMMAND…
  local limit=$1 what=$2 t0
  shift 2
  t0=$(now)
  until "$@" >/dev/null 2>&1; do
    if awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
      echo "scale.sh: $what: not after ${limit}s" >&2
      exit 1
    fi
    sleep 0.5
  done
}
ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$1/readyz")" = 200 ]; }
alive() { curl -sf "http://$ADDR/v1/cluster" | jq -e --arg n "$1" '.nodes[] | select(.id == $n and .status == "alive")'; }

loader() { # loader K: bench rounds until the stop file appears
  local k=$1 r=0
  sleep "$(awk -v k="$k" -v n="$LOADERS" -v w="${ROUND_WINDOW%s}" 'BEGIN { print (k - 1) * w / n }')"
  while [ ! -e "$DIR/stop" ]; do
    r=$((r + 1))
    "$BIN" bench --addr "$ADDRS3" --collection "scale$k" --jobs "$ROUND_JOBS" --window "$ROUND_WINDOW" \
      --lead 2s --concurrency 4 --id-prefix "l$k-r$r-" --wait 60s --json >"$DIR/load$k-$r.json" 2>"$DIR/load$k-$r.log" || true
  done
}

T_ALL=$(now)
step "start n1, n2, n3 (--bootstrap-expect 3)"
JOIN="$(serf n1),$(serf n2),$(serf n3)"
for n in n1 n2 n3; do start_node "$n" --join "$JOIN" --bootstrap-expect 3; done
ADDR=$(http n1)
ADDRS3="$(http n1),$(http n2),$(http n3)"
for n in n1 n2 n3; do wait_until 60 "$n ready" ready "$(http "$n")"; done
echo "ready after $(since "$T_ALL")s"

step "$PENDING pending jobs, due in a day (data for the moves to carry)"
T=$(now)
"$BIN" bench --addr "$ADDRS3" --collection pending --jobs "$PENDING" --batch 100 --create-only --json >"$DIR/pending.json" 2>"$DIR/pending.log"
echo "created $(jq -r .jobs_created "$DIR/pending.json") in $(since "$T")s"

step "steady load: $LOADERS bench loops, $ROUND_JOBS jobs due over $ROUND_WINDOW per round"
for k in $(seq "$LOADERS"); do
  loader "$k" &
  LOAD_PIDS+=($!)
done
sleep "$SETTLE" # the first rounds are creating and firing

step "scale out: start n4 and n5 (--join, no --bootstrap-expect)"
T=$(now)
for n in n4 n5; do start_node "$n" --join "$JOIN"; done
for n in n4 n5; do wait_until 60 "$n alive in /v1/cluster" alive "$n"; done
echo "n4 and n5 alive in the cluster after $(since "$T")s"
run admin status --addr "$ADDRS3" || true

step "rebalance --wait"
T=$(now)
run admin rebalance --wait --timeout "$WAIT_TIMEOUT" --addr "$ADDRS3" | tee "$DIR/rebalance.out"
REB_S=$(since "$T")
REB_MOVES="$(grep -cE '^[0-9]+ +replica ' "$DIR/rebalance.out" || true) replica moves, $(grep -cE '^[0-9]+ +leader ' "$DIR/rebalance.out" || true) leadership moves"
echo ">>> rebalance 3 → 5: $REB_MOVES, healthy after ${REB_S}s"
run admin status --addr "$ADDRS3"
sleep "$SETTLE"

DRAIN_S=()
for n in n5 n4; do
  step "drain $n --wait"
  T=$(now)
  run admin drain "$n" --wait --timeout "$WAIT_TIMEOUT" --addr "$ADDRS3"
  S=$(since "$T")
  MOVES=$(curl -sf "http://$ADDR/v1/cluster" | jq -r '.moves | if . then "\(.done)/\(.total)" else "?" end')
  echo ">>> drain $n: slots moved $MOVES, healthy after ${S}s"
  step "remove $n"
  T2=$(now)
  run admin remove "$n" --addr "$ADDRS3"
  kill -TERM "${PID[$n]}" && wait "${PID[$n]}" 2>/dev/null || true
  unset "PID[$n]"
  echo ">>> remove $n: done after $(since "$T2")s (process stopped)"
  DRAIN_S+=("$n ${S}s")
  sleep "$SETTLE"
done
run admin status --addr "$ADDRS3"

step "stop the load (the rounds under way finish and wait for their callbacks)"
touch "$DIR/stop"
for p in "${LOAD_PIDS[@]}"; do wait "$p" || true; done
LOAD_PIDS=()

created=0 fired=0 lost=0 dups=0 early=0 errs=0 rounds=0 p99=0
for f in "$DIR"/load*.json; do
  [ -s "$f" ] || continue
  rounds=$((rounds + 1))
  read -r c fi m d e x l < <(jq -r '[.jobs_created, .fired, .missing, .duplicates, .early,
      ((.create_errors // {}) | add // 0), (.lateness_ms.p99 // 0)] | @tsv' "$f")
  created=$((created + c)) fired=$((fired + fi)) lost=$((lost + m)) dups=$((dups + d)) early=$((early + e)) errs=$((errs + x))
  p99=$(awk -v a="$p99" -v b="$l" 'BEGIN { print (b > a) ? b : a }')
done
step "result"
echo "steps: rebalance 3→5 ${REB_S}s ($REB_MOVES); drain ${DRAIN_S[*]}; total $(since "$T_ALL")s"
echo "load: $rounds bench rounds, $created jobs created ($errs creates refused or timed out: not acknowledged, so not counted as lost), $fired fired"
echo "lost $lost, duplicate $dups, early $early; worst round's p99 lateness $(printf '%.0f' "$p99") ms"
if [ "$rounds" -eq 0 ] || [ "$created" -eq 0 ]; then
  echo "FAIL: no load ran" >&2
  exit 1
fi
if [ "$lost" -ne 0 ] || [ "$dups" -ne 0 ] || [ "$early" -ne 0 ]; then
  echo "FAIL: lost, duplicate or early callbacks (reports in $DIR; KEEP=1 keeps them)" >&2
  KEEP=1
  exit 1
fi
echo "OK: nothing lost, nothing twice, nothing early"
