#!/usr/bin/env bash
# Set-up command 1: install what is missing, build, and run `certfleet serve --mode=all` on the
# embedded SQLite store under ./var (override with CERTFLEET_DATA / CERTFLEET_LISTEN or flags
# passed to this script, e.g. ./scripts/run.sh --listen 127.0.0.1:9090).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCERTFLEET_TESTS=OFF -DCERTFLEET_BENCH=OFF >/dev/null
ninja -C build certfleet
exec ./build/certfleet serve --mode=all "$@"
