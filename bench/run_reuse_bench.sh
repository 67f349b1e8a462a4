#!/usr/bin/env bash
# The connection reuse benchmark (issue 20; docs/performance.md, "Sessions per host and
# connection reuse"): 200 SSH targets as 20 paths on each of 10 local sshd, one normal
# distribution run through a running `certfleet serve`, with distribution_ssh_connection_reuse
# on and off (interleaved): wall time, sshd CPU per target (from /proc of the sshd processes,
# before and after) and the connections opened. The driver is bench/reuse_bench.py.
#
# Usage: bench/run_reuse_bench.sh [--runs 3] [--paths 20] [--instances 10] [--concurrency 10]
#          [--limit 0] [--build build] [--results FILE] [--keep]
# Needs root (sshd; the login user `cfbench`, created with /bin/sh when missing, as in
# bench/run_ssh_bench.sh). It builds BUILD/certfleet and BUILD/bench/ssh_fanout (bench/build.sh:
# the tests on, for the testbed) after installing the test packages.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3 paths=20 instances=10 conc=10 limit=0 build=${CERTFLEET_BENCH_BUILD:-build} keep=0 results=""
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --paths) paths=$2; shift 2 ;;
    --instances) instances=$2; shift 2 ;;
    --concurrency) conc=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --results) results=$(realpath -m "$2"); shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '2,13p' "$0" >&2; exit 2 ;;
  esac
done
if [[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]]; then bench/build.sh --build "$build" certfleet ssh_fanout; exit 0; fi
[ "$(id -u)" -eq 0 ] || { echo "run_reuse_bench: run as root (sshd, the cfbench user)" >&2; exit 1; }
./scripts/install-deps.sh --test
bench/build.sh --build "$build" certfleet ssh_fanout

user=cfbench
if ! id "$user" >/dev/null 2>&1; then
  useradd --system --create-home --home-dir /var/lib/$user --shell /bin/sh --password '*' "$user"
fi

work=$(mktemp -d /tmp/cf-reuse-bench.XXXXXX)
chmod 755 "$work"  # the login user reads its authorized_keys and writes its target dirs here
fleet_pid=
cleanup() {
  [ -n "$fleet_pid" ] && kill "$fleet_pid" 2>/dev/null && wait "$fleet_pid" 2>/dev/null || true
  if ((keep)); then echo "run_reuse_bench: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

"$build/bench/ssh_fanout" fleet --dir "$work" --instances "$instances" >"$work/fleet.out" 2>"$work/fleet.err" &
fleet_pid=$!
for _ in $(seq 300); do grep -q '^ready' "$work/fleet.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$work/fleet.out" || { echo "run_reuse_bench: fleet did not start:" >&2; cat "$work/fleet.err" >&2; exit 1; }

extra=()
[ -n "$results" ] && extra+=(--results "$results")
/usr/bin/python3 bench/reuse_bench.py --work "$work" --certfleet "$build/certfleet" --user "$user" \
  --paths "$paths" --concurrency "$conc" --limit "$limit" --runs "$runs" "${extra[@]}"
