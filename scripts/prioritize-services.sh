#!/usr/bin/env bash
# Give the test run's backends (MariaDB, the Redis on 6379 and the local
# Redis Cluster's nodes, the Galera nodes of scripts/galera.sh and their
# HAProxy, whose health checks run as its children and inherit its nice
# value) CPU priority over the test processes, as a deployment gives them
# cores of their own.
#
# Why: on this 2-core machine the README's test command keeps 20-30
# threads runnable at its peaks (race-instrumented test binaries, headless
# chromium). A shared Redis then gets a thin slice of a core and answered
# a PING in 0.9 s (measured with an outside probe at a run queue of 31);
# concurrency proofs, which allow no 503, met 3 s Redis silences in CI.
# With the backends at nice -10 the same run's probe saw no PING slower
# than 200 ms (docs/DEVELOPING.md, "Test time").
#
# Linux's autogroup scheduling shares the CPU between sessions first, so
# both the process's nice value and its session's (/proc/PID/autogroup)
# are raised. Lowering a nice value needs root (CAP_SYS_NICE); without it
# the script says so and exits 0: the tests still run, with more risk of
# those silences on a busy machine.
#
#   scripts/prioritize-services.sh [NICE]   (default -10)
set -uo pipefail

nice=${1:--10}
case "$nice" in -[0-9] | -1[0-9] | -20 | [0-9] | 1[0-9]) ;; *)
  echo "prioritize-services: NICE=$nice: want -20..19" >&2
  exit 2
  ;;
esac

pids=$(pgrep -x 'redis-server|mariadbd|mysqld|haproxy' || true)
if [ -z "$pids" ]; then
  echo "prioritize-services: no redis-server, mariadbd or haproxy running" >&2
  exit 0
fi
failed=0
for pid in $pids; do
  what="$(cat "/proc/$pid/comm" 2>/dev/null) (pid $pid)"
  if ! renice -n "$nice" -p "$pid" >/dev/null 2>&1; then
    failed=1
    continue
  fi
  if [ -w "/proc/$pid/autogroup" ]; then
    echo "$nice" >"/proc/$pid/autogroup" 2>/dev/null || failed=1
  fi
  echo "prioritize-services: $what at nice $nice"
done
if [ "$failed" -ne 0 ]; then
  echo "prioritize-services: could not raise every backend's priority (needs root);" \
    "the tests run anyway, with more risk of a starved backend on a busy machine" >&2
fi
exit 0
