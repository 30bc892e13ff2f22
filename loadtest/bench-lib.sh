# Helpers shared by the bench-*.sh scripts; source it after setting NAME
# (the script's name in messages), OUT, B (the service's base URL) and
# TOKEN (its admin token).

# need CMD: the command is there, installed with apt-get when run as root.
need() {
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "$NAME: installing $1" >&2
    apt-get install -y "$1" >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y "$1" >/dev/null 2>&1; }
  fi
  command -v "$1" >/dev/null || { echo "$NAME: needs $1 (apt-get install $1)" >&2; exit 2; }
}

# admin ARGS...: curl with the admin token.
admin() { curl -fs -H "Authorization: Bearer $TOKEN" "$@"; }

# cpu_of PID: the process's CPU seconds (user + system).
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }

# db_cpu: mariadbd's CPU seconds, for CPU per order.
db_cpu() { cpu_of "$(pidof mariadbd || pidof mysqld)"; }

# drain ITEM [SECONDS]: wait until the lua-async item's queue is empty.
drain() {
  local limit=${2:-120}
  for _ in $(seq 1 $((limit * 10))); do
    local q; q=$(admin "$B/api/v1/admin/items/$1" | jq '(.queue.queued // 0) + (.queue.unacked // 0)')
    [ "$q" = 0 ] && return 0
    sleep 0.1
  done
  echo "$NAME: item $1's queue did not drain in $limit s" >&2; return 1
}
