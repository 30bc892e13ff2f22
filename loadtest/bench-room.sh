#!/usr/bin/env bash
# The waiting room's hot paths against GET /healthz, in one run (issue 21:
# a status poll >= 0.8 of /healthz, a join >= 0.5).
#
#   bash loadtest/bench-room.sh                      # -c64 and -c256, 10 s a row
#   DURATION=5s CONNS=64 bash loadtest/bench-room.sh
#   ROOM_USERS=100000 bash loadtest/bench-room.sh    # then the harness's room mode, 100,000 users
#
# Starts ./cmd/seckill on this machine's MariaDB and Redis (rate limits
# off, a database and a key prefix of its own) and measures with wrk -t2,
# for each CONNS:
#   healthz    GET /healthz, the ceiling of the run;
#   join       POST .../queue, a new user every request, on a room before
#              its opening (the crowd arriving early);
#   poll-pre   GET .../queue/{ticket} round POLL_TICKETS tickets, before
#              the opening;
#   poll-open  the same after the opening, the tickets drawn and waiting
#              (one admission a second: the line barely moves).
# Checks every row: every answer a 200, and after a join row the room
# holds exactly one ticket per 200 (plus those wrk never read). Prints the
# ratios with their verdicts as Markdown. With ROOM_USERS > 0 it then runs
# go run ./loadtest -mode room against the same process (ROOM_LATE,
# ROOM_STOCK, ROOM_RATE) and prints its verdict. Drops its database and
# keys. Needs wrk, jq and curl; exit 1 if a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-64 256}
PORT=${PORT:-18420}
POLL_TICKETS=${POLL_TICKETS:-2000}
ROOM_USERS=${ROOM_USERS:-0}
ROOM_LATE=${ROOM_LATE:-$((ROOM_USERS / 10))}
ROOM_STOCK=${ROOM_STOCK:-$((ROOM_USERS / 10))}
ROOM_RATE=${ROOM_RATE:-1000}
MYSQL=${MYSQL:-mariadb -h 127.0.0.1 -uroot}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
run=$(date +%s)-$$
DB=seckill_room_${run//-/_}
PREFIX=benchroom-$run
TOKEN=benchroom-token-$run-0123456789
OUT=${OUT:-/tmp/bench-room-$run}
B=http://127.0.0.1:$PORT
mkdir -p "$OUT"

NAME=bench-room
# shellcheck source=loadtest/bench-lib.sh
. loadtest/bench-lib.sh
need wrk
need jq

svc=
cleanup() {
  if [ -n "$svc" ]; then kill "$svc" 2>/dev/null || true; wait "$svc" 2>/dev/null || true; fi
  $MYSQL -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
  redis-cli -u "$REDIS_URL" --scan --pattern "$PREFIX:*" 2>/dev/null | xargs -r -n 500 redis-cli -u "$REDIS_URL" unlink >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "bench-room: building" >&2
go build -o "$OUT/seckill" ./cmd/seckill
go build -o "$OUT/loadtest" ./loadtest
$MYSQL -e "CREATE DATABASE $DB"
DSN="root@tcp(127.0.0.1:3306)/$DB?parseTime=true"
SECKILL_ADDR=127.0.0.1:$PORT SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_MYSQL_DSN=$DSN SECKILL_REDIS_URL=$REDIS_URL \
  SECKILL_KEY_PREFIX=$PREFIX SECKILL_RATE_USER=0 SECKILL_RATE_IP=0 SECKILL_ROOM_RATE_IP=0 SECKILL_LOG_LEVEL=error \
  "$OUT/seckill" >"$OUT/service.log" 2>&1 &
svc=$!
for _ in $(seq 1 100); do curl -fs "$B/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "$B/readyz" >/dev/null || { echo "bench-room: the service did not start; see $OUT/service.log" >&2; exit 1; }

# room_item NAME STOCK RATE STARTS_IN_SECONDS -> id
room_item() {
  local starts; starts=$(date -u -d "@$(($(date +%s) + $4))" +%Y-%m-%dT%H:%M:%SZ)
  admin -X POST "$B/api/v1/admin/items" -d "{\"name\":\"$1\",\"stock\":$2,\"starts_at\":\"$starts\",
    \"waiting_room\":{\"admit_per_second\":$3,\"pass_ttl_seconds\":60}}" | jq -er .id
}
# fill ITEM N PREFIX FILE: N users join ITEM; their tickets go to FILE.
fill() {
  seq 1 "$2" | xargs -P 16 -I{} curl -fs -X POST "$B/api/v1/items/$1/queue" -d "{\"user_id\":\"$3-{}\"}" |
    jq -r .ticket >"$4"
  [ "$(grep -c . "$4")" -eq "$2" ] || { echo "bench-room: $2 joins to item $1 gave $(grep -c . "$4") tickets" >&2; exit 1; }
}
room_field() { admin "$B/api/v1/admin/items/$1" | jq -r ".waiting_room.$2"; }

echo "bench-room: $POLL_TICKETS users join two rooms for the polls" >&2
# A room holds at most max(1000, 50 x the units left) tickets (the sybil
# bound, SECKILL_ROOM_MAX_TICKETS): the stocks are set so it never binds.
poll_stock=$((POLL_TICKETS / 50 + 1))
pre_item=$(room_item poll-pre "$poll_stock" 1 86400)
open_item=$(room_item poll-open "$poll_stock" 1 20)
fill "$open_item" "$POLL_TICKETS" open "$OUT/tickets-open.txt"
fill "$pre_item" "$POLL_TICKETS" pre "$OUT/tickets-pre.txt"

declare -A rps p99 split
failures=0
# redis_cpu: the Redis server's CPU seconds (0 when it is not on this machine).
redis_pid=$(redis-cli -u "$REDIS_URL" info server 2>/dev/null | awk -F: '/^process_id:/ { print $2 + 0 }')
redis_cpu() { if [ -n "$redis_pid" ] && [ -r "/proc/$redis_pid/stat" ]; then cpu_of "$redis_pid"; else echo 0; fi; }
# row LABEL CONNS URL [room.lua args...]: one wrk run; records req/s, p99
# and the CPU µs per request of the service, Redis and wrk, and checks
# that every answer was a 200.
row() {
  local label=$1 c=$2 url=$3; shift 3
  local f="$OUT/$label-c$c.txt" s0 r0 t TIMEFORMAT='%U %S'
  s0=$(cpu_of "$svc"); r0=$(redis_cpu)
  if [ $# -gt 0 ]; then
    t=$( { time wrk -t2 -c"$c" -d"$DURATION" --latency -s loadtest/wrk/room.lua "$url" -- "$@" >"$f" 2>&1; } 2>&1)
    local s; s=$(sed -n 's/^wrk-summary //p' "$f")
    if [ "$(jq '.non2xx + .connect + .read + .write + .timeout' <<<"$s")" != 0 ]; then
      echo "  FAIL $label -c$c: answers other than 200: $s" >&2; failures=$((failures + 1))
    fi
  else
    t=$( { time wrk -t2 -c"$c" -d"$DURATION" --latency "$url" >"$f" 2>&1; } 2>&1)
  fi
  rps[$label,$c]=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$f")
  p99[$label,$c]=$(awk '$1 == "99%" { print $2 }' "$f")
  split[$label,$c]=$(awk -v n="$(awk '/ requests in / { print $1 }' "$f")" -v s="$(cpu_of "$svc") $s0" \
    -v r="$(redis_cpu) $r0" -v w="$t" 'BEGIN {
      split(s, S, " "); split(r, R, " "); split(w, W, " ")
      a = (S[1] - S[2]) / n * 1e6; b = (R[1] - R[2]) / n * 1e6; e = (W[1] + W[2]) / n * 1e6
      printf "%.1f | %.1f | %.1f | %.1f", a, b, e, a + b + e }')
  echo "  $label -c$c: ${rps[$label,$c]} req/s, p99 ${p99[$label,$c]}; CPU µs a request (service | Redis | wrk | total): ${split[$label,$c]}" >&2
}

for c in $CONNS; do
  echo "bench-room: -c$c, $DURATION a row" >&2
  row healthz "$c" "$B/healthz"
  join_item=$(room_item "join-c$c" 1000000 1 86400) # a million tickets before the bound
  row join "$c" "$B" join "$join_item" "j$c"
  ok=$(( $(sed -n 's/^wrk-summary //p' "$OUT/join-c$c.txt" | jq '.requests - .non2xx') ))
  tickets=$(room_field "$join_item" tickets)
  # A join wrk did not count is one still in flight when it stopped (at most one a connection).
  if [ "$tickets" -lt "$ok" ] || [ "$tickets" -gt $((ok + c)) ]; then
    echo "  FAIL join -c$c: the room holds $tickets tickets for $ok 200 answers" >&2; failures=$((failures + 1))
  else
    echo "  ok join -c$c: $tickets tickets for $ok 200 answers, one per user" >&2
  fi
  row poll-pre "$c" "$B" poll "$pre_item" "$OUT/tickets-pre.txt"
  for _ in $(seq 1 300); do [ "$(room_field "$open_item" phase)" = open ] && break; sleep 0.1; done
  [ "$(room_field "$open_item" phase)" = open ] || { echo "bench-room: item $open_item did not open" >&2; exit 1; }
  row poll-open "$c" "$B" poll "$open_item" "$OUT/tickets-open.txt"
done
waiting=$(room_field "$open_item" waiting)
echo "  poll-open: $waiting of $POLL_TICKETS tickets still waiting at the end" >&2

echo
echo "Machine: $(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg); wrk -t2, $DURATION a row, the client on the same cores; $(git rev-parse --short HEAD)."
echo
echo "| path | conns | req/s | p99 | ratio to /healthz | target | verdict |"
echo "|---|---|---|---|---|---|---|"
for c in $CONNS; do
  base=${rps[healthz,$c]}
  echo "| \`GET /healthz\` | $c | $base | ${p99[healthz,$c]} | 1 | | |"
  for r in "poll-pre:status poll, before the opening:0.80" "poll-open:status poll, waiting after the opening:0.80" "join:join (a new user each):0.50"; do
    IFS=: read -r label name target <<<"$r"
    awk -v n="$name" -v c="$c" -v x="${rps[$label,$c]}" -v p="${p99[$label,$c]}" -v b="$base" -v t="$target" 'BEGIN {
      r = x / b; v = (r >= t) ? "met" : sprintf("**not met** (%d%% short)", (1 - r / t) * 100 + 0.5)
      printf "| %s | %s | %s | %s | %.2f | ≥ %.2f | %s |\n", n, c, x, p, r, t, v }'
  done
done

echo
echo "Where the CPU went, µs a request (the processes share the cores; once they are busy, the"
echo "ratio of the totals is the throughput ratio a quiet machine would show):"
echo
echo "| path | conns | service | Redis | wrk | total | /healthz total ÷ this |"
echo "|---|---|---|---|---|---|---|"
for c in $CONNS; do
  for label in healthz poll-pre poll-open join; do
    awk -v l="$label" -v c="$c" -v s="${split[$label,$c]}" -v h="${split[healthz,$c]}" 'BEGIN {
      n = split(s, S, " [|] "); split(h, H, " [|] ")
      printf "| %s | %s | %s | %.2f |\n", l, c, s, H[n] / S[n] }'
  done
done

if [ "$ROOM_USERS" -gt 0 ]; then
  echo "bench-room: the harness, $ROOM_USERS users before the opening + $ROOM_LATE after, stock $ROOM_STOCK, R $ROOM_RATE" >&2
  if ! "$OUT/loadtest" -url "$B" -token "$TOKEN" -dsn "$DSN" -mode room -strategies lua -users "$ROOM_USERS" \
    -room-late "$ROOM_LATE" -stock "$ROOM_STOCK" -room-rate "$ROOM_RATE" -c 128 -json "$OUT/room.json" >"$OUT/room.txt"; then
    failures=$((failures + 1))
  fi
  echo
  sed -n '/^room\|^  [A-Z]\{4\}  R\|^RESULT/p' "$OUT/room.txt"
fi
echo "bench-room: raw outputs in $OUT" >&2
[ "$failures" -eq 0 ] || { echo "bench-room: $failures check(s) failed" >&2; exit 1; }
