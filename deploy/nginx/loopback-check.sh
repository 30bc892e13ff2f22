#!/usr/bin/env bash
# Runs deploy/nginx/nginx.conf on loopback in front of three local seckill
# processes (this machine's MariaDB and Redis, one new database, one key
# prefix), pushes the load harness through it and then straight at the
# three instances (-url three times), and stops everything it started.
# Exit 1 if a run fails an invariant. Needs nginx (apt-get install -y
# nginx-light), MariaDB at 127.0.0.1:3306 (root, no password) and Redis at
# 127.0.0.1:6379. Usage: bash deploy/nginx/loopback-check.sh [harness flags]
set -euo pipefail
cd "$(dirname "$0")/../.."

tmp=$(mktemp -d)
suffix=$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
db="seckill_lb_$suffix"
prefix="lbcheck-$suffix"
token="lb-check-token-$suffix-0123456789"
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid")" 2>/dev/null || true
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	mariadb -uroot -e "DROP DATABASE IF EXISTS \`$db\`" || true
	redis-cli --scan --pattern "$prefix:*" | xargs -r redis-cli del >/dev/null || true
	redis-cli --scan --pattern "rate:$prefix:*" | xargs -r redis-cli del >/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/seckill" ./cmd/seckill
go build -o "$tmp/loadtest" ./loadtest
mariadb -uroot -e "CREATE DATABASE \`$db\`"
dsn="root@tcp(127.0.0.1:3306)/$db?parseTime=true"

for i in 1 2 3; do
	SECKILL_ADDR="127.0.0.1:1808$i" SECKILL_ADMIN_ADDR="127.0.0.1:1909$i" \
		SECKILL_MYSQL_DSN="$dsn" SECKILL_REDIS_URL="redis://127.0.0.1:6379/0" \
		SECKILL_KEY_PREFIX="$prefix" SECKILL_ADMIN_TOKEN="$token" SECKILL_LOG_LEVEL=warn \
		"$tmp/seckill" >"$tmp/seckill-$i.log" 2>&1 &
	pids+=($!)
done

# The repository's config with the containers' names and ports replaced by
# loopback ones; nothing else changes.
sed -e 's/seckill-\([123]\):8080/127.0.0.1:1808\1/' -e 's/seckill-\([123]\):9090/127.0.0.1:1909\1/' \
	-e 's/listen 8080 reuseport;/listen 127.0.0.1:18080 reuseport;/' -e 's/listen 9090;/listen 127.0.0.1:19090;/' \
	-e "s#pid /tmp/seckill-nginx.pid;#pid $tmp/nginx.pid;#" \
	deploy/nginx/nginx.conf >"$tmp/nginx.conf"
for i in 1 2 3; do # all three start at once, as in the compose file
	up=""
	for _ in $(seq 100); do curl -fs "http://127.0.0.1:1808$i/healthz" >/dev/null && up=1 && break; sleep 0.1; done
	[ -n "$up" ] || { echo "instance $i did not start:"; cat "$tmp/seckill-$i.log"; exit 1; }
done
mkdir -p "$tmp/nginx"
nginx -p "$tmp/nginx" -e stderr -c "$tmp/nginx.conf"
for _ in $(seq 50); do curl -fs http://127.0.0.1:18080/healthz >/dev/null && break; sleep 0.1; done

orders() { # order attempts each instance served, from its /metrics
	for i in 1 2 3; do
		n=$( (curl -fs "http://127.0.0.1:1909$i/metrics" -H "Authorization: Bearer $token" || true) |
			awk '/^seckill_http_requests_total\{.*route="\/api\/v1\/items\/:id\/orders"/ {s+=$NF} END {print s+0}')
		printf 'instance %d served %d order requests\n' "$i" "$n"
	done
}

status=0
echo "== through nginx (127.0.0.1:18080, admin 127.0.0.1:19090) =="
"$tmp/loadtest" -url http://127.0.0.1:18080 -admin-url http://127.0.0.1:19090 -token "$token" -dsn "$dsn" \
	-strategies lua,lock,lua-async -q "$@" || status=1
orders
echo "== straight at the instances (-url three times) =="
"$tmp/loadtest" -url http://127.0.0.1:18081 -url http://127.0.0.1:18082 -url http://127.0.0.1:18083 \
	-admin-url http://127.0.0.1:19091 -token "$token" -dsn "$dsn" -strategies lua,lock,lua-async -baseline 0 -q "$@" || status=1
orders
echo "== live view (SSE) through nginx, unbuffered =="
item=$(curl -fs -X POST http://127.0.0.1:19090/api/v1/admin/items -H "Authorization: Bearer $token" -d '{"name":"sse","stock":1}' | sed 's/.*"id":\([0-9]*\).*/\1/')
timeout 3 curl -sN "http://127.0.0.1:19090/api/v1/admin/items/$item/live" -H "Authorization: Bearer $token" >"$tmp/sse.txt" || true
if grep -q '^event: stats' "$tmp/sse.txt"; then
	echo "item $item: $(grep -c '^event: stats' "$tmp/sse.txt") stats events within 3 s"
else
	echo "item $item: no stats event within 3 s:"; head -c 300 "$tmp/sse.txt"; status=1
fi
for i in 1 2 3; do
	if grep -q '"level":"ERROR"' "$tmp/seckill-$i.log"; then echo "instance $i logged errors:"; grep '"level":"ERROR"' "$tmp/seckill-$i.log" | head; fi
done
exit $status
