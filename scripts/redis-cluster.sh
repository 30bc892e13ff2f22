#!/usr/bin/env bash
# A local Redis Cluster for development and CI: 3 masters, no replicas, on
# loopback, with Debian's redis-server (cluster mode) and
# `redis-cli --cluster create`. Nothing is kept on disk (--save "",
# --appendonly no): a restart is an empty cluster. A node that is down
# stops only its own slots (--cluster-require-full-coverage no: the other
# masters' items keep selling; docs/OPERATIONS.md).
#
#   scripts/redis-cluster.sh start    start it (idempotent: up and ok -> done)
#   scripts/redis-cluster.sh stop     stop its nodes and remove their files
#   scripts/redis-cluster.sh status   print each node's cluster_state; exit 1 unless all ok
#   scripts/redis-cluster.sh url      print its SECKILL_REDIS_URL (SECKILL_REDIS_MODE=cluster)
#
# Environment:
#   SECKILL_CLUSTER_PORT_BASE  first port minus one; the nodes listen on
#                              BASE+1..BASE+3 (default 7000: 7001-7003)
#   SECKILL_CLUSTER_DIR        the nodes' files (default /tmp/seckill-redis-cluster)
#   SECKILL_CLUSTER_TIMEOUT    seconds to wait for cluster_state:ok (default 30)
set -euo pipefail

base=${SECKILL_CLUSTER_PORT_BASE:-7000}
dir=${SECKILL_CLUSTER_DIR:-/tmp/seckill-redis-cluster}
timeout=${SECKILL_CLUSTER_TIMEOUT:-30}
host=127.0.0.1
masters=3

die() { echo "redis-cluster: $*" >&2; exit 1; }

case "$base" in '' | *[!0-9]*) die "SECKILL_CLUSTER_PORT_BASE=$base: want a number, e.g. 7000" ;; esac
[ "$base" -ge 1 ] && [ "$((base + masters))" -le 65535 ] ||
  die "SECKILL_CLUSTER_PORT_BASE=$base: the ports $((base + 1))-$((base + masters)) must lie in 1-65535"
case "$timeout" in '' | *[!0-9]*) die "SECKILL_CLUSTER_TIMEOUT=$timeout: want whole seconds" ;; esac

ports() { seq "$((base + 1))" "$((base + masters))"; }

url() {
  local first=$((base + 1)) u
  u="redis://$host:$first"
  local sep="?"
  for p in $(seq "$((base + 2))" "$((base + masters))"); do
    u="$u${sep}addr=$host:$p"
    sep="&"
  done
  echo "$u"
}

cli() { redis-cli -h "$host" -p "$1" "${@:2}"; }

# answers PORT: the node answers PING.
answers() { [ "$(cli "$1" ping 2>/dev/null)" = "PONG" ]; }

# state PORT: the node's cluster_state (ok, fail), or "down".
state() {
  local s
  s=$(cli "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p') || true
  echo "${s:-down}"
}

# known PORT: how many nodes the node knows (1 when it is alone).
known() { cli "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p'; }

all_ok() {
  for p in $(ports); do
    [ "$(state "$p")" = ok ] || return 1
  done
}

status() {
  local bad=0
  for p in $(ports); do
    local s
    s=$(state "$p")
    echo "$host:$p cluster_state:$s"
    [ "$s" = ok ] || bad=1
  done
  return "$bad"
}

start() {
  command -v redis-server >/dev/null || die "redis-server is not installed (Debian: apt-get install redis-server)"
  command -v redis-cli >/dev/null || die "redis-cli is not installed (Debian: apt-get install redis-tools)"
  if all_ok; then
    echo "redis-cluster: already up on ports $((base + 1))-$((base + masters)): $(url)"
    return 0
  fi
  # A port held by something else fails the start before any node starts.
  for p in $(ports); do
    if answers "$p" && ! cli "$p" info cluster 2>/dev/null | tr -d '\r' | grep -q '^cluster_enabled:1'; then
      die "port $p answers but is not a cluster-enabled Redis (another server holds it?); set SECKILL_CLUSTER_PORT_BASE"
    fi
  done
  mkdir -p "$dir" || die "cannot create $dir"
  # With no node up, start fresh: a nodes.conf left from an earlier run
  # remembers peers that are gone. With some up, a node that is down
  # restarts with its nodes.conf and rejoins with its slots (empty).
  local fresh=1
  for p in $(ports); do
    if answers "$p"; then fresh=0; fi
  done
  for p in $(ports); do
    if answers "$p"; then
      continue
    fi
    mkdir -p "$dir/$p"
    [ "$fresh" = 0 ] || rm -f "$dir/$p/nodes.conf"
    redis-server --port "$p" --bind "$host" --dir "$dir/$p" \
      --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --cluster-require-full-coverage no \
      --save "" --appendonly no --daemonize yes \
      --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log" ||
      die "redis-server on port $p did not start; see $dir/$p/redis.log"
  done
  for p in $(ports); do
    local i=0
    until answers "$p"; do
      i=$((i + 1))
      [ "$i" -le 50 ] || die "redis-server on port $p does not answer; see $dir/$p/redis.log"
      sleep 0.1
    done
    cli "$p" info cluster 2>/dev/null | tr -d '\r' | grep -q '^cluster_enabled:1' ||
      die "port $p answers but is not a cluster-enabled Redis (another server holds it?); set SECKILL_CLUSTER_PORT_BASE"
  done
  # Create the cluster unless its nodes already know each other (a start
  # that was interrupted after create: only wait for it).
  if [ "$(known "$((base + 1))")" != "$masters" ]; then
    local nodes=()
    for p in $(ports); do
      [ "$(known "$p")" = 1 ] ||
        die "node $host:$p already belongs to another cluster; run '$0 stop' (or pick another SECKILL_CLUSTER_PORT_BASE)"
      nodes+=("$host:$p")
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
      die "redis-cli --cluster create failed: $(tail -n 5 "$dir/create.log")"
  fi
  local deadline=$((SECONDS + timeout))
  until all_ok; do
    [ "$SECONDS" -lt "$deadline" ] || { status >&2 || true; die "cluster_state is not ok on every node after ${timeout}s"; }
    sleep 0.2
  done
  echo "redis-cluster: up on ports $((base + 1))-$((base + masters)): $(url)"
}

# ours PORT: the server on PORT is a node this script started (its
# working dir is ours), not a stranger's Redis to leave alone.
ours() { [ "$(cli "$1" config get dir 2>/dev/null | tr -d '\r' | sed -n 2p)" = "$dir/$1" ]; }

stop() {
  local p pid strangers=""
  for p in $(ports); do
    if answers "$p"; then
      if ! ours "$p"; then
        strangers="$strangers $p"
        continue
      fi
      cli "$p" shutdown nosave >/dev/null 2>&1 || true
    fi
  done
  for p in $(ports); do
    case " $strangers " in *" $p "*) continue ;; esac
    local i=0
    while answers "$p"; do
      i=$((i + 1))
      if [ "$i" -gt 50 ]; then
        pid=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
        sleep 0.2
        answers "$p" && die "the node on port $p does not stop"
        break
      fi
      sleep 0.1
    done
  done
  for p in $(ports); do
    rm -rf "${dir:?}/$p"
  done
  rm -f "$dir/create.log"
  rmdir "$dir" 2>/dev/null || true
  [ -z "$strangers" ] || die "left alone: the Redis on port(s)$strangers was not started by this script (its dir is not under $dir)"
  echo "redis-cluster: stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
url) url ;;
*)
  echo "usage: $0 start|stop|status|url" >&2
  exit 2
  ;;
esac
