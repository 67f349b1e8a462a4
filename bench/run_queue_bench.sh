#!/usr/bin/env bash
# The queue benchmark, side by side with its peers, in one run (numbers for docs/performance.md):
#   certfleet: N noop jobs (default 100,000), then the same with 1,000,000 jobs already stored;
#   BullMQ on redis-server and graphile-worker on PostgreSQL (bench/peers), same N.
# Usage: bench/run_queue_bench.sh [--jobs N] [--preload M] [--runs R] [--skip-peers]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=100000 preload=1000000 runs=3 peers=1
while (($#)); do
  case "$1" in
    --jobs) jobs=$2; shift 2 ;;
    --preload) preload=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --skip-peers) peers=0; shift ;;
    *) echo "usage: $0 [--jobs N] [--preload M] [--runs R] [--skip-peers]" >&2; exit 2 ;;
  esac
done
build=${CERTFLEET_BENCH_BUILD:-build}
bench/build.sh --build "$build" queue_throughput
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
out=$(mktemp)
for ((i = 1; i <= runs; i++)); do
  "$build/bench/queue_throughput" --jobs "$jobs" | tee -a "$out"
  if ((preload > 0)); then "$build/bench/queue_throughput" --jobs "$jobs" --preload "$preload" | tee -a "$out"; fi
  if ((peers)); then
    bench/peers/install.sh >/dev/null
    bench/peers/run_peers.sh --jobs "$jobs" 2>/dev/null | tee -a "$out"
  fi
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(peer, key, **match):
    v = [r[key] for r in rows if r.get("peer") == peer and key in r and all(r.get(k) == m for k, m in match.items())]
    return statistics.median(v) if v else None
cf = med("certfleet", "processed_per_s", preload=0)
print("\nmedians over runs")
for peer, extra in (("certfleet", {"preload": 0}), ("bullmq", {}), ("graphile-worker", {})):
    p = med(peer, "processed_per_s", **extra)
    if p is None: continue
    print(f"  {peer:16s} processed/s {p:9.0f}  enqueue/s {med(peer, 'enqueue_per_s', **extra):9.0f}  "
          f"p50 {med(peer, 'p50_ms', **extra)} ms  p99 {med(peer, 'p99_ms', **extra)} ms"
          + (f"  certfleet/peer {cf / p:.2f}x" if peer != "certfleet" else ""))
pre = [r for r in rows if r.get("peer") == "certfleet" and r.get("preload", 0) > 0]
if pre:
    print(f"  certfleet with {pre[0]['preload']} stored: processed/s {statistics.median(r['processed_per_s'] for r in pre):.0f}  "
          f"claim p50 {statistics.median(r['claim_p50_ms'] for r in pre):.3f} ms  claim p99 {statistics.median(r['claim_p99_ms'] for r in pre):.3f} ms "
          f"(empty table: p50 {med('certfleet','claim_p50_ms',preload=0):.3f} ms, p99 {med('certfleet','claim_p99_ms',preload=0):.3f} ms)")
PY
rm -f "$out"
