#!/usr/bin/env bash
# Lighthouse on the Jobs page with JOBS jobs stored (bench/lighthouse/lighthouse.mjs: Debian's
# Chromium against a real `certfleet serve`), from nothing: the browser and Node.js packages (as
# ./scripts/test.sh installs them), the npm packages of package-lock.json and of
# bench/lighthouse/package-lock.json (Lighthouse, pinned), and build/certfleet brought up to date.
#   bench/lighthouse.sh [JOBS=100000] [RUNS=5]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-100000} runs=${2:-5}
[[ $jobs =~ ^[1-9][0-9]*$ && $runs =~ ^[1-9][0-9]*$ ]] || { sed -n '6p' "$0" >&2; exit 2; }
build=${CERTFLEET_BENCH_BUILD:-build}
bench/build.sh --build "$build" certfleet
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
./scripts/install-deps.sh --test
npm ci --no-audit --no-fund --loglevel=error
npm ci --prefix bench/lighthouse --no-audit --no-fund --loglevel=error
CERTFLEET_BIN=$build/certfleet exec node bench/lighthouse/lighthouse.mjs "$jobs" "$runs"
