#!/usr/bin/env bash
# Builds bench programs in a build tree, whichever README command configured it last:
# ./scripts/run.sh caches CERTFLEET_BENCH=OFF and CERTFLEET_TESTS=OFF in build/, ./scripts/test.sh
# leaves the benchmarks on. Every bench script and bench/run build through here, so a command in
# docs/performance.md works after either (issue 35 §4).
# Usage: bench/build.sh [--build DIR] TARGET...
#   DIR defaults to $CERTFLEET_BENCH_BUILD, else build.
# Programs that use tests/testbed (ssh_fanout, discovery_scan, mongo_client_cpu) turn the tests on
# too: that target is only defined with them.
# CERTFLEET_BENCH_CHECK=1 configures, then only asks ninja whether it knows each target (the
# tests/bench/commands_test.py check): nothing is compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${CERTFLEET_BENCH_BUILD:-build}
if [[ ${1:-} == --build ]]; then build=$2; shift 2; fi
(($#)) || { echo "usage: bench/build.sh [--build DIR] TARGET..." >&2; exit 2; }
flags=(-DCERTFLEET_BENCH=ON)
for t in "$@"; do
  case $t in ssh_fanout | discovery_scan | mongo_client_cpu) flags+=(-DCERTFLEET_TESTS=ON) ;; esac
done
if [[ ! -f $build/CMakeCache.txt ]]; then flags+=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo); fi
cmake -S . -B "$build" "${flags[@]}" >/dev/null
if [[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]]; then
  for t in "$@"; do ninja -C "$build" -t query "$t" >/dev/null; done
else
  ninja -C "$build" "$@" >/dev/null
fi
