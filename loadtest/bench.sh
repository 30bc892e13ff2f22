#!/bin/bash
# Reproduces docs/BENCHMARKS-loadtest.md. Run from the repo root; needs MariaDB
# (root, no password) and Redis on 127.0.0.1, and k6 on ~/go/bin (go install go.k6.io/k6@latest).
# Creates and drops the database seckill_lt_bench; Redis keys only under lt-bench-*, deleted at the end.
set -u
OUT=${OUT:-/tmp/lt-bench}; mkdir -p $OUT; rm -f $OUT/*
DSN='root@tcp(127.0.0.1:3306)/seckill_lt_bench?parseTime=true'
TOK=loadtest-token-0123456789abcdef
go build -o /tmp/lt-loadtest ./loadtest && go build -o /tmp/lt-seckill ./cmd/seckill || exit 1
mariadb -uroot -e 'DROP DATABASE IF EXISTS seckill_lt_bench; CREATE DATABASE seckill_lt_bench'
L=/tmp/lt-loadtest
up() { echo "$1 $(uptime | sed 's/.*load average: //')" >> $OUT/load.txt; }
up start
$L -embedded -strategies lua,lock -stock 100 -n 5000 -users 2000 -c 32 -seed 1 -q -report $OUT/embedded.html -json $OUT/embedded.json > $OUT/embedded.txt 2>&1; echo "embedded $?"; up embedded
$L -embedded -dsn "$DSN" -redis redis://127.0.0.1:6379/0 -key-prefix lt-bench-closed -strategies lua,lock -stock 100 -n 5000 -users 2000 -c 32 -seed 1 -q -report $OUT/real.html -json $OUT/real.json > $OUT/real.txt 2>&1; echo "real $?"; up real
$L -embedded -mode open -rate 2000 -c 256 -strategies lua,lock -stock 100 -n 10000 -users 5000 -seed 3 -q -report $OUT/embedded-open.html > $OUT/embedded-open.txt 2>&1; echo "embedded-open $?"; up embedded-open
$L -embedded -dsn "$DSN" -redis redis://127.0.0.1:6379/0 -key-prefix lt-bench-open -mode open -rate 2000 -c 256 -strategies lua,lock -stock 100 -n 10000 -users 5000 -seed 3 -q -report $OUT/real-open.html > $OUT/real-open.txt 2>&1; echo "real-open $?"; up real-open
for be in real emb; do
  if [ $be = real ]; then
    SECKILL_ADDR=127.0.0.1:18437 SECKILL_ADMIN_TOKEN=$TOK SECKILL_MYSQL_DSN="$DSN" SECKILL_REDIS_URL=redis://127.0.0.1:6379/0 SECKILL_KEY_PREFIX=lt-bench-svc /tmp/lt-seckill > $OUT/svc-$be.log 2>&1 &
    DB=(-dsn "$DSN")
  else
    rm -f /tmp/ltsvc/seckill.db*; mkdir -p /tmp/ltsvc
    SECKILL_ADDR=127.0.0.1:18437 SECKILL_ADMIN_TOKEN=$TOK SECKILL_SQLITE_PATH=/tmp/ltsvc/seckill.db /tmp/lt-seckill > $OUT/svc-$be.log 2>&1 &
    DB=(-sqlite /tmp/ltsvc/seckill.db)
  fi
  PID=$!; sleep 2
  SECKILL_ADMIN_TOKEN=$TOK $L -url http://127.0.0.1:18437 "${DB[@]}" -strategies lua,lock -stock 100 -n 5000 -users 2000 -c 32 -seed 1 -q > $OUT/svc-$be.txt 2>&1; echo "svc-$be $?"; up svc-$be
  for s in lua lock; do
    ~/go/bin/k6 run -q -e BASE_URL=http://127.0.0.1:18437 -e ADMIN_TOKEN=$TOK -e STOCK=100 -e ITERATIONS=5000 -e VUS=32 -e STRATEGY=$s loadtest/k6/seckill.js > $OUT/k6-$be-$s.txt 2>&1; echo "k6-$be-$s $?"; up k6-$be-$s
  done
  (cd loadtest/vegeta && for s in lua lock; do
    SECKILL_ADMIN_TOKEN=$TOK go run ./gentargets -url http://127.0.0.1:18437 -stock 100 -strategy $s -n 10000 > /tmp/targets-$s.jsonl 2>$OUT/gen-$be-$s.err
    ITEM=$(grep -o 'item [0-9]*' $OUT/gen-$be-$s.err | cut -d' ' -f2)
    go tool vegeta attack -format=json -lazy -rate=1000/s -duration=10s -max-workers=256 < /tmp/targets-$s.jsonl > $OUT/vegeta-$be-$s.bin
    go tool vegeta report < $OUT/vegeta-$be-$s.bin > $OUT/vegeta-$be-$s.txt
    SECKILL_ADMIN_TOKEN=$TOK go run ./gentargets -url http://127.0.0.1:18437 -check $ITEM >> $OUT/vegeta-$be-$s.txt 2>&1; echo "vegeta-$be-$s check $?"; up vegeta-$be-$s
  done)
  kill $PID; wait $PID 2>/dev/null
done
redis-cli --scan --pattern 'lt-bench-svc:*' | xargs -r -n 500 redis-cli unlink > /dev/null
echo "leftover keys: $(redis-cli --scan --pattern 'lt-bench-*' | wc -l)"
mariadb -uroot -e 'DROP DATABASE seckill_lt_bench'
up end
