#!/usr/bin/env bash
# One hot item, K = 1 against K buckets (gate buckets, or locks and fences,
# or queues, and bucket rows), every strategy, in one run (issue 22):
#
#   bash loadtest/bench-buckets.sh                      # lua, lock, lua-async; K = 1 and 4; -c64 and -c256; 10 s a row
#   BUCKETS="1 4 8" CONNS="64" DURATION=5s bash loadtest/bench-buckets.sh
#   STRATEGIES=lock bash loadtest/bench-buckets.sh      # one strategy
#   FLOOR= bash loadtest/bench-buckets.sh               # no database floor
#
# Starts ./cmd/seckill on this machine's MariaDB and single Redis (rate
# limits off, a database and a key prefix of its own), and for each
# concurrency, strategy and K creates an item of 10,000,000 units with that
# many buckets and runs wrk -t2 of new buyers against it
# (loadtest/wrk/orders.lua), after a GET /healthz row as the baseline. Each
# row records the answers/s and p99 wrk saw, the orders written per second
# (from the start of wrk until the last order is in the table: for
# lua-async, until its queue drained, the writers' drain), orders per
# COMMIT and MariaDB CPU per order, and checks the database against what
# wrk saw: sold (the bucket rows' sum for K > 1) equals the orders, never
# above stock, one order per user, each bucket row's sold within its stock,
# and every 2xx an order. Right after each row, the database floor runs
# the same strategy's transactions with the same K at the same concurrency
# with no HTTP and no Redis (loadtest/dbcost -floor -buckets K, DURATION),
# and the row's orders/s is printed as a fraction of it. Exit 1 if an
# invariant fails. Needs wrk and jq; cleans up after itself.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-64 256}
BUCKETS=${BUCKETS:-1 4}
STRATEGIES=${STRATEGIES:-${STRATEGY:-lua lock lua-async}}
for s in $STRATEGIES; do
  case $s in lua | lock | lua-async) ;; *) echo "bench-buckets: unknown strategy $s (lua, lock, lua-async)" >&2; exit 2 ;; esac
done
FLOOR=${FLOOR-1}
PORT=${PORT:-18730}
MYSQL=${MYSQL:-mariadb -h 127.0.0.1 -uroot}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
run=$(date +%s)-$$
DB=seckill_buckets_${run//-/_}
PREFIX=buckets-$run
TOKEN=buckets-token-$run-0123456789
OUT=${OUT:-/tmp/bench-buckets-$run}
B=http://127.0.0.1:$PORT
mkdir -p "$OUT"

NAME=bench-buckets
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

echo "$NAME: building" >&2
go build -o "$OUT/seckill" ./cmd/seckill
go build -o "$OUT/dbcost" ./loadtest/dbcost
$MYSQL -e "CREATE DATABASE $DB"
SECKILL_ADDR=127.0.0.1:$PORT SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_MYSQL_DSN="root@tcp(127.0.0.1:3306)/$DB?parseTime=true" \
  SECKILL_REDIS_URL=$REDIS_URL SECKILL_KEY_PREFIX=$PREFIX SECKILL_RATE_USER=0 SECKILL_RATE_IP=0 SECKILL_LOG_LEVEL=error \
  "$OUT/seckill" >"$OUT/service.log" 2>&1 &
svc=$!
for _ in $(seq 1 100); do curl -fs "$B/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "$B/readyz" >/dev/null || { echo "$NAME: the service did not start; see $OUT/service.log" >&2; exit 1; }

db_commits() { $MYSQL -N -e "SHOW GLOBAL STATUS LIKE 'Com_commit'" | awk '{ print $2 }'; }
failures=0
declare -A rps p99 per_commit cpu100k rate floor_rate floor_commit frac
big=10000000
# floor S K C: the strategy's own transactions, K bucket rows, C buyers (or,
# for lua-async, the writers draining a full queue), no HTTP, no Redis.
floor() {
  local f="$OUT/floor-$1-k$2-c$3.md"
  "$OUT/dbcost" -floor -strategies "$1" -conns "$3" -buckets "$2" -duration "$DURATION" >"$f"
  read -r floor_rate[$1,$2,$3] floor_commit[$1,$2,$3] < <(awk -F' *[|] *' '$3 ~ /^[0-9]+$/ { print $5, $6 }' "$f")
}
for c in $CONNS; do
  wrk -t2 -c"$c" -d"$DURATION" --latency "$B/healthz" >"$OUT/healthz-c$c.txt" 2>&1
  rps[healthz,$c]=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$OUT/healthz-c$c.txt")
  p99[healthz,$c]=$(awk '$1 == "99%" { print $2 }' "$OUT/healthz-c$c.txt")
  echo "  /healthz -c$c: ${rps[healthz,$c]} req/s, p99 ${p99[healthz,$c]}" >&2
  for st in $STRATEGIES; do
    for k in $BUCKETS; do
      item=$(admin -X POST "$B/api/v1/admin/items" -d "{\"name\":\"hot-$st-k$k-c$c\",\"stock\":$big,\"strategy\":\"$st\",\"buckets\":$k}" | jq -r .id) || item=
      [ -n "$item" ] && [ "$item" != null ] || { echo "$NAME: could not create a $st item with $k buckets" >&2; exit 1; }
      r=$st,$k,$c f="$OUT/$st-k$k-c$c.txt"
      m0=$(db_cpu); k0=$(db_commits); t0=$(date +%s.%N)
      wrk -t2 -c"$c" -d"$DURATION" --latency -s loadtest/wrk/orders.lua "$B" -- "$item" "u-$st-k$k-c$c" >"$f" 2>&1
      if [ "$st" = lua-async ]; then drain "$item"; fi
      t1=$(date +%s.%N); m1=$(db_cpu); k1=$(db_commits)
      rps[$r]=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$f")
      p99[$r]=$(awk '$1 == "99%" { print $2 }' "$f")
      read -r stock sold orders users < <($MYSQL -N -e "SELECT i.stock,
          CASE WHEN i.buckets > 1 THEN (SELECT SUM(s.sold) FROM $DB.item_stock s WHERE s.item_id = i.id) ELSE i.sold END,
          (SELECT COUNT(*) FROM $DB.orders o WHERE o.item_id = i.id), (SELECT COUNT(DISTINCT o.user_id) FROM $DB.orders o WHERE o.item_id = i.id)
        FROM $DB.items i WHERE i.id = $item")
      bad_rows=$($MYSQL -N -e "SELECT COUNT(*) FROM $DB.item_stock WHERE item_id = $item AND (sold > stock OR sold < 0)")
      s=$(sed -n 's/^wrk-summary //p' "$f")
      ok2xx=$(jq '.requests - .non2xx' <<<"$s"); lost=$(jq '.timeout + .read + .write' <<<"$s")
      why=""
      [ "$sold" -le "$stock" ] || why+=" sold $sold > stock $stock;"
      [ "$sold" -eq "$orders" ] || why+=" sold $sold != orders $orders;"
      [ "$orders" -eq "$users" ] || why+=" $orders orders for $users users;"
      [ "$bad_rows" -eq 0 ] || why+=" $bad_rows bucket rows outside their stock;"
      if [ "$orders" -lt "$ok2xx" ] || [ "$orders" -gt $((ok2xx + lost + c)) ]; then why+=" $orders orders for $ok2xx 2xx answers;"; fi
      if [ -n "$why" ]; then echo "  FAIL $st K=$k -c$c item $item:$why" >&2; failures=$((failures + 1)); fi
      rate[$r]=$(awk -v n="$orders" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
      per_commit[$r]=$(awk -v a="$k0" -v b="$k1" -v n="$orders" 'BEGIN { if (b > a) printf "%.1f", n / (b - a); else print "n/a" }')
      cpu100k[$r]=$(awk -v a="$m0" -v b="$m1" -v n="$orders" 'BEGIN { if (n > 0) printf "%.1f", (b - a) / n * 100000; else print "n/a" }')
      frac[$r]=n/a floor_rate[$r]=n/a floor_commit[$r]=n/a
      if [ -n "$FLOOR" ]; then
        floor "$st" "$k" "$c"
        frac[$r]=$(awk -v a="${rate[$r]}" -v b="${floor_rate[$r]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
      fi
      echo "  $st K=$k -c$c: ${rps[$r]} answers/s, p99 ${p99[$r]}, ${rate[$r]} orders written/s (floor ${floor_rate[$r]}: ${frac[$r]}), ${per_commit[$r]} per COMMIT, MariaDB ${cpu100k[$r]} CPU s per 100k orders${why:+ (FAIL)}" >&2
    done
  done
done
{
  echo "### $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --abbrev-ref HEAD) $(git rev-parse --short HEAD)"
  echo
  echo "Machine: $(nproc) cores, load average at the end $(awk '{print $1, $2, $3}' /proc/loadavg); wrk -t2, $DURATION a row, the client on the same cores; one item of $big units a row, new buyers only. Orders written/s: from the start of wrk until the last order is in the table (lua-async: until its queue drained). Floor: \`dbcost -floor -buckets K\` right after the row, $DURATION."
  echo
  echo '| strategy | K | conns | answers/s | p99 | orders written/s | floor orders/s | fraction of the floor | orders per COMMIT (floor) | MariaDB CPU s per 100k orders | /healthz req/s (p99) |'
  echo '|---|---|---|---|---|---|---|---|---|---|---|'
  for c in $CONNS; do
    for st in $STRATEGIES; do
      for k in $BUCKETS; do
        r=$st,$k,$c
        echo "| $st | $k | $c | ${rps[$r]} | ${p99[$r]} | ${rate[$r]} | ${floor_rate[$r]} | ${frac[$r]} | ${per_commit[$r]} (${floor_commit[$r]}) | ${cpu100k[$r]} | ${rps[healthz,$c]} (${p99[healthz,$c]}) |"
      done
    done
  done
  echo
  echo "Invariants (database vs wrk, every row): $([ $failures = 0 ] && echo PASS || echo "FAIL ($failures)")."
} | tee "$OUT/buckets.md"
echo "$NAME: raw output in $OUT" >&2
[ $failures = 0 ]
