#!/usr/bin/env bash
# Peer job-queue benchmarks for certfleet: BullMQ on a private redis-server and graphile-worker
# on a private PostgreSQL 15 cluster, both on 127.0.0.1 only, both stopped by PID at the end.
# Prints one JSON line per peer on stdout; progress goes to stderr.
#
#   bench/peers/run_peers.sh [--jobs N] [--concurrency C] [--only bullmq|graphile-worker]
#                            [--timeout SECONDS] [--graphile-concurrency C]
#                            [--local-queue SIZE] [--complete-batch-ms MS]
#                            [--latency-jobs M] [--latency-rate R]
#
# Run bench/peers/install.sh once first (it is idempotent).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

jobs=100000
concurrency=50
graphile_concurrency=""
only=""
timeout_s=""
local_queue=500
complete_batch_ms=100
latency_jobs=1000
latency_rate=200
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --graphile-concurrency) graphile_concurrency="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --local-queue) local_queue="$2"; shift 2 ;;
    --complete-batch-ms) complete_batch_ms="$2"; shift 2 ;;
    --latency-jobs) latency_jobs="$2"; shift 2 ;;
    --latency-rate) latency_rate="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "run_peers.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$jobs" =~ ^[0-9]+$ ]] && [ "$jobs" -gt 0 ] || { echo "run_peers.sh: --jobs must be a positive integer" >&2; exit 2; }
case "$only" in ""|bullmq|graphile|graphile-worker) ;; *) echo "run_peers.sh: --only bullmq|graphile-worker" >&2; exit 2 ;; esac
graphile_concurrency="${graphile_concurrency:-$concurrency}"
# Per-peer time limit: generous for a 2-core shared machine (a few thousand jobs/s at worst).
timeout_s="${timeout_s:-$(( 120 + jobs / 500 ))}"

log() { echo "[run_peers] $*" >&2; }

if [ ! -d "$here/node_modules/bullmq" ] || [ ! -d "$here/node_modules/graphile-worker" ] \
   || ! command -v redis-server >/dev/null || [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
  log "dependencies missing: running install.sh"
  "$here/install.sh"
fi

PGBIN=/usr/lib/postgresql/15/bin
workdir="$(mktemp -d /tmp/certfleet-peers.XXXXXX)"
chmod 755 "$workdir"
redis_pid=""
node_pid=""
pg_started=""
as_pg=()
if [ "$(id -u)" -eq 0 ]; then as_pg=(runuser -u postgres --); fi

cleanup() {
  local rc=$?
  set +e
  if [ -n "$node_pid" ] && kill -0 "$node_pid" 2>/dev/null; then
    kill "$node_pid"; wait "$node_pid" 2>/dev/null
  fi
  if [ -n "$redis_pid" ] && kill -0 "$redis_pid" 2>/dev/null; then
    kill "$redis_pid"
    for _ in $(seq 50); do kill -0 "$redis_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$redis_pid" 2>/dev/null && kill -9 "$redis_pid"
  fi
  if [ -n "$pg_started" ] && [ -f "$workdir/pg/data/postmaster.pid" ]; then
    local pg_pid
    pg_pid="$(head -1 "$workdir/pg/data/postmaster.pid")"
    "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$workdir/pg/data" -m immediate -w -t 20 stop >/dev/null 2>&1
    if [ -n "$pg_pid" ] && kill -0 "$pg_pid" 2>/dev/null; then kill -9 "$pg_pid"; fi
  fi
  rm -rf "$workdir"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A free TCP port on 127.0.0.1, at or above $1.
free_port() {
  local p="$1"
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}

# Runs a node benchmark with a hard time limit; its JSON line goes to stdout.
# Runs in the background and waited for, so that a signal to this script is handled at once.
run_node() {
  local name="$1"; shift
  log "$name: node $* (timeout ${timeout_s}s)"
  local rc=0
  (cd "$here" && exec timeout -k 10 "$timeout_s" node "$@") &
  node_pid=$!
  wait "$node_pid" || rc=$?
  node_pid=""
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" -eq 124 ]; then log "$name: timed out after ${timeout_s}s"; else log "$name: FAILED (exit $rc)"; fi
    printf '{"peer":"%s","jobs":%s,"error":"%s"}\n' "$name" "$jobs" \
      "$([ "$rc" -eq 124 ] && echo "timed out after ${timeout_s}s" || echo "exit code $rc")"
    return 1
  fi
}

status=0

if [ -z "$only" ] || [ "$only" = bullmq ]; then
  mkdir -p "$workdir/redis"
  rport="$(free_port 16379)"
  log "bullmq: starting redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$rport"
  redis-server --bind 127.0.0.1 --port "$rport" --dir "$workdir/redis" \
    --appendonly yes --appendfsync everysec --save "" \
    --daemonize no --protected-mode yes --logfile "$workdir/redis/redis.log" &
  redis_pid=$!
  for _ in $(seq 100); do
    redis-cli -h 127.0.0.1 -p "$rport" ping 2>/dev/null | grep -q PONG && break
    kill -0 "$redis_pid" 2>/dev/null || { cat "$workdir/redis/redis.log" >&2; exit 1; }
    sleep 0.1
  done
  run_node bullmq bullmq_bench.js --jobs "$jobs" --concurrency "$concurrency" \
     --host 127.0.0.1 --port "$rport" \
     --latency-jobs "$latency_jobs" --latency-rate "$latency_rate" || status=1
  kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; redis_pid=""
fi

if [ -z "$only" ] || [ "$only" = graphile ] || [ "$only" = graphile-worker ]; then
  mkdir -p "$workdir/pg"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$workdir/pg"
  pport="$(free_port 15432)"
  log "graphile: initdb + pg_ctl start ($("$PGBIN/postgres" --version)) on 127.0.0.1:$pport"
  "${as_pg[@]}" "$PGBIN/initdb" -D "$workdir/pg/data" -U postgres --auth=trust -E UTF8 --no-locale \
    >"$workdir/pg/initdb.log" 2>&1 || { cat "$workdir/pg/initdb.log" >&2; exit 1; }
  pg_started=1
  "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$workdir/pg/data" -l "$workdir/pg/pg.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $pport -c unix_socket_directories=$workdir/pg -c shared_buffers=256MB -c max_connections=100" \
    start >/dev/null || { cat "$workdir/pg/pg.log" >&2; exit 1; }
  run_node graphile-worker graphile_bench.js --jobs "$jobs" --concurrency "$graphile_concurrency" \
     --local-queue "$local_queue" --complete-batch-ms "$complete_batch_ms" \
     --fail-batch-ms "$complete_batch_ms" \
     --latency-jobs "$latency_jobs" --latency-rate "$latency_rate" \
     --db "postgres://postgres@127.0.0.1:$pport/postgres" || status=1
  "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$workdir/pg/data" -m fast -w -t 30 stop >/dev/null || true
  pg_started=""
fi

exit "$status"
