#!/usr/bin/env bash
# API benchmark (issue 3): with 100,000 jobs stored, wrk against the job list and job detail
# routes of `certfleet serve --mode api`, side by side in the same run with bench/beast_ceiling (a
# minimal Beast server answering a fixed body: the ceiling on this machine); then the WebSocket
# fan-out (bench/ws_fanout: 1,000 subscribers x 10,000 lines).
#   bench/api_bench.sh [BUILD_DIR=build] [JOBS=100000] [DURATION=10s] [CONNECTIONS=64]
# Installs wrk when missing (bench/peers/install.sh --http). Prints one summary line per measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=${2:-100000}
duration=${3:-10s}
conns=${4:-64}
bin=$build/certfleet
bench/build.sh --build "$build" certfleet beast_ceiling ws_fanout
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
bench/peers/install.sh --http

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

echo "api_bench: storing $jobs jobs (run_at far in the future: they stay pending)"
"$bin" store init --data "$work/var" >/dev/null
"$bin" jobs enqueue --data "$work/var" --type noop --count "$jobs" --run-at 4102444800000 >/dev/null

"$bin" serve --mode api --listen 127.0.0.1:0 --data "$work/var" --set log_level=warn >"$work/serve.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "listen=" "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
port=$(grep -o 'listen=[0-9.]*:[0-9]*' "$work/serve.out" | sed 's/.*://')
token=$(cat "$work/var/owner-token")
auth="Authorization: Bearer $token"
base="http://127.0.0.1:$port/api/v1/projects/default/jobs"
id=$(curl -s -H "$auth" "$base?page_size=1&page=5000" | sed 's/.*"items":\[{"id":"\([0-9a-f]*\)".*/\1/')
list_body=$(curl -s -H "$auth" "$base" | wc -c)

"$build/bench/beast_ceiling" 0 "$list_body" >"$work/ceiling.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q "listening" "$work/ceiling.out" 2>/dev/null && break; sleep 0.1; done
cport=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$work/ceiling.out")

run() {  # name url -> "name: N req/s, p99 X"
  local out rps p99
  out=$(wrk -t2 -c"$conns" -d"$duration" --latency -H "$auth" "$2")
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  echo "$1: $rps req/s, p99 $p99" >&2
  echo "$rps"
}
echo "api_bench: wrk -t2 -c$conns -d$duration; list body $list_body bytes (25 jobs)"
ceiling=$(run "beast ceiling (fixed $list_body-byte body)" "http://127.0.0.1:$cport/")
list=$(run "GET …/jobs (page 1 of $jobs)" "$base")
detail=$(run "GET …/jobs/{id}" "$base/$id")
deep=$(run "GET …/jobs?page=2000 (deep page)" "$base?page=2000")
awk -v c="$ceiling" -v l="$list" -v d="$detail" \
  'BEGIN {printf "api_bench: list %.0f%% of the ceiling, detail %.0f%% (target for the list: >= 50%%)\n", 100*l/c, 100*d/c}'
rss=$(awk '/VmRSS/ {print $2}' "/proc/${pids[0]}/status")
echo "api_bench: server RSS after the HTTP runs: $((rss / 1024)) MiB"

echo "api_bench: WebSocket fan-out"
"$build/bench/ws_fanout" 1000 10000
