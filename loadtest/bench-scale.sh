#!/usr/bin/env bash
# The unit costs behind docs/SCALING.md, measured on this machine in one run.
#
#   bash loadtest/bench-scale.sh                 # 10 s a row
#   DURATION=5s bash loadtest/bench-scale.sh
#
# Starts the local 3-master Redis Cluster (scripts/redis-cluster.sh, left
# running if it was), one ./cmd/seckill in cluster mode on MariaDB (a
# database and a key prefix of its own, rate limits off), and measures with
# wrk -t2 -c64:
#   1. admission of one hot lua item with buckets K=1 and K=3: orders/s,
#      Redis CPU per admission, and each master's share of the Redis CPU
#      (target for K=3: every master within 20 % of the mean);
#   2. lua-async admission (K=1): orders/s, Redis and service CPU per order;
#   3. the writers: a lua-async queue filled with the API's writers off,
#      then drained by one `seckill worker`: orders persisted per second
#      on one hot row, and MariaDB CPU per 100k orders;
#   4. the orders table: bytes per order (data + indexes).
# Every item is checked against the database (sold = orders <= stock, one
# order per user). Prints Markdown; raw output stays in OUT. Exit 1 if an
# invariant fails. Needs wrk and jq (apt-get installs them when run as root),
# redis-server/redis-cli, MariaDB (root, no password) on 127.0.0.1. Only
# loopback is loaded, and every wrk run stops after DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
PORT=${PORT:-18720}
ADMIN_PORT=${ADMIN_PORT:-18721}
WORKER_ADMIN_PORT=${WORKER_ADMIN_PORT:-18722}
QUEUED=${QUEUED:-60000}
MYSQL=${MYSQL:-mariadb -h 127.0.0.1 -uroot}
run=$(date +%s)-$$
DB=seckill_scale_${run//-/_}
PREFIX=scale-$run
TOKEN=scale-token-$run-0123456789
OUT=${OUT:-/tmp/bench-scale-$run}
B=http://127.0.0.1:$PORT
mkdir -p "$OUT"

NAME=bench-scale
# shellcheck source=loadtest/bench-lib.sh
. loadtest/bench-lib.sh
need wrk
need jq

echo "bench-scale: starting the local Redis Cluster" >&2
bash scripts/redis-cluster.sh start >&2
REDIS_URL=$(bash scripts/redis-cluster.sh url)
mapfile -t MASTERS < <(redis-cli -c -u "${REDIS_URL%%\?*}" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "@"); print a[1] }' | sort)
[ "${#MASTERS[@]}" -ge 3 ] || { echo "bench-scale: want 3 masters, the cluster has ${#MASTERS[@]}" >&2; exit 1; }

svc=
wrk_pid=
cleanup() {
  for p in $svc $wrk_pid; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  $MYSQL -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
  for m in "${MASTERS[@]}"; do
    redis-cli -h "${m%:*}" -p "${m#*:}" --scan --pattern "$PREFIX:*" 2>/dev/null |
      xargs -r -n 1 redis-cli -h "${m%:*}" -p "${m#*:}" unlink >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT

echo "bench-scale: building" >&2
go build -o "$OUT/seckill" ./cmd/seckill
$MYSQL -e "CREATE DATABASE $DB"
DSN="root@tcp(127.0.0.1:3306)/$DB?parseTime=true"
env_common=(SECKILL_REDIS_MODE=cluster SECKILL_REDIS_URL=$REDIS_URL SECKILL_MYSQL_DSN=$DSN
  SECKILL_KEY_PREFIX=$PREFIX SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_RATE_USER=0 SECKILL_RATE_IP=0 SECKILL_LOG_LEVEL=error)

start_service() { # writers
  env "${env_common[@]}" SECKILL_ADDR=127.0.0.1:$PORT SECKILL_WRITERS="$1" \
    "$OUT/seckill" >>"$OUT/service.log" 2>&1 &
  svc=$!
  for _ in $(seq 1 100); do curl -fs "$B/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "bench-scale: the service did not start; see $OUT/service.log" >&2; exit 1
}
stop_service() { kill "$svc"; wait "$svc" 2>/dev/null || true; svc=; }

new_item() { # name stock strategy buckets -> id
  admin -X POST "$B/api/v1/admin/items" \
    -d "{\"name\":\"$1\",\"stock\":$2,\"strategy\":\"$3\",\"buckets\":$4}" | jq -r .id
}
redis_cpu() { # host:port -> used_cpu_sys + used_cpu_user of that node
  redis-cli -h "${1%:*}" -p "${1#*:}" info cpu | tr -d '\r' |
    awk -F: '$1 == "used_cpu_sys" || $1 == "used_cpu_user" { s += $2 } END { printf "%.3f", s }'
}
masters_cpu() { for m in "${MASTERS[@]}"; do redis_cpu "$m"; echo; done; }
failures=0
check() { # label item
  read -r stock sold orders users < <($MYSQL -N -e "SELECT i.stock, i.sold, COUNT(o.id), COUNT(DISTINCT o.user_id)
    FROM $DB.items i LEFT JOIN $DB.orders o ON o.item_id = i.id WHERE i.id = $2 GROUP BY i.id")
  if [ "$sold" -le "$stock" ] && [ "$sold" -eq "$orders" ] && [ "$orders" -eq "$users" ]; then
    echo "  ok $1 item $2: $orders orders = sold <= stock $stock, one per user" >&2
  else
    echo "  FAIL $1 item $2: stock $stock, sold $sold, orders $orders, users $users" >&2; failures=$((failures + 1))
  fi
  orders_of[$1]=$orders
}
declare -A rps p99 orders_of share spread redis_us svc_us

# wrk_row label item users: wrk on the item, with each master's Redis CPU,
# the service's and MariaDB's CPU measured around it.
wrk_row() {
  local label=$1 item=$2 f="$OUT/$1.txt"
  mapfile -t before < <(masters_cpu)
  local s0 d0; s0=$(cpu_of "$svc"); d0=$(db_cpu)
  wrk -t2 -c"$CONNS" -d"$DURATION" --latency -s loadtest/wrk/orders.lua "$B" -- "$item" "$3" >"$f" 2>&1
  mapfile -t after < <(masters_cpu)
  local s1 d1; s1=$(cpu_of "$svc"); d1=$(db_cpu)
  rps[$label]=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$f")
  p99[$label]=$(awk '$1 == "99%" { print $2 }' "$f")
  local used=() total=0 i
  for i in "${!MASTERS[@]}"; do
    used[i]=$(awk -v a="${before[i]}" -v b="${after[i]}" 'BEGIN { printf "%.3f", b - a }')
    total=$(awk -v t="$total" -v u="${used[i]}" 'BEGIN { printf "%.3f", t + u }')
  done
  share[$label]=""
  spread[$label]=0
  for i in "${!MASTERS[@]}"; do
    local pct dev
    pct=$(awk -v u="${used[i]}" -v t="$total" 'BEGIN { printf "%.0f", (t > 0 ? 100 * u / t : 0) }')
    dev=$(awk -v u="${used[i]}" -v t="$total" -v n="${#MASTERS[@]}" 'BEGIN { m = t / n; d = (m > 0 ? 100 * (u - m) / m : 0); printf "%.0f", (d < 0 ? -d : d) }')
    share[$label]+="${share[$label]:+ / }${used[i]} s ($pct %)"
    [ "$dev" -gt "${spread[$label]}" ] && spread[$label]=$dev
  done
  echo "  $label: ${rps[$label]} req/s, p99 ${p99[$label]}; Redis CPU per master ${share[$label]}" >&2
  echo "$total" >"$OUT/$label.redis"
  echo "$s0 $s1 $d0 $d1" >"$OUT/$label.cpu"
}
per_order_us() { # label what(redis|svc) -> µs of CPU per order
  local n=${orders_of[$1]}
  if [ "$2" = redis ]; then
    awk -v t="$(cat "$OUT/$1.redis")" -v n="$n" 'BEGIN { printf "%.1f", (n > 0 ? t / n * 1e6 : 0) }'
  else
    read -r s0 s1 _ _ <"$OUT/$1.cpu"
    awk -v a="$s0" -v b="$s1" -v n="$n" 'BEGIN { printf "%.1f", (n > 0 ? (b - a) / n * 1e6 : 0) }'
  fi
}

big=10000000
start_service 2
echo "bench-scale: admission, $DURATION a row, wrk -t2 -c$CONNS" >&2
for k in 1 3; do
  item=$(new_item "lua-k$k" $big lua $k)
  wrk_row "lua-k$k" "$item" "u-k$k"
  check "lua-k$k" "$item"
done
item=$(new_item "lua-async" $big lua-async 1)
wrk_row lua-async "$item" "u-async"
drain "$item" 300
check lua-async "$item"

echo "bench-scale: the writers: $QUEUED orders queued with no writer, then one worker drains them" >&2
stop_service
start_service 0
queued=$(new_item "queued" "$QUEUED" lua-async 1)
wrk -t2 -c"$CONNS" -d60s -s loadtest/wrk/orders.lua "$B" -- "$queued" "q" >"$OUT/queue-fill.txt" 2>&1 &
wrk_pid=$!
for _ in $(seq 1 600); do
  q=$(admin "$B/api/v1/admin/items/$queued" | jq '.queue.queued // 0')
  [ "$q" -ge "$QUEUED" ] && break
  sleep 0.1
done
kill "$wrk_pid" 2>/dev/null || true; wait "$wrk_pid" 2>/dev/null || true; wrk_pid=
q=$(admin "$B/api/v1/admin/items/$queued" | jq '.queue.queued // 0')
echo "  $q orders queued" >&2
d0=$(db_cpu)
t0=$(date +%s.%N)
env "${env_common[@]}" SECKILL_WRITERS=2 SECKILL_ADMIN_ADDR=127.0.0.1:$WORKER_ADMIN_PORT \
  "$OUT/seckill" worker >"$OUT/worker.log" 2>&1 &
wk=$!
drain "$queued" 300
t1=$(date +%s.%N)
d1=$(db_cpu)
kill "$wk"; wait "$wk" 2>/dev/null || true
check queued "$queued"
persist_rate=$(awk -v n="${orders_of[queued]}" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
persist_cpu=$(awk -v n="${orders_of[queued]}" -v a="$d0" -v b="$d1" 'BEGIN { printf "%.2f", (b - a) / n * 100000 }')
echo "  drained ${orders_of[queued]} orders in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s (worker start included): $persist_rate orders/s" >&2

$MYSQL -N -e "ANALYZE TABLE $DB.orders" >/dev/null
read -r rows bytes < <($MYSQL -N -e "SELECT COUNT(*), (SELECT data_length + index_length FROM information_schema.tables
  WHERE table_schema = '$DB' AND table_name = 'orders') FROM $DB.orders")
per_row=$(awk -v b="$bytes" -v r="$rows" 'BEGIN { printf "%.0f", (r > 0 ? b / r : 0) }')

{
  echo "### $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD)"
  echo
  echo "Machine: $(nproc) cores shared by wrk, the service, MariaDB and three Redis masters; load average at the end $(awk '{print $1, $2, $3}' /proc/loadavg). wrk -t2 -c$CONNS, $DURATION a row."
  echo
  echo '| row | orders/s | p99 | Redis CPU per order | service CPU per order | Redis CPU per master (share) | most off the mean |'
  echo '|---|---|---|---|---|---|---|'
  for l in lua-k1 lua-k3 lua-async; do
    echo "| $l | ${rps[$l]} | ${p99[$l]} | $(per_order_us "$l" redis) µs | $(per_order_us "$l" svc) µs | ${share[$l]} | ${spread[$l]} % |"
  done
  echo
  echo "Writers: one \`seckill worker\` (2 writers) drained ${orders_of[queued]} queued orders of one item at $persist_rate orders/s (worker start included), MariaDB CPU $persist_cpu s per 100k orders."
  echo
  echo "Orders table: $rows rows, $bytes bytes of data and indexes: about $per_row bytes per order."
  echo
  echo "Invariants (every item against the database): $([ $failures = 0 ] && echo PASS || echo "FAIL ($failures)")."
} | tee "$OUT/scale.md"
echo "bench-scale: raw output in $OUT" >&2
[ $failures = 0 ]
