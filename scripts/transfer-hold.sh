#!/usr/bin/env bash
# Does `admin transfer` hold? Starts a fresh 3-node cluster on loopback (its
# own ports and data dir) with a steady create+fire load (`timemachine bench`
# rounds of ROUND_JOBS jobs due over 10 s, default 300), moves one slot's
# leadership to a node that does not lead it (`admin transfer --wait`),
# then polls /v1/cluster every POLL seconds for HOLD seconds and fails if
# the slot is ever led by another node, or if a callback of the load was
# lost, delivered twice or early (docs/operations.md, "Moving a slot's
# leadership").
#
#   scripts/transfer-hold.sh            # HOLD=300 (five minutes), SLOT=5
#
# Environment: BIN (default bin/timemachine), HOLD (seconds, default 300),
# POLL (seconds, default 5), SLOT (default 5), BASE_PORT (default 18580:
# HTTP BASE_PORT+i, bind BASE_PORT+100+i, serf BASE_PORT+200+i for n1..n3),
# KEEP=1 keeps the data dir.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/timemachine}
HOLD=${HOLD:-300}
POLL=${POLL:-5}
SLOT=${SLOT:-5}
ROUND_JOBS=${ROUND_JOBS:-300}
BASE_PORT=${BASE_PORT:-18580}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/tm-hold.XXXXXX")
PIDS=()

[ -x "$BIN" ] || { echo "transfer-hold.sh: $BIN not found: run \`make build\` first" >&2; exit 1; }

LOADER=""
cleanup() {
  touch "$DIR/stop"
  if [ -n "$LOADER" ]; then pkill -INT -P "$LOADER" 2>/dev/null || true; kill "$LOADER" 2>/dev/null || true; fi
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ "${KEEP:-0}" = 1 ] && echo "data and logs kept in $DIR" || rm -rf "$DIR"
}
trap cleanup EXIT

http() { echo "127.0.0.1:$((BASE_PORT + $1))"; }
joins="127.0.0.1:$((BASE_PORT + 201)),127.0.0.1:$((BASE_PORT + 202)),127.0.0.1:$((BASE_PORT + 203))"
for i in 1 2 3; do
  "$BIN" server --node-id "n$i" --data-dir "$DIR/n$i" --http-addr "$(http $i)" \
    --bind-addr "127.0.0.1:$((BASE_PORT + 100 + i))" --serf-addr "127.0.0.1:$((BASE_PORT + 200 + i))" \
    --join "$joins" --bootstrap-expect 3 >"$DIR/n$i.log" 2>&1 &
  PIDS+=($!)
done
ADDR=$(http 1)
for _ in $(seq 120); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$ADDR/readyz")" = 200 ] && break
  sleep 0.5
done
loader() {
  local r=0
  while [ ! -e "$DIR/stop" ]; do
    r=$((r + 1))
    "$BIN" bench --addr "$ADDR" --collection hold --jobs "$ROUND_JOBS" --window 10s --lead 2s --concurrency 4 \
      --id-prefix "r$r-" --wait 60s --json >"$DIR/load-$r.json" 2>/dev/null || true
  done
}
loader &
LOADER=$!
leader() { curl -sf "http://$ADDR/v1/cluster" | jq -r ".slots[$SLOT].leader"; }
from=$(leader)
to=n1
for n in n1 n2 n3; do [ "$n" != "$from" ] && { to=$n; break; }; done
echo "$(date -u +%H:%M:%S) slot $SLOT led by $from; transferring it to $to"
"$BIN" admin transfer "$SLOT" "$to" --addr "$ADDR" --wait --timeout 60s
start=$(date +%s)
polls=0
while [ $(($(date +%s) - start)) -lt "$HOLD" ]; do
  l=$(leader || echo "?")
  polls=$((polls + 1))
  if [ "$l" != "$to" ]; then
    echo "$(date -u +%H:%M:%S) FAIL: after $(($(date +%s) - start))s slot $SLOT is led by $l, not $to"
    exit 1
  fi
  sleep "$POLL"
done
echo "$(date -u +%H:%M:%S) slot $SLOT stayed led by $to for ${HOLD}s ($polls polls, every ${POLL}s)"
touch "$DIR/stop"
wait "$LOADER" || true
LOADER=""
read -r rounds created fired lost dups early < <(jq -s -r '[length, (map(.jobs_created) | add), (map(.fired) | add),
    (map(.missing) | add), (map(.duplicates) | add), (map(.early) | add)] | @tsv' "$DIR"/load-*.json)
echo "load during the hold: $rounds bench rounds, $created jobs created, $fired fired; lost $lost, duplicate $dups, early $early"
if [ "$lost" != 0 ] || [ "$dups" != 0 ] || [ "$early" != 0 ] || [ "$created" = 0 ]; then
  echo "FAIL: the load lost, repeated or fired early callbacks" >&2
  exit 1
fi
