#!/bin/bash
# Reproduces the order events' figures of docs/BENCHMARKS-events.md ("Order
# events"). Run from the repo root on a quiet machine; needs MariaDB (root,
# no password), Redis and NATS with JetStream on 127.0.0.1. Creates and
# drops the database seckill_events_bench; Redis keys under events-bench-*.
#
# 1. the outbox's cost: each strategy's order writes at the database
#    floor, with and then without the order events, in one run
#    (loadtest/dbcost -floor -events both, CONNS concurrent buyers,
#    FLOOR_DURATION each).
# 2. the lag from an order's 2xx to its created event at a JetStream
#    consumer (loadtest/eventlag), at RATE_<strategy> orders a second, open
#    loop, for LAG_DURATION each, on the service as it ships with
#    SECKILL_NATS_URL set (rate limits off). The default rates are 80 % of
#    each strategy's orders/s up to sell-out in BENCHMARKS.md.
set -u
OUT=${OUT:-/tmp/events-bench}; mkdir -p "$OUT"; rm -f "$OUT"/*
CONNS=${CONNS:-64}; FLOOR_DURATION=${FLOOR_DURATION:-10s}; LAG_DURATION=${LAG_DURATION:-10s}
RATE_lua=${RATE_lua:-3264}; RATE_lock=${RATE_lock:-2788}; RATE_lua_async=${RATE_lua_async:-4776}
NATS=${NATS:-nats://127.0.0.1:4222}
DSN='root@tcp(127.0.0.1:3306)/seckill_events_bench?parseTime=true'
TOK=events-bench-token-0123456789abcdef
API=127.0.0.1:18810
go build -o /tmp/eb-seckill ./cmd/seckill && go build -o /tmp/eb-eventlag ./loadtest/eventlag && go build -o /tmp/eb-dbcost ./loadtest/dbcost || exit 1
up() { echo "$1: load average $(uptime | sed 's/.*load average: //')" | tee -a "$OUT/load.txt"; }

up "floor"
echo "== 1. the outbox's cost at the floor (-c$CONNS, $FLOOR_DURATION each)"
/tmp/eb-dbcost -floor -events both -conns "$CONNS" -duration "$FLOOR_DURATION" | tee "$OUT/floor.txt"

mariadb -uroot -e 'DROP DATABASE IF EXISTS seckill_events_bench; CREATE DATABASE seckill_events_bench' || exit 1
env SECKILL_ADDR=$API SECKILL_ADMIN_TOKEN=$TOK SECKILL_MYSQL_DSN="$DSN" SECKILL_REDIS_URL=redis://127.0.0.1:6379/0 \
  SECKILL_KEY_PREFIX=events-bench SECKILL_NATS_URL="$NATS" SECKILL_RATE_USER=0 SECKILL_RATE_IP=0 SECKILL_LOG_LEVEL=warn \
  /tmp/eb-seckill > "$OUT/service.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; mariadb -uroot -e "DROP DATABASE IF EXISTS seckill_events_bench"; redis-cli --scan --pattern "events-bench*" | xargs -r redis-cli del >/dev/null' EXIT
for _ in $(seq 100); do curl -sf "http://$API/healthz" > /dev/null && break; sleep 0.1; done
echo "== 2. the lag from a 2xx to the event at a JetStream consumer ($LAG_DURATION each)"
for s in lua lock lua-async; do
  v=RATE_${s//-/_}
  up "lag $s"
  /tmp/eb-eventlag -url "http://$API" -token $TOK -nats "$NATS" -strategy "$s" -rate "${!v}" -duration "$LAG_DURATION" 2>>"$OUT/progress.txt" | tee -a "$OUT/lag.txt"
done
up end
