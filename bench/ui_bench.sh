#!/usr/bin/env bash
# The web UI benchmark (bench/ui_bench.mjs: Chromium against a real `certfleet serve`), from
# nothing: the browser and Node.js packages (as ./scripts/test.sh installs them), the npm packages
# of package-lock.json, and build/certfleet brought up to date.
#   bench/ui_bench.sh [RUNS=10] [JOBS=2000]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10} jobs=${2:-2000}
[[ $runs =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ ]] || { sed -n '5p' "$0" >&2; exit 2; }
build=${CERTFLEET_BENCH_BUILD:-build}
bench/build.sh --build "$build" certfleet
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
./scripts/install-deps.sh --test
npm ci --no-audit --no-fund --loglevel=error
CERTFLEET_BIN=$build/certfleet exec node bench/ui_bench.mjs "$runs" "$jobs"
