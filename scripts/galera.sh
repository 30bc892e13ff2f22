#!/usr/bin/env bash
# A three-node MariaDB Galera cluster on loopback behind HAProxy, for running
# seckill (and its failover drill) on a database tier that can lose a node.
#
#   scripts/galera.sh start          bootstrap nodes 1-3 (ports 3311-3313) and HAProxy on 3310
#   scripts/galera.sh stop           stop HAProxy and every node, remove the data
#   scripts/galera.sh status         each node's process, wsrep state and cluster size; HAProxy
#   scripts/galera.sh url            the DSN to give SECKILL_MYSQL_DSN (database seckill, through HAProxy)
#   scripts/galera.sh primary        the node HAProxy sends writes to now (node1, node2 or node3)
#   scripts/galera.sh kill N         SIGKILL node N's server
#   scripts/galera.sh stall N|resume N   SIGSTOP / SIGCONT node N's server
#   scripts/galera.sh restart N      start node N again: it rejoins by IST from the others' gcache
#   scripts/galera.sh via N PORT     HAProxy reaches node N (its traffic and checks) through 127.0.0.1:PORT,
#                                    e.g. a fault proxy in front of it; via N alone: directly again
#   scripts/galera.sh sql QUERY      run QUERY through HAProxy, rows one a line, tab-separated
#
# HAProxy sends every connection to one node at a time and keeps it there
# after a failover, the usual single-writer Galera setup: one node takes the
# hot row's writes, so they never meet a certification conflict from another
# writer. The health check (every second) elects that node: the writer while
# it is Synced (wsrep state 4), else the first other Synced node checked. A
# node marked down has its sessions shut, so clients on it see a cut at once
# rather than waiting on a stalled socket.
#
# Ports: MySQL 3311-3313, group communication 4571-4573, IST 4581-4583,
# SST (rsync) 4591-4593, HAProxy 3310 and its stats socket. Data under
# $GALERA_DIR (default /tmp/seckill-galera). Needs mariadb-server (with
# galera-4) and haproxy (apt-get install -y haproxy; .ci/run installs it).
set -euo pipefail

dir=${GALERA_DIR:-/tmp/seckill-galera}
front=${GALERA_PORT:-3310}
provider=${GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
nodes=(1 2 3)

die() { echo "galera.sh: $*" >&2; exit 1; }
port() { echo $((3310 + $1)); }
sock() { echo "$dir/node$1/mysqld.sock"; }
pidof_node() { [ -f "$dir/node$1/mysqld.pid" ] && cat "$dir/node$1/mysqld.pid" || true; }
# alive PID: the process exists and is not a zombie (a killed server whose
# parent has not reaped it yet holds no port and no file, but kill -0
# still finds it).
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
local_sql() { mariadb -uroot --socket="$(sock "$1")" --connect-timeout=2 -Nse "$2"; }
node_arg() {
  case "${1:-}" in 1 | 2 | 3) ;; *) die "name a node: 1, 2 or 3" ;; esac
}

write_cnf() { # node
  local n=$1 gcomm="gcomm://127.0.0.1:4571,127.0.0.1:4572,127.0.0.1:4573"
  mkdir -p "$dir/node$n/data"
  # The servers run as mysql, as Debian's own: run as root, a joiner's
  # rsync daemon would drop to nobody and could not write its datadir.
  chown -R mysql:mysql "$dir/node$n"
  cat >"$dir/node$n/my.cnf" <<CNF
[mysqld]
user=mysql
datadir=$dir/node$n/data
socket=$(sock "$n")
pid-file=$dir/node$n/mysqld.pid
log-error=$dir/node$n/error.log
port=$(port "$n")
bind-address=127.0.0.1
skip-name-resolve
max_connections=500
# Galera needs row events and InnoDB; interleaved auto-increment locks so
# that certification, not a table lock, orders concurrent inserts.
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
innodb_buffer_pool_size=128M
innodb_flush_log_at_trx_commit=1
wsrep_on=ON
wsrep_provider=$provider
wsrep_cluster_name=seckill
wsrep_cluster_address=$gcomm
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1:$((4570 + n))
wsrep_provider_options="base_host=127.0.0.1;base_port=$((4570 + n));ist.recv_addr=127.0.0.1:$((4580 + n));gcache.size=256M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$((4590 + n))
CNF
}

start_node() { # node [extra mariadbd args...]
  local n=$1
  shift
  alive "$(pidof_node "$n")" && die "node$n is already running"
  setsid /usr/sbin/mariadbd --defaults-file="$dir/node$n/my.cnf" "$@" >>"$dir/node$n/stdout.log" 2>&1 < /dev/null &
}

synced() { # node: its wsrep state is Synced
  [ "$(local_sql "$1" "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='WSREP_LOCAL_STATE'" 2>/dev/null)" = 4 ]
}

wait_synced() { # node, seconds
  local n=$1 left=$(($2 * 5))
  until synced "$n"; do
    left=$((left - 1))
    if [ "$left" -le 0 ]; then
      tail -n 30 "$dir/node$n/error.log" >&2 || true
      die "node$n did not reach Synced in $2 s (its log is above)"
    fi
    sleep 0.2
  done
}

write_haproxy() {
  # The check elects the writer: a node passes only while it is the one in
  # $dir/writer and Synced; another node takes its place (the first Synced
  # one to be checked) only once the writer is not Synced. So HAProxy sees
  # one server up at a time and never moves the writes back when an old
  # writer returns, which would make two writers for a moment. (A stick
  # table cannot do it: HAProxy does not update an entry whose server went
  # down, so the writes go back to the first node when it returns.)
  cat >"$dir/check.sh" <<CHECK
#!/bin/sh
# HAProxy external check: \$4 the server's port. HAProxy gives the process
# one check interval (1 s), so each probe is bounded at half of it.
synced() {
  # timeout: a stopped server accepts the connection (the kernel does)
  # and never sends its greeting, which --connect-timeout does not bound.
  [ "\$(timeout 0.5 mariadb -uroot -h 127.0.0.1 -P "\$1" --connect-timeout=1 -Nse \\
    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='WSREP_LOCAL_STATE'" 2>/dev/null)" = 4 ]
}
me=\$4
writer=\$(cat "$dir/writer" 2>/dev/null)
if [ "\$writer" = "\$me" ]; then synced "\$me"; exit; fi
synced "\$me" || exit 1
# Probe the writer without the lock; take its place only after it missed
# two probes in a row (a busy writer that misses one keeps its role), and
# only if nobody else took it meanwhile.
if [ -n "\$writer" ] && synced "\$writer"; then rm -f "$dir/missed.\$writer"; exit 1; fi
exec 9>"$dir/writer.lock"
flock 9
[ "\$(cat "$dir/writer" 2>/dev/null)" = "\$writer" ] || exit 1
if [ -n "\$writer" ] && [ -z "\$(find "$dir" -maxdepth 1 -name "missed.\$writer" -newermt '-3 seconds' 2>/dev/null)" ]; then
  touch "$dir/missed.\$writer"
  exit 1
fi
rm -f "$dir/missed.\$writer"
echo "\$me" >"$dir/writer"
CHECK
  chmod +x "$dir/check.sh"
  echo 3311 >"$dir/writer"
  cat >"$dir/haproxy.cfg" <<CFG
global
  daemon
  pidfile $dir/haproxy.pid
  stats socket $dir/haproxy.sock mode 600 level admin
  external-check
  insecure-fork-wanted
  maxconn 4000

defaults
  mode tcp
  timeout connect 1s
  timeout client 1h
  timeout server 1h
  timeout check 3s

listen galera
  bind 127.0.0.1:$front
  balance first
  option external-check
  external-check path "/usr/bin:/bin"
  external-check command $dir/check.sh
  # fall 2: a writer that misses one check keeps the writes; rise 1: the
  # check itself elects, so the new writer takes them at its first pass.
  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions
  server node1 127.0.0.1:3311 check
  server node2 127.0.0.1:3312 check
  server node3 127.0.0.1:3313 check
CFG
}

cmd=${1:-}
case $cmd in
start)
  command -v haproxy >/dev/null || die "haproxy is not installed: apt-get install -y haproxy"
  [ -x "$provider" ] || [ -f "$provider" ] || die "no Galera provider at $provider (Debian's galera-4)"
  if [ -d "$dir" ] && alive "$(pidof_node 1)"; then
    die "already running (scripts/galera.sh stop first)"
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  chmod 755 "$dir"
  for n in "${nodes[@]}"; do write_cnf "$n"; done
  echo "galera: bootstrapping node1 on $(port 1)"
  mariadb-install-db --defaults-file="$dir/node1/my.cnf" --user=mysql --auth-root-authentication-method=normal \
    --skip-test-db >"$dir/node1/install.log" 2>&1 || { cat "$dir/node1/install.log" >&2; die "mariadb-install-db failed"; }
  start_node 1 --wsrep-new-cluster
  wait_synced 1 60
  # Root over TCP from loopback, no password, as the machine's own server.
  local_sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; CREATE DATABASE IF NOT EXISTS seckill"
  for n in 2 3; do
    echo "galera: node$n joins on $(port "$n") (state transfer by rsync)"
    start_node "$n"
    wait_synced "$n" 120
  done
  write_haproxy
  haproxy -f "$dir/haproxy.cfg" || die "haproxy did not start"
  # Until the checks' first round, HAProxy counts every node UP; then one.
  for _ in $(seq 1 50); do
    ups=$(echo "show stat" | socat stdio "unix-connect:$dir/haproxy.sock" 2>/dev/null | awk -F, '$1=="galera" && $2 ~ /^node/ && $18 ~ /^UP/' | wc -l)
    [ "$ups" = 1 ] && mariadb -uroot -h127.0.0.1 -P"$front" --connect-timeout=1 -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.2
  done
  echo "galera: 3 nodes Synced, HAProxy on 127.0.0.1:$front, writes to $("$0" primary)"
  echo "galera: SECKILL_MYSQL_DSN='$("$0" url)'"
  ;;
stop)
  if [ -f "$dir/haproxy.pid" ]; then kill "$(cat "$dir/haproxy.pid")" 2>/dev/null || true; fi
  for n in "${nodes[@]}"; do
    p=$(pidof_node "$n")
    if [ -n "$p" ]; then
      kill -CONT "$p" 2>/dev/null || true
      kill -9 "$p" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
  echo "galera: stopped"
  ;;
status)
  for n in "${nodes[@]}"; do
    p=$(pidof_node "$n")
    if alive "$p"; then
      st=$(local_sql "$n" "SELECT GROUP_CONCAT(VARIABLE_VALUE ORDER BY VARIABLE_NAME SEPARATOR ' ') FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('WSREP_LOCAL_STATE_COMMENT','WSREP_CLUSTER_SIZE','WSREP_CLUSTER_STATUS')" 2>/dev/null || echo "not answering")
      echo "node$n port $(port "$n") pid $p: $st"
    else
      echo "node$n port $(port "$n"): down"
    fi
  done
  if [ -S "$dir/haproxy.sock" ]; then
    echo "show stat" | socat stdio "unix-connect:$dir/haproxy.sock" | awk -F, '$1=="galera" && $2 ~ /^node/ {print "haproxy " $2 ": " ($18 ~ /^UP/ ? "UP, takes the writes" : $18 ", not the writer (standby or failed)")}'
  else
    echo "haproxy: down"
  fi
  ;;
url)
  echo "root@tcp(127.0.0.1:$front)/seckill?parseTime=true"
  ;;
primary)
  # HAProxy's own view, read from its stats socket: with balance first the
  # first server UP takes every new connection (the checks keep one UP at a
  # time; before their first round all are). A query through HAProxy would
  # meet what the clients meet (a rejoining node refusing the handshake, a
  # stalled one never answering) instead of answering the question.
  [ -S "$dir/haproxy.sock" ] || die "haproxy is not running (scripts/galera.sh start)"
  up=$(echo "show stat" | socat stdio "unix-connect:$dir/haproxy.sock" |
    awk -F, '$1=="galera" && $2 ~ /^node/ && $18 ~ /^UP/ {print $2; exit}')
  [ -n "$up" ] || die "haproxy has no node up: none is Synced, or its checks have not elected one yet"
  echo "$up"
  ;;
kill)
  node_arg "${2:-}"
  p=$(pidof_node "$2")
  [ -n "$p" ] || die "node$2 is not running"
  kill -9 "$p"
  # Return once it is gone, so that a restart right after finds it so.
  for _ in $(seq 1 100); do alive "$p" || break; sleep 0.1; done
  alive "$p" && die "node$2 (pid $p) still runs 10 s after SIGKILL"
  echo "galera: node$2 (pid $p) killed"
  ;;
stall | resume)
  node_arg "${2:-}"
  p=$(pidof_node "$2")
  [ -n "$p" ] || die "node$2 is not running"
  if [ "$cmd" = stall ]; then kill -STOP "$p"; else kill -CONT "$p"; fi
  echo "galera: node$2 (pid $p): $cmd"
  ;;
restart)
  node_arg "${2:-}"
  p=$(pidof_node "$2")
  if alive "$p"; then die "node$2 is running (pid $p)"; fi
  rm -f "$dir/node$2/mysqld.pid"
  # A killed node's grastate.dat says seqno -1: recover its last committed
  # position from InnoDB first (what galera_recovery does under systemd),
  # so that it asks for the missing writes alone (IST), not a full copy.
  # Its donor is a node that is not taking the writes: a donor is
  # desynced while it sends, and HAProxy would move the writes off it.
  args=()
  recovered=$(/usr/sbin/mariadbd --defaults-file="$dir/node$2/my.cnf" --wsrep-recover \
    --log-error="$dir/node$2/recover.log" >/dev/null 2>&1; \
    sed -n 's/.*WSREP: Recovered position: *//p' "$dir/node$2/recover.log" | tail -n 1)
  [ -n "$recovered" ] && args+=("--wsrep-start-position=$recovered")
  writer=$("$0" primary 2>/dev/null || true)
  for n in "${nodes[@]}"; do
    if [ "$n" != "$2" ] && [ "node$n" != "$writer" ] && synced "$n"; then
      args+=("--wsrep-sst-donor=node$n,")
      break
    fi
  done
  start_node "$2" "${args[@]}"
  wait_synced "$2" 120
  if grep -q "IST received" "$dir/node$2/error.log"; then how="by IST from ${recovered:-?}"; else how="by a full state transfer"; fi
  echo "galera: node$2 rejoined $how and is Synced"
  ;;
via)
  # HAProxy's runtime API moves the server; the writer file names a node by
  # the port its checks see, so it moves with it (under the checks' lock),
  # first: a check in between then fails once, below fall 2.
  node_arg "${2:-}"
  to=${3:-$(port "$2")}
  exec 9>"$dir/writer.lock"
  flock 9
  from=$(echo "show servers state galera" | socat stdio "unix-connect:$dir/haproxy.sock" | awk -v s="node$2" '$4==s {print $19}')
  [ -n "$from" ] || die "haproxy has no server node$2"
  [ "$(cat "$dir/writer" 2>/dev/null)" = "$from" ] && echo "$to" >"$dir/writer"
  out=$(echo "set server galera/node$2 addr 127.0.0.1 port $to" | socat stdio "unix-connect:$dir/haproxy.sock")
  case $out in *"changed from"* | *"no need to change"* | "") ;; *) die "haproxy: $out" ;; esac
  echo "galera: haproxy reaches node$2 through 127.0.0.1:$to"
  ;;
sql)
  shift
  [ $# -gt 0 ] || die "usage: galera.sh sql QUERY"
  mariadb -uroot -h127.0.0.1 -P"$front" --connect-timeout=2 -D seckill -Nse "$*"
  ;;
*)
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  [ -z "$cmd" ] && exit 2
  die "unknown command: $cmd"
  ;;
esac
