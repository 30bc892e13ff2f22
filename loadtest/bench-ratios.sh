#!/usr/bin/env bash
# Hot-path ratios to GET /healthz, all in one run (issue 12's table).
#
#   bash loadtest/bench-ratios.sh              # -c64 and -c256, 10 s a row
#   DURATION=5s CONNS="64" bash loadtest/bench-ratios.sh
#   SWEEP_SECONDS=3 SWEEP_CONNS=1024 bash loadtest/bench-ratios.sh
#   DB_BASELINE_REV= bash loadtest/bench-ratios.sh   # no MariaDB baseline build
#   FLOOR= bash loadtest/bench-ratios.sh               # no database floor
#
# Starts ./cmd/seckill on the real MariaDB and Redis of this machine (rate
# limits off, a database and a key prefix of its own), measures each row
# with wrk -t2, checks every order row against the database (sold equals
# the orders written, never above stock, one order per user, and every 2xx
# wrk saw is an order in the table), runs the load harness against the same
# process for its verdict, prints the ratios with each target's verdict as
# Markdown, and cleans up. Exit 1 if an invariant fails. It also runs the
# database floor (go run ./loadtest/dbcost -floor: each strategy's own
# transactions at the same concurrency with no HTTP and no Redis, on a
# database of its own) and prints each strategy's orders/s as a fraction
# of it.
#
# Needs wrk and jq (installed with apt-get when missing and run as root),
# MariaDB (root, no password) and Redis on 127.0.0.1. Only loopback is
# loaded, and every wrk run stops after DURATION.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-64 256}
PORT=${PORT:-18710}
MYSQL=${MYSQL:-mariadb -h 127.0.0.1 -uroot}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
run=$(date +%s)-$$
DB=seckill_ratios_${run//-/_}
PREFIX=ratios-$run
TOKEN=ratios-token-$run-0123456789
OUT=${OUT:-/tmp/bench-ratios-$run}
B=http://127.0.0.1:$PORT
mkdir -p "$OUT"

NAME=bench-ratios
# shellcheck source=loadtest/bench-lib.sh
. loadtest/bench-lib.sh
need wrk
need jq

svc= base_svc=
cleanup() {
  local p
  for p in $svc $base_svc; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  $MYSQL -e "DROP DATABASE IF EXISTS $DB; DROP DATABASE IF EXISTS ${DB}_base" 2>/dev/null || true
  for p in "$PREFIX:*" "$PREFIX-base:*"; do
    redis-cli -u "$REDIS_URL" --scan --pattern "$p" 2>/dev/null | xargs -r -n 500 redis-cli -u "$REDIS_URL" unlink >/dev/null 2>&1 || true
  done
  git worktree remove --force "$OUT/baseline-src" 2>/dev/null || true
}
trap cleanup EXIT

echo "bench-ratios: building" >&2
go build -o "$OUT/seckill" ./cmd/seckill
go build -o "$OUT/loadtest" ./loadtest
go build -o "$OUT/dbcost" ./loadtest/dbcost
$MYSQL -e "CREATE DATABASE $DB"
DSN="root@tcp(127.0.0.1:3306)/$DB?parseTime=true"
SECKILL_ADDR=127.0.0.1:$PORT SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_MYSQL_DSN=$DSN SECKILL_REDIS_URL=$REDIS_URL \
  SECKILL_KEY_PREFIX=$PREFIX SECKILL_RATE_USER=0 SECKILL_RATE_IP=0 SECKILL_LOG_LEVEL=error \
  "$OUT/seckill" >"$OUT/service.log" 2>&1 &
svc=$!
for _ in $(seq 1 100); do curl -fs "$B/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "$B/readyz" >/dev/null || { echo "bench-ratios: the service did not start; see $OUT/service.log" >&2; exit 1; }

new_item() { # name stock strategy -> id
  admin -X POST "$B/api/v1/admin/items" -d "{\"name\":\"$1\",\"stock\":$2,\"strategy\":\"$3\"}" | jq -r .id
}
declare -A rps p99 cpu100k
failures=0
# row label conns url [script args...]: one wrk run, with
# loadtest/wrk/orders.lua when script args are given; records req/s and p99.
#
# It also records where the CPU went during the row: CPU microseconds per
# request of the service, Redis, MariaDB and wrk (the four share the two
# cores, so a ratio to /healthz is a ratio of these totals once the cores
# are busy).
row() {
  local label=$1 c=$2 url=$3; shift 3
  local f="$OUT/$label-c$c.txt"
  local s0 r0 m0 t TIMEFORMAT='%U %S'
  s0=$(cpu_of "$svc"); r0=$(redis_cpu); m0=$(db_cpu)
  if [ $# -gt 0 ]; then
    t=$( { time wrk -t2 -c"$c" -d"$DURATION" --latency -s loadtest/wrk/orders.lua "$url" -- "$@" >"$f" 2>&1; } 2>&1)
  else
    t=$( { time wrk -t2 -c"$c" -d"$DURATION" --latency "$url" >"$f" 2>&1; } 2>&1)
  fi
  rps[$label,$c]=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$f")
  p99[$label,$c]=$(awk '$1 == "99%" { print $2 }' "$f")
  split[$label,$c]=$(awk -v n="$(awk '/ requests in / { print $1 }' "$f")" -v s="$(echo "$(cpu_of "$svc") $s0")" \
    -v r="$(echo "$(redis_cpu) $r0")" -v m="$(echo "$(db_cpu) $m0")" -v w="$t" 'BEGIN {
      split(s, S, " "); split(r, R, " "); split(m, M, " "); split(w, W, " ")
      a = (S[1] - S[2]) / n * 1e6; b = (R[1] - R[2]) / n * 1e6; d = (M[1] - M[2]) / n * 1e6; e = (W[1] + W[2]) / n * 1e6
      printf "%.1f | %.1f | %.1f | %.1f | %.1f", a, b, d, e, a + b + d + e }')
  echo "  $label -c$c: ${rps[$label,$c]} req/s, p99 ${p99[$label,$c]}; CPU µs per request (service | Redis | MariaDB | wrk | total): ${split[$label,$c]}" >&2
}
declare -A split
# redis_cpu: the Redis server's CPU seconds (0 when it is not on this machine).
redis_pid=$(redis-cli -u "$REDIS_URL" info server 2>/dev/null | awk -F: '/^process_id:/ { print $2 + 0 }')
redis_cpu() { if [ -n "$redis_pid" ] && [ -r "/proc/$redis_pid/stat" ]; then cpu_of "$redis_pid"; else echo 0; fi; }
# check item c: the database agrees with what wrk saw.
check() {
  local label=$1 c=$2 item=$3 f="$OUT/$1-c$2.txt"
  local s; s=$(sed -n 's/^wrk-summary //p' "$f")
  local req non2xx lost
  req=$(jq .requests <<<"$s"); non2xx=$(jq .non2xx <<<"$s")
  lost=$(jq '.timeout + .read + .write' <<<"$s") # answers wrk never saw
  read -r stock sold orders users < <($MYSQL -N -e "SELECT i.stock, i.sold, COUNT(o.id), COUNT(DISTINCT o.user_id)
    FROM $DB.items i LEFT JOIN $DB.orders o ON o.item_id = i.id WHERE i.id = $item GROUP BY i.id")
  local ok2xx=$((req - non2xx)) extra=${4:-0}
  local why=""
  [ "$sold" -le "$stock" ] || why+=" sold $sold > stock $stock;"
  [ "$sold" -eq "$orders" ] || why+=" sold $sold != orders $orders;"
  [ "$orders" -eq "$users" ] || why+=" $orders orders for $users users;"
  # Every 2xx is an order. An order wrk did not count can only be one whose
  # answer it never read: a timeout or read error, or one of the at most
  # one request per connection still in flight when wrk stopped.
  if [ "$orders" -lt $((ok2xx + extra)) ] || [ "$orders" -gt $((ok2xx + extra + lost + c)) ]; then
    why+=" $orders orders for $ok2xx 2xx answers (+$extra before, $lost lost answers, $c in flight at most);"
  fi
  if [ -n "$why" ]; then
    echo "  FAIL $label -c$c item $item:$why" >&2; failures=$((failures + 1))
  else
    echo "  ok $label -c$c item $item: $orders orders = sold <= stock, one per user; $ok2xx 2xx answers (+$extra before, $((orders - ok2xx - extra)) answered after wrk stopped reading)" >&2
  fi
  orders_of[$label,$c]=$orders
}
declare -A orders_of per_commit svc_rate
# db_commits: MariaDB's COMMIT statements so far (Com_commit), to tell the
# orders per transaction of each order row.
db_commits() { $MYSQL -N -e "SHOW GLOBAL STATUS LIKE 'Com_commit'" | awk '{ print $2 }'; }

# The database floor, in this run: each strategy's transactions at the same
# concurrency and for as long as its wrk row, through the service's own code
# with no HTTP and no Redis (loadtest/dbcost -floor), on a database of its
# own (dropped when it ends). Each runs right after its strategy's wrk row,
# so the two see the same machine (its speed moves within minutes when
# other work runs); the service idles meanwhile.
FLOOR=${FLOOR-1}
declare -A floor_rate floor_commit floor_p99
floor_row() { # strategy conns
  local f="$OUT/floor-$1-c$2.md" s c rate pc p
  "$OUT/dbcost" -floor -strategies "$1" -conns "$2" -duration "$DURATION" >"$f"
  while read -r s c rate pc p; do
    floor_rate[$s,$c]=$rate; floor_commit[$s,$c]=$pc; floor_p99[$s,$c]=$p
  done < <(awk -F' *[|] *' '$3 ~ /^[0-9]+$/ { print $2, $3, $5, $6, $7 }' "$f")
  echo "  floor $1 -c$2: ${floor_rate[$1,$2]} orders/s, ${floor_commit[$1,$2]} per commit, p99 ${floor_p99[$1,$2]} ($f)" >&2
}

big=10000000
for c in $CONNS; do
  echo "bench-ratios: -c$c, $DURATION a row" >&2
  row healthz "$c" "$B/healthz"
  view=$(new_item "view-c$c" 100 lua)
  row item-view "$c" "$B/api/v1/items/$view"
  for strategy in lua-async lua lock; do
    item=$(new_item "$strategy-c$c" $big "$strategy")
    before=$(db_cpu); commits=$(db_commits); t0=$(date +%s.%N)
    row "$strategy" "$c" "$B" "$item" "u-$strategy-c$c"
    drain "$item"
    t1=$(date +%s.%N)
    check "$strategy" "$c" "$item"
    # Orders written per second from the start of wrk until the last is in
    # the table (for lua-async, until its queue drained): what the floor
    # is compared with.
    svc_rate[$strategy,$c]=$(awk -v n="${orders_of[$strategy,$c]}" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
    cpu100k[$strategy,$c]=$(awk -v a="$before" -v b="$(db_cpu)" -v n="${orders_of[$strategy,$c]}" \
      'BEGIN { if (n > 0) printf "%.1f", (b - a) / n * 100000; else print "n/a" }')
    per_commit[$strategy,$c]=$(awk -v a="$commits" -v b="$(db_commits)" -v n="${orders_of[$strategy,$c]}" \
      'BEGIN { if (b > a) printf "%.1f", n / (b - a); else print "n/a" }')
    if [ -n "$FLOOR" ]; then floor_row "$strategy" "$c"; fi
  done
  soldout=$(new_item "soldout-c$c" 1 lua)
  admin -X POST "$B/api/v1/items/$soldout/orders" -d '{"user_id":"first-buyer"}' >/dev/null
  row sold-out "$c" "$B" "$soldout" "late-c$c"
  check sold-out "$c" "$soldout" 1
  again=$(new_item "again-c$c" $big lua)
  admin -X POST "$B/api/v1/items/$again/orders" -d "{\"user_id\":\"repeat-c$c\"}" >/dev/null
  row already-purchased "$c" "$B" "$again" "repeat-c$c" same
  check already-purchased "$c" "$again" 1
done

# MariaDB CPU per order against DB_BASELINE_REV (default ce6bab0, main
# before issue 12; empty skips), measured in this run: this machine's speed
# moves two- to threefold between days, so CPU seconds from another day
# are no baseline. The baseline build runs beside this one, on a database
# and key prefix of its own; each strategy and concurrency runs on this
# build, then on the baseline, back to back, wrk DURATION each, and both
# are read the same way: MariaDB's CPU and COMMITs from the start of wrk
# until every answered order is in the table.
DB_BASELINE_REV=${DB_BASELINE_REV-ce6bab0}
declare -A ab_cpu ab_commit
base_svc=
if [ -n "$DB_BASELINE_REV" ] && ! git cat-file -e "$DB_BASELINE_REV^{commit}" 2>/dev/null; then
  echo "bench-ratios: baseline $DB_BASELINE_REV is not in this clone (a shallow clone?); no MariaDB baseline" >&2
  DB_BASELINE_REV=
fi
if [ -n "$DB_BASELINE_REV" ]; then
  echo "bench-ratios: MariaDB CPU per order, this build against $DB_BASELINE_REV" >&2
  git worktree add --detach -q "$OUT/baseline-src" "$DB_BASELINE_REV"
  (cd "$OUT/baseline-src" && go build -o "$OUT/seckill-baseline" ./cmd/seckill)
  git worktree remove --force "$OUT/baseline-src"
  $MYSQL -e "CREATE DATABASE ${DB}_base"
  BB=http://127.0.0.1:$((PORT + 1))
  SECKILL_ADDR=127.0.0.1:$((PORT + 1)) SECKILL_ADMIN_TOKEN=$TOKEN SECKILL_MYSQL_DSN="root@tcp(127.0.0.1:3306)/${DB}_base?parseTime=true" \
    SECKILL_REDIS_URL=$REDIS_URL SECKILL_KEY_PREFIX=$PREFIX-base SECKILL_RATE_USER=0 SECKILL_RATE_IP=0 SECKILL_LOG_LEVEL=error \
    "$OUT/seckill-baseline" >"$OUT/service-baseline.log" 2>&1 &
  base_svc=$!
  for _ in $(seq 1 100); do curl -fs "$BB/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -fs "$BB/readyz" >/dev/null || { echo "bench-ratios: the baseline service did not start; see $OUT/service-baseline.log" >&2; exit 1; }
fi
# db_row label base-url database strategy conns: one wrk row of new buyers
# on a new item; records MariaDB's CPU s per 100k orders and orders per
# COMMIT once every 2xx is an order in the table; counts a failure if the
# table disagrees (sold != orders, or fewer orders than 2xx answers).
db_row() {
  local label=$1 url=$2 db=$3 strategy=$4 c=$5 f="$OUT/db-$1-$4-c$5.txt"
  local item m0 k0 ok n=-1 prev sold
  item=$(admin -X POST "$url/api/v1/admin/items" -d "{\"name\":\"db-$label-$strategy-c$c\",\"stock\":$big,\"strategy\":\"$strategy\"}" | jq -r .id)
  m0=$(db_cpu); k0=$(db_commits)
  wrk -t2 -c"$c" -d"$DURATION" -s loadtest/wrk/orders.lua "$url" -- "$item" "d-$label-$strategy-c$c" >"$f" 2>&1
  ok=$(sed -n 's/^wrk-summary //p' "$f" | jq '.requests - .non2xx')
  for _ in $(seq 1 1200); do
    prev=$n
    n=$($MYSQL -N -e "SELECT COUNT(*) FROM $db.orders WHERE item_id = $item")
    [ "$n" -ge "$ok" ] && [ "$n" = "$prev" ] && break
    sleep 0.1
  done
  ab_cpu[$label,$strategy,$c]=$(awk -v a="$m0" -v b="$(db_cpu)" -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", (b - a) / n * 100000; else print "n/a" }')
  ab_commit[$label,$strategy,$c]=$(awk -v a="$k0" -v b="$(db_commits)" -v n="$n" 'BEGIN { if (b > a) printf "%.1f", n / (b - a); else print "n/a" }')
  sold=$($MYSQL -N -e "SELECT sold FROM $db.items WHERE id = $item")
  if [ "$n" -lt "$ok" ] || [ "$sold" != "$n" ]; then
    echo "  FAIL db $label $strategy -c$c: $n orders, sold $sold, $ok 2xx answers" >&2; failures=$((failures + 1))
  fi
  echo "  db $label $strategy -c$c: $n orders, ${ab_commit[$label,$strategy,$c]} per COMMIT, MariaDB ${ab_cpu[$label,$strategy,$c]} CPU s per 100k orders" >&2
}
if [ -n "$DB_BASELINE_REV" ]; then
  for c in $CONNS; do
    for strategy in lua-async lua lock; do
      db_row this "$B" "$DB" "$strategy" "$c"
      db_row baseline "$BB" "${DB}_base" "$strategy" "$c"
    done
  done
  kill "$base_svc" 2>/dev/null || true; wait "$base_svc" 2>/dev/null || true; base_svc=
fi

# Open-loop sweep for lua and lua-async: offered rates from 20 % to 120 % of
# the closed-loop maximum wrk measured at the first concurrency, drawn as a
# chart (docs/img/ when SWEEP_CHART_DIR says so; default: the output
# directory). The target row is the p99 of an acknowledged order at 80 % of
# the open-loop maximum: the most the service achieved in the sweep with
# the harness as its client (wrk's closed-loop peak is more than the
# harness, a heavier client on the same cores, can offer), measured in one
# more open-loop step at exactly that rate.
# SWEEP_CONNS caps the requests in flight (the harness's connections).
# Latency counts from each request's due time, so a send that waits for a
# free connection counts against the service too. 256 is the wrk row's
# largest count and more than nginx keeps open to an instance
# (deploy/nginx); at 1024 (before 2026-11-25) the client's own 1024
# connections and goroutines on the same two cores set the p99 at high
# rates (docs/BENCHMARKS.md).
SWEEP_CONNS=${SWEEP_CONNS:-256}
first=${CONNS%% *}
chart_dir=${SWEEP_CHART_DIR:-$OUT}
declare -A p99at80
sweep_run() { # strategy rates report output: one sweep; counts a failed verdict
  SECKILL_ADMIN_TOKEN=$TOKEN "$OUT/loadtest" -url "$B" -dsn "$DSN" -strategies "$1" -sweep "$2" \
    -sweep-seconds "${SWEEP_SECONDS:-5}" -c "$SWEEP_CONNS" -q -report "$3" >"$4" 2>&1 || { failures=$((failures + 1)); p99at80[$1,verdict]=FAIL; }
}
# order_latency: the service's histogram of order request durations (le
# count), from /metrics; service_p99 BEFORE AFTER: the bucket bound under
# which 99 % of the orders between the two fall, as the service timed them
# (from reading the request to writing the answer: no client, no kernel
# queues), for telling the service's share of the p99 from the client's.
order_latency() {
  curl -fs "$B/metrics" | awk '/^seckill_http_request_duration_seconds_bucket\{/ && /method="POST"/ && /route="\/api\/v1\/items\/:id\/orders"/ {
    match($0, /le="[^"]*"/); print substr($0, RSTART + 4, RLENGTH - 5), $NF }'
}
service_p99() {
  awk 'NR == FNR { before[$1] = $2; next } { le[++n] = $1; c[n] = $2 - before[$1] }
    END { if (n == 0 || c[n] == 0) { print "n/a"; exit }
      for (i = 1; i <= n; i++) if (c[i] >= 0.99 * c[n]) { if (le[i] == "+Inf") print "> 10 s"; else printf "≤ %g ms", le[i] * 1000; exit } }' "$1" "$2"
}
for strategy in lua lua-async; do
  peak=${rps[$strategy,$first]}
  rates=$(awk -v p="$peak" 'BEGIN { for (f = 0.2; f < 1.25; f += 0.2) printf "%s%d", (f > 0.3 ? "," : ""), p * f }')
  echo "bench-ratios: open-loop sweep of $strategy at $rates/s" >&2
  p99at80[$strategy,verdict]=PASS
  f="$OUT/sweep-$strategy.txt"
  sweep_run "$strategy" "$rates" "$chart_dir/sweep-$strategy.svg" "$f"
  max=$(awk -F' [|] ' '$1 ~ /^[|] / && $3 ~ /^[0-9]+$/ && $3 > m { m = $3 } END { printf "%d", m }' "$f")
  at80=$(awk -v m="$max" 'BEGIN { printf "%d", m * 0.8 }')
  echo "bench-ratios: $strategy achieved at most $max/s open loop; one step at 80 %, $at80/s" >&2
  f="$OUT/sweep-$strategy-at80.txt"
  order_latency >"$OUT/at80-$strategy-before.txt"
  sweep_run "$strategy" "$at80" "$OUT/sweep-$strategy-at80.svg" "$f"
  order_latency >"$OUT/at80-$strategy-after.txt"
  p99at80[$strategy,service]=$(service_p99 "$OUT/at80-$strategy-before.txt" "$OUT/at80-$strategy-after.txt")
  p99at80[$strategy]=$(awk -F' [|] ' -v r="$at80" '$2 == r { print $7 }' "$f")
  p99at80[$strategy,rate]=$at80
  p99at80[$strategy,max]=$max
done

echo "bench-ratios: the load harness against the same process" >&2
harness=PASS
SECKILL_ADMIN_TOKEN=$TOKEN "$OUT/loadtest" -url "$B" -dsn "$DSN" -strategies lua,lock,lua-async \
  -stock 500 -n 3000 -users 2000 -c 64 -seed 12 -q >"$OUT/harness.txt" 2>&1 || harness=FAIL
grep -q 'RESULT: PASS' "$OUT/harness.txt" || harness=FAIL
[ $harness = PASS ] || failures=$((failures + 1))

verdict() { # ratio target -> met / not met
  awk -v r="$1" -v t="$2" 'BEGIN { if (r >= t) printf "met"; else printf "**not met** (%.0f%% short)", (t - r) / t * 100 }'
}
ratio() { awk -v a="${rps[$1,$2]}" -v b="${rps[healthz,$2]}" 'BEGIN { printf "%.2f", a / b }'; }
{
  echo "### $(date -u '+%Y-%m-%d %H:%M UTC'), main $(git rev-parse --short HEAD)"
  echo
  echo "Machine: $(nproc) cores, load average at the end $(awk '{print $1, $2, $3}' /proc/loadavg); wrk -t2, $DURATION a row, the client on the same cores."
  echo
  echo '| path | conns | req/s | p99 | ratio to /healthz | target | verdict |'
  echo '|---|---|---|---|---|---|---|'
  for c in $CONNS; do
    echo "| \`GET /healthz\` | $c | ${rps[healthz,$c]} | ${p99[healthz,$c]} | 1 | | |"
    for spec in "item-view:public item view:0.80" "lua-async:lua-async admission:0.50" "lua:lua (sync):0.40" \
      "lock:lock:0.40" "sold-out:sold out (409):0.90" "already-purchased:already purchased (409):0.90"; do
      IFS=: read -r key name target <<<"$spec"
      r=$(ratio "$key" "$c")
      echo "| $name | $c | ${rps[$key,$c]} | ${p99[$key,$c]} | $r | ≥ $target | $(verdict "$r" "$target") |"
    done
  done
  if [ -n "$FLOOR" ]; then
    echo
    echo "Against the database floor, this run: \`dbcost -floor\` right after each wrk row, the strategy's transactions at the same concurrency with no HTTP and no Redis, $DURATION each (p99 of the floor: lua and lock, an order's wait for its commit; lua-async, a batch's transaction). Service orders/s: orders written from the start of wrk until the last was in the table."
    echo
    echo '| strategy | conns | service orders/s | floor orders/s | fraction of the floor | ratio to /healthz | orders per commit (service / floor) | floor p99 |'
    echo '|---|---|---|---|---|---|---|---|'
    for c in $CONNS; do
      for s in lua-async lua lock; do
        f=$(awk -v a="${svc_rate[$s,$c]}" -v b="${floor_rate[$s,$c]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
        echo "| $s | $c | ${svc_rate[$s,$c]} | ${floor_rate[$s,$c]:-n/a} | $f | $(ratio "$s" "$c") | ${per_commit[$s,$c]} / ${floor_commit[$s,$c]:-n/a} | ${floor_p99[$s,$c]:-n/a} |"
      done
    done
  fi
  echo
  echo 'Where the CPU went during each row, µs per request (the four processes share the cores):'
  echo
  echo '| path | conns | service | Redis | MariaDB | wrk | total |'
  echo '|---|---|---|---|---|---|---|'
  for c in $CONNS; do
    for key in healthz item-view lua-async lua lock sold-out already-purchased; do
      echo "| $key | $c | ${split[$key,$c]} |"
    done
  done
  echo
  echo '| strategy | conns | orders written | orders per COMMIT | MariaDB CPU s per 100k orders |'
  echo '|---|---|---|---|---|'
  for c in $CONNS; do
    for s in lua-async lua lock; do echo "| $s | $c | ${orders_of[$s,$c]} | ${per_commit[$s,$c]} | ${cpu100k[$s,$c]} |"; done
  done
  if [ -n "$DB_BASELINE_REV" ]; then
    echo
    echo "MariaDB CPU per order, this build against $DB_BASELINE_REV, back to back in this run (target: half):"
    echo
    echo "| strategy | conns | orders per COMMIT (this / $DB_BASELINE_REV) | MariaDB CPU s per 100k orders (this / $DB_BASELINE_REV) | this ÷ baseline | target | verdict |"
    echo '|---|---|---|---|---|---|---|'
    for c in $CONNS; do
      for s in lua-async lua lock; do
        a=${ab_cpu[this,$s,$c]}; b=${ab_cpu[baseline,$s,$c]}
        r=$(awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
        v=$(awk -v r="$r" 'BEGIN { if (r == "n/a") print "n/a"; else if (r <= 0.5) print "met"; else printf "**not met** (%.0f%% over half)", (r - 0.5) / 0.5 * 100 }')
        echo "| $s | $c | ${ab_commit[this,$s,$c]} / ${ab_commit[baseline,$s,$c]} | $a / $b | $r | ≤ 0.50 | $v |"
      done
    done
  fi
  echo
  echo "Open loop: the load harness, at most $SWEEP_CONNS requests in flight, ${SWEEP_SECONDS:-5} s a rate."
  echo
  echo '| open loop | most achieved in the sweep | rate (80 % of it) | p99 of an acknowledged order | target | verdict | p99 inside the service | sweep invariants |'
  echo '|---|---|---|---|---|---|---|---|'
  for s in lua lua-async; do
    v=$(awk -v p="${p99at80[$s]:-999999}" 'BEGIN { if (p <= 20) print "met"; else printf "**not met** (%.1f ms over)", p - 20 }')
    echo "| $s | ${p99at80[$s,max]}/s | ${p99at80[$s,rate]}/s | ${p99at80[$s]:-n/a} ms | ≤ 20 ms | $v | ${p99at80[$s,service]:-n/a} | ${p99at80[$s,verdict]} |"
  done
  echo
  echo "Invariants (database vs wrk, every order row): $([ $failures = 0 ] && echo PASS || echo "FAIL ($failures)"); load harness on the same process: $harness."
} | tee "$OUT/ratios.md"
echo "bench-ratios: raw output in $OUT" >&2
[ $failures = 0 ]
