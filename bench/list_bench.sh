#!/usr/bin/env bash
# Job list benchmark (issue 14): with JOBS jobs stored across every status and four types, wrk
# against GET …/jobs with a query that changes on every request (bench/wrk/job_list.lua): page 1
# of every tab × type, page=2000 of every tab × type, and the cursor form from deep points. No
# response cache exists: each answer (its page and every tab's count) is read from the store.
#   bench/list_bench.sh [BUILD_DIR=build] [JOBS=1000000] [DURATION=10s] [CONNECTIONS=8]
# Installs wrk and sqlite3 when missing (bench/peers/install.sh --http). Prints one line per mode: requests/s, p50, p99.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=${2:-1000000}
duration=${3:-10s}
conns=${4:-8}
bin=$build/certfleet
bench/build.sh --build "$build" certfleet
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
bench/peers/install.sh --http
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

t0=$(date +%s)
echo "list_bench: storing $jobs jobs"
"$bin" store init --data "$work/var" >/dev/null
"$bin" jobs enqueue --data "$work/var" --type noop --count "$jobs" --run-at 4102444800000 >/dev/null
# Spread them over statuses and types the way a long-lived store looks: mostly completed, a few
# percent dead/cancelled/failed, a handful active. A type change is not a status change, so the
# tab counts and the block counts are rebuilt afterwards exactly as migrations 7 and 10 build them.
sqlite3 "$work/var/certfleet.db" <<'SQL'
UPDATE jobs SET
  type = CASE rid % 4 WHEN 0 THEN 'noop' WHEN 1 THEN 'distribution_execute' WHEN 2 THEN 'notification_send' ELSE 'noop' END,
  status = CASE WHEN rid % 10000 = 7 THEN 'active'
                WHEN rid % 100 < 80 THEN 'completed'
                WHEN rid % 100 < 88 THEN 'pending'
                WHEN rid % 100 < 92 THEN 'failed'
                WHEN rid % 100 < 96 THEN 'dead'
                ELSE 'cancelled' END,
  locked_until = CASE WHEN rid % 10000 = 7 THEN 4102444800000 ELSE NULL END;
DELETE FROM job_counts;
INSERT INTO job_counts (project_id, type, status, n) SELECT project_id, type, status, count(*) FROM jobs GROUP BY 1, 2, 3;
DELETE FROM job_blocks;
INSERT INTO job_blocks (project_id, block, type, status, n)
  SELECT project_id, rid >> 10, type, status, count(*) FROM jobs GROUP BY 1, 2, 3, 4;
ANALYZE;
SQL
echo "list_bench: stored and spread in $(( $(date +%s) - t0 )) s; DB $(du -m "$work/var/certfleet.db" | cut -f1) MiB"

"$bin" serve --mode api --listen 127.0.0.1:0 --data "$work/var" --set log_level=warn >"$work/serve.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "listen=" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
port=$(grep -o 'listen=[0-9.]*:[0-9]*' "$work/serve.out" | sed 's/.*://')
token=$(cat "$work/var/owner-token")
base="http://127.0.0.1:$port/api/v1/projects/default/jobs"
# Cursors from deep in the list: the ids at pages 1000, 2000, 3000 and 4000 of 25.
cursors=""
for p in 1000 2000 3000 4000; do
  cursors+=$(curl -s -H "Authorization: Bearer $token" "$base?page=$p&page_size=1" | grep -o '"id":"[0-9a-f]*"' | head -1 | cut -d'"' -f4)" "
done
curl -s -H "Authorization: Bearer $token" "$base?page_size=1" | grep -o '"counts":{[^}]*}' | sed 's/^/list_bench: /'

for mode in first deep cursor; do
  out=$(LIST_MODE=$mode LIST_TOKEN=$token LIST_CURSORS=$cursors \
        wrk -t2 -c"$conns" -d"$duration" --latency -s bench/wrk/job_list.lua "http://127.0.0.1:$port/")
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $4}' <<<"$out")
  echo "list_bench: $mode: $rps req/s, p50 $p50, p99 $p99${non2xx:+, non-2xx $non2xx}"
done
rss=$(awk '/VmRSS/ {print $2}' "/proc/${pids[0]}/status")
echo "list_bench: server RSS after the runs: $((rss / 1024)) MiB"
