#!/bin/bash
# Reproduces the lua-async figures of docs/BENCHMARKS.md. Run from the repo
# root on a quiet machine; needs MariaDB (root, no password) and Redis on
# 127.0.0.1, and wrk (apt-get install wrk). Creates and drops the database
# seckill_async_bench; uses Redis keys under async-bench-* only and deletes
# them at the end. Raw outputs go to $OUT (default /tmp/async-bench).
#
# 1. admission: an API process with no writers (SECKILL_WRITERS=0), so the
#    figure is admission alone; the harness measures /healthz, then 50,000
#    attempts on one item with stock 50,000 (every attempt admitted, each
#    with an Idempotency-Key), RUNS times.
# 2. persistence (run first): an API without writers queues 50,000 orders,
#    then a `seckill worker` (2 writers) starts; the time until the stream
#    is empty, start-up included.
# 3. wrk: /healthz, then order attempts with a distinct user each
#    (loadtest/wrk/orders.lua), 10 s each, twice, on the same API.
# 4. end to end: the service as it ships (2 writers in process, the per-user
#    rate limit on), stock 20,000, 40,000 attempts with repeats and replays;
#    the harness verifies every invariant.
set -u
OUT=${OUT:-/tmp/async-bench}; mkdir -p "$OUT"; rm -f "$OUT"/*
RUNS=${RUNS:-3}
DSN='root@tcp(127.0.0.1:3306)/seckill_async_bench?parseTime=true'
TOK=async-bench-token-0123456789abcdef
API=127.0.0.1:18800
go build -o /tmp/ab-seckill ./cmd/seckill && go build -o /tmp/ab-loadtest ./loadtest || exit 1
command -v wrk > /dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
mariadb -uroot -e 'DROP DATABASE IF EXISTS seckill_async_bench; CREATE DATABASE seckill_async_bench' || exit 1
up() { echo "$1: load average $(uptime | sed 's/.*load average: //')" | tee -a "$OUT/load.txt"; }
svc() { # name, extra env...
  local name=$1; shift
  env SECKILL_ADDR=$API SECKILL_ADMIN_TOKEN=$TOK SECKILL_MYSQL_DSN="$DSN" SECKILL_REDIS_URL=redis://127.0.0.1:6379/0 \
    SECKILL_LOG_LEVEL=warn "$@" /tmp/ab-seckill > "$OUT/$name.log" 2>&1 &
  PID=$!
  for _ in $(seq 50); do curl -sf "http://$API/healthz" > /dev/null && return; sleep 0.1; done
  echo "service $name did not start"; cat "$OUT/$name.log"; exit 1
}
item() { # stock -> id of a new lua-async item
  curl -s -X POST "http://$API/api/v1/admin/items" -H "Authorization: Bearer $TOK" \
    -d "{\"name\":\"bench\",\"stock\":$1,\"strategy\":\"lua-async\"}" | sed 's/.*"id":\([0-9]*\).*/\1/'
}
up start

# 2 (first, while the database holds no other lua-async item): persistence.
# An API without writers queues 50,000 orders; a worker then drains them.
svc queue SECKILL_WRITERS=0 SECKILL_RATE_USER=0 SECKILL_KEY_PREFIX=async-bench-p
SECKILL_ADMIN_TOKEN=$TOK /tmp/ab-loadtest -url "http://$API" -strategies lua-async -stock 50000 -n 50000 -users 50000 \
  -repeat 0 -retry 0 -c 64 -seed 100 -q -baseline 0 -drain-timeout 1ms > "$OUT/queue.txt" 2>&1
kill $PID; wait $PID 2>/dev/null
QITEM=$(grep -o '== strategy lua-async (item [0-9]*' "$OUT/queue.txt" | grep -o '[0-9]*$')
STREAM="async-bench-p:{item:$QITEM}:orders"
echo "queued before the worker: $(redis-cli xlen "$STREAM")"
START=$(date +%s.%N)
env SECKILL_ADMIN_TOKEN=$TOK SECKILL_MYSQL_DSN="$DSN" SECKILL_REDIS_URL=redis://127.0.0.1:6379/0 \
  SECKILL_KEY_PREFIX=async-bench-p SECKILL_WRITERS=2 SECKILL_LOG_LEVEL=warn /tmp/ab-seckill worker > "$OUT/worker.log" 2>&1 &
WPID=$!
while [ "$(redis-cli xlen "$STREAM")" != "0" ]; do sleep 0.02; done
END=$(date +%s.%N)
ROWS=$(mariadb -uroot -N -e "SELECT COUNT(*) FROM seckill_async_bench.orders WHERE item_id = $QITEM")
SOLD=$(mariadb -uroot -N -e "SELECT sold FROM seckill_async_bench.items WHERE id = $QITEM")
echo "drain: $ROWS rows, sold $SOLD, in $(echo "$END - $START" | bc) s (worker start-up included):" \
  "$(echo "$ROWS / ($END - $START)" | bc) orders/s" | tee "$OUT/drain.txt"
kill $WPID; wait $WPID 2>/dev/null
up drain

# 1. admission
svc admission SECKILL_WRITERS=0 SECKILL_RATE_USER=0 SECKILL_KEY_PREFIX=async-bench-a
for i in $(seq "$RUNS"); do
  SECKILL_ADMIN_TOKEN=$TOK /tmp/ab-loadtest -url "http://$API" -strategies lua-async -stock 50000 -n 50000 -users 50000 \
    -repeat 0 -retry 0 -c 64 -seed "$i" -q -baseline 3s -drain-timeout 1ms > "$OUT/admission-$i.txt" 2>&1
  grep -E '^baseline|^throughput' "$OUT/admission-$i.txt"; up "admission $i"
done

# 3. wrk on the same API
for i in 1 2; do
  wrk -t2 -c64 -d10s "http://$API/healthz" > "$OUT/wrk-healthz-$i.txt"
  ID=$(item 100000000)
  wrk -t2 -c64 -d10s -s loadtest/wrk/orders.lua "http://$API" -- "$ID" "run$i" > "$OUT/wrk-orders-$i.txt"
  echo "wrk $i: /healthz $(grep Requests/sec "$OUT/wrk-healthz-$i.txt" | awk '{print $2}') req/s," \
    "orders $(grep Requests/sec "$OUT/wrk-orders-$i.txt" | awk '{print $2}') req/s," \
    "non-2xx $(grep -c Non-2xx "$OUT/wrk-orders-$i.txt")"
  up "wrk $i"
done
kill $PID; wait $PID 2>/dev/null

# 4. end to end, as it ships
svc endtoend SECKILL_KEY_PREFIX=async-bench-e
SECKILL_ADMIN_TOKEN=$TOK /tmp/ab-loadtest -url "http://$API" -dsn "$DSN" -strategies lua-async -stock 20000 -n 40000 \
  -users 40000 -repeat 0.05 -retry 0.02 -c 64 -seed 7 -q -drain-timeout 60s > "$OUT/endtoend.txt" 2>&1
echo "end to end: exit $?"; grep -E '^baseline|^throughput|^drain|RESULT' "$OUT/endtoend.txt"
kill $PID; wait $PID 2>/dev/null
up end

for p in async-bench-p async-bench-a async-bench-e; do
  redis-cli --scan --pattern "$p:*" | xargs -r -n 1000 redis-cli unlink > /dev/null
done
echo "leftover keys: $(redis-cli --scan --pattern 'async-bench-*' | wc -l)"
mariadb -uroot -e 'DROP DATABASE seckill_async_bench'
