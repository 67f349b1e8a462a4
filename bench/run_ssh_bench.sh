#!/usr/bin/env bash
# The SSH fan-out benchmark (issue 4), every tool side by side in one run against the same local
# sshd fleet (numbers for docs/performance.md, "SSH delivery"):
#   certfleet   bench/ssh_fanout deliver: deliver_ssh() per target under a semaphore, one io_context
#   pssh-2      parallel-scp (upload) then parallel-ssh (backup + chmod + mv): 2 sessions per target
#   pssh-1      tar | parallel-ssh -I (extract + backup + chmod + mv): 1 session per target
#   ansible     ansible-playbook, two `copy` tasks (cert 0644, key 0600, backup: true), forks = C
#   raw-*       bare `ssh host true` logins, xargs -P C: curve25519-sha256 (what libssh2 1.10
#               negotiates) and sntrup761x25519-sha512 (OpenSSH 9's default): the floor
#   certfleet-e2e (--e2e) a running `certfleet serve`, driven over the HTTP API (DESIGN §6),
#               one normal job; skipped when the distribution routes are not there (404)
#   certfleet-e2e-fanout (--e2e, named in --tools) the same, fanned out: threshold 100, batches
#               of 50 (issue 5: e.g. --targets 2000 --concurrency 10
#               --tools "certfleet-e2e certfleet-e2e-fanout" --e2e)
#
# Usage: bench/run_ssh_bench.sh [--targets "100 500"] [--concurrency "10 50"] [--runs 3]
#          [--instances 10] [--tools "certfleet pssh-2 pssh-1 ansible raw-curve25519 raw-sntrup761"]
#          [--ansible-targets "100"] [--e2e] [--build build] [--results FILE] [--keep]
# Prints one line per measurement, then the medians as Markdown tables and the issue's targets;
# --results keeps every measurement as JSON lines.
# Needs root (creates the login user `cfbench` with /bin/sh when missing: root's own shell rc
# here runs pyenv init, which costs 200+ ms per exec and would dominate every tool).
set -euo pipefail
cd "$(dirname "$0")/.."
targets="100 500" conc="10 50" runs=3 instances=10 build=${CERTFLEET_BENCH_BUILD:-build} keep=0 e2e=0 results=""
tools="certfleet pssh-2 pssh-1 ansible raw-curve25519 raw-sntrup761" ansible_targets="100"
while (($#)); do
  case "$1" in
    --targets) targets=$2; shift 2 ;;
    --concurrency) conc=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --instances) instances=$2; shift 2 ;;
    --tools) tools=$2; shift 2 ;;
    --ansible-targets) ansible_targets=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --e2e) e2e=1; shift ;;
    --results) results=$(realpath -m "$2"); shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '2,20p' "$0" >&2; exit 2 ;;
  esac
done
build_targets=(ssh_fanout)
if ((e2e)); then build_targets+=(certfleet); fi
if [[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]]; then bench/build.sh --build "$build" "${build_targets[@]}"; exit 0; fi
[ "$(id -u)" -eq 0 ] || { echo "run_ssh_bench: run as root (sshd, the cfbench user)" >&2; exit 1; }

bench/peers/install.sh --ssh >/dev/null

# The login user: a plain /bin/sh (dash) with no rc files. Password field '*' (not '!'): sshd
# without PAM refuses every method, keys included, for an account locked with '!'.
user=cfbench
if ! id "$user" >/dev/null 2>&1; then
  useradd --system --create-home --home-dir /var/lib/$user --shell /bin/sh --password '*' "$user"
fi

# The testbed needs the test packages (GoogleTest, sshd); ./scripts/run.sh installs only the build's.
./scripts/install-deps.sh --test
bench/build.sh --build "$build" "${build_targets[@]}"

work=$(mktemp -d /tmp/cf-ssh-bench.XXXXXX)
chmod 755 "$work"  # the login user reads its authorized_keys and writes its target dirs here
fleet_pid=
cleanup() {
  [ -n "$fleet_pid" ] && kill "$fleet_pid" 2>/dev/null && wait "$fleet_pid" 2>/dev/null || true
  if ((keep)); then echo "run_ssh_bench: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

"$build/bench/ssh_fanout" fleet --dir "$work" --instances "$instances" >"$work/fleet.out" 2>"$work/fleet.err" &
fleet_pid=$!
for _ in $(seq 300); do grep -q '^ready' "$work/fleet.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^ready' "$work/fleet.out" || { echo "run_ssh_bench: fleet did not start:" >&2; cat "$work/fleet.err" >&2; exit 1; }

extra=()
((e2e)) && extra+=(--e2e "$build/certfleet")
[ -n "$results" ] && extra+=(--results "$results")
/usr/bin/python3 bench/ssh_bench.py --work "$work" --bin "$build/bench/ssh_fanout" --user "$user" \
  --targets "$targets" --concurrency "$conc" --runs "$runs" --tools "$tools" \
  --ansible-targets "$ansible_targets" "${extra[@]}"
