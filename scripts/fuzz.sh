#!/usr/bin/env bash
# Replays each fuzz target's corpus (fuzz/corpus/<target>/), then fuzzes it for a bounded time
# (FUZZ_SECONDS, default 10: 42 targets on 2 cores keep CI near 60 min). Findings go to
# fuzz/artifacts/ and fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
seconds=${FUZZ_SECONDS:-10}
# A fixed seed by default, so a failure in CI replays from its log; FUZZ_SEED=0 picks a random
# seed per run (for long runs by hand: FUZZ_SEED=0 FUZZ_SECONDS=600 ./scripts/fuzz.sh).
seed=${FUZZ_SEED:-20261206}
mkdir -p fuzz/artifacts
shopt -s nullglob
targets=("$build"/fuzz/fuzz_*)
if ((${#targets[@]} == 0)); then echo "fuzz: no targets built in $build/fuzz" >&2; exit 1; fi
# One target per core at a time: each libFuzzer run is single-threaded.
fuzz_one() {
  local t=$1 name corpus work
  name=$(basename "$t")
  corpus=fuzz/corpus/${name#fuzz_}
  mkdir -p "$corpus"
  work=$(mktemp -d)
  echo "fuzz: $name (corpus $corpus, ${seconds}s)"
  # Fuzz into a scratch copy so the committed corpus only changes on purpose.
  cp -r "$corpus"/. "$work"/ 2>/dev/null || true
  "$t" -runs=0 "$corpus" >/dev/null 2>&1 || { echo "fuzz: $name fails on its corpus" >&2; "$t" -runs=0 "$corpus"; return 1; }
  "$t" -seed="$seed" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix=fuzz/artifacts/"$name"- "$work" >/dev/null 2>"$work.log" \
    || { echo "fuzz: $name found a failure:" >&2; tail -50 "$work.log" >&2; return 1; }
  rm -rf "$work" "$work.log"
}
export -f fuzz_one
export seconds seed
printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'fuzz_one "$@"' _ {} \
  || { echo "fuzz: a target failed (above)" >&2; exit 1; }
echo "fuzz: ${#targets[@]} targets clean"
