#!/usr/bin/env bash
# Set-up command 2: install what is missing, build, and run every test:
#   1. GCC RelWithDebInfo build: unit, conformance, multi-process and API tests (ctest);
#   2. clang-16 build with AddressSanitizer + UndefinedBehaviorSanitizer: the same tests again,
#      then every libFuzzer target replays its corpus and runs briefly (scripts/fuzz.sh).
# CERTFLEET_SKIP_SANITIZE=1 skips step 2 (quick local runs); CI never sets it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --test
jobs=$(nproc)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== npm packages of the web UI's type check and browser tests (package-lock.json)"
npm ci --no-audit --no-fund --loglevel=error
echo "== build (gcc, RelWithDebInfo)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCERTFLEET_TESTS=ON >/dev/null
ninja -C build
echo "== tests (gcc build)"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600 | tee -a "$log"

if [[ "${CERTFLEET_SKIP_SANITIZE:-0}" != "1" ]]; then
  echo "== build (clang-16, ASan + UBSan + fuzzer-no-link)"
  CC=clang-16 CXX=clang++-16 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCERTFLEET_SANITIZE=ON -DCERTFLEET_TESTS=ON -DCERTFLEET_BENCH=OFF >/dev/null
  ninja -C build-asan
  echo "== tests (sanitizer build)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 900 | tee -a "$log"
  echo "== fuzz targets: corpus replay + bounded run"
  ./scripts/fuzz.sh build-asan
fi
# One closing line over both runs: "N passed, N failed" (ctest prints one summary per run).
total=$(grep -Eo 'tests failed out of [0-9]+' "$log" | awk '{s += $5} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ tests failed out of' "$log" | awk '{s += $1} END {print s + 0}')
echo "$((total - failed)) passed, $failed failed"
