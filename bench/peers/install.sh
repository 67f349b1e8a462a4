#!/usr/bin/env bash
# Installs what bench/peers needs: redis-server, PostgreSQL 15, node + npm (apt, only
# what is missing), then the npm packages from package-lock.json; and the SSH benchmark's peers
# (bench/run_ssh_bench.sh): pssh (parallel-ssh, parallel-scp), ansible-core, openssh-server.
# With --ssh only the SSH ones (no node/npm); with --http only the HTTP load generator and the
# sqlite3 shell of bench/api_bench.sh and bench/list_bench.sh (wrk, sqlite3). Idempotent.
# Benchmarks only: tests need none of it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ssh_only=0
case "${1:-}" in --ssh | --http | "") ;; *) echo "usage: $0 [--ssh|--http]" >&2; exit 2 ;; esac
# tests/bench/commands_test.py: the arguments are all this checks; nothing is installed.
if [ "${CERTFLEET_BENCH_CHECK:-}" = 1 ]; then exit 0; fi
if [ "${1:-}" = "--ssh" ]; then ssh_only=1; fi
if [ "${1:-}" = "--http" ]; then
  want=()
  command -v wrk >/dev/null 2>&1 || want+=(wrk)
  command -v sqlite3 >/dev/null 2>&1 || want+=(sqlite3)
  if [ "${#want[@]}" -gt 0 ]; then
    echo "install.sh: apt-get install ${want[*]}" >&2
    SUDO=""; if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${want[@]}" >&2
  fi
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
command -v parallel-ssh >/dev/null 2>&1 || missing+=(pssh)
command -v ansible-playbook >/dev/null 2>&1 || missing+=(ansible-core)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
if [ "$ssh_only" -eq 0 ]; then
  command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
  [ -x /usr/lib/postgresql/15/bin/initdb ] || missing+=(postgresql)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install.sh: apt-get install ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [ "$ssh_only" -eq 1 ]; then
  echo "install.sh: ok (pssh $(parallel-ssh --version 2>&1 | sed -n 1p), $(ansible-playbook --version 2>/dev/null | sed -n 1p))" >&2
  exit 0
fi

# The Debian redis-server / postgresql packages start system-wide services on port
# 6379 / 5432; the benchmark never uses them (it starts its own on 127.0.0.1 with
# other ports), so they are left as the package set them up.

node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 18 ]; then
  echo "install.sh: node $(node --version) is too old (need >= 18)" >&2
  exit 1
fi

cd "$here"
if [ -f package-lock.json ]; then
  if [ node_modules/.package-lock.json -nt package-lock.json ] && [ node_modules/.package-lock.json -nt package.json ]; then
    echo "install.sh: node_modules up to date" >&2
  else
    npm ci --no-audit --no-fund --loglevel=error >&2
  fi
else
  npm install --no-audit --no-fund --loglevel=error >&2
fi
echo "install.sh: ok (node $(node --version), redis $(redis-server --version | awk '{print $3}'), $(/usr/lib/postgresql/15/bin/postgres --version))" >&2
