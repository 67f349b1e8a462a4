#!/usr/bin/env bash
# A/B: the benchmarks of docs/performance.md that touch the code a change moved, for two builds on
# the same machine minutes apart, alternating (A B A B ...), so the machine's drift hits both.
#   bench/ab.sh OLD_TREE NEW_TREE [PAIRS=3]
# Each tree is a checkout with a RelWithDebInfo build in TREE/build holding certfleet and
# bench/{queue_throughput,beast_ceiling,ws_fanout,ssh_fanout} (tests on: ssh_fanout uses the
# testbed). Runs, per pair and tree: queue_throughput --jobs 100000; api_bench.sh (job list,
# job detail, beast ceiling, ws_fanout 1000 x 10000); run_ssh_bench.sh --tools certfleet --runs 1
# (100 and 500 targets, concurrency 10 and 50). As root (the SSH benchmark). Raw output only:
# compare the medians by hand.
set -euo pipefail
(($# >= 2)) || { sed -n '4p' "$0" >&2; exit 2; }
# The trees are checkouts of any age (bench/build.sh may not exist in the old one): each must hold
# its build already. The check mode (tests/bench/commands_test.py) stops at the arguments.
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
old=$(realpath "$1") new=$(realpath "$2") pairs=${3:-3}
for ((i = 1; i <= pairs; i++)); do
  for tree in "$old" "$new"; do
    tag=$([[ $tree == "$old" ]] && echo A || echo B)
    echo "=== pair $i $tag $(git -C "$tree" rev-parse --short HEAD) $(date +%T) load $(cut -d' ' -f1 /proc/loadavg)"
    "$tree/build/bench/queue_throughput" --jobs 100000
    (cd "$tree" && bench/api_bench.sh build 100000 10s 64) 2>&1 | grep -E "req/s|ceiling|RSS|subscribers|lines/s|took" || true
    (cd "$tree" && bench/run_ssh_bench.sh --tools certfleet --runs 1 --build build) 2>&1 | grep -E "^certfleet|\| certfleet" || true
  done
done
