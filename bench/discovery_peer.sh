#!/usr/bin/env bash
# The peer for bench/discovery_scan: the same handshakes done the way an operator would without
# certfleet, `openssl s_client` processes run 50 at a time by xargs, against 8 `openssl s_server`
# on 127.0.0.1 (ports chosen by the kernel, stopped by PID at the end). Prints endpoints/s.
#   bench/discovery_peer.sh [TARGETS] [PARALLEL]
set -euo pipefail
targets=${1:-1000}
parallel=${2:-50}
[[ $targets =~ ^[1-9][0-9]*$ && $parallel =~ ^[1-9][0-9]*$ ]] || { sed -n '5p' "$0" >&2; exit 2; }
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=bench.test \
  -addext subjectAltName=DNS:bench.test -days 30 -keyout "$dir/k.pem" -out "$dir/c.pem" 2>/dev/null
ports=()
for i in $(seq 8); do
  openssl s_server -accept 127.0.0.1:0 -cert "$dir/c.pem" -key "$dir/k.pem" -www >"$dir/s$i.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do grep -q ACCEPT "$dir/s$i.out" && break; sleep 0.05; done
  ports+=("$(sed -n 's/.*ACCEPT.*:\([0-9]*\)$/\1/p' "$dir/s$i.out" | head -1)")
done
for n in $(seq "$targets"); do echo "${ports[$((n % 8))]}"; done >"$dir/targets"
start=$(date +%s.%N)
xargs -P "$parallel" -I{} sh -c 'openssl s_client -connect 127.0.0.1:{} -servername bench.test </dev/null >/dev/null 2>&1' <"$dir/targets"
end=$(date +%s.%N)
awk -v n="$targets" -v s="$start" -v e="$end" -v p="$parallel" \
  'BEGIN { printf "peer: %d openssl s_client handshakes, %d at a time, in %.2f s = %.0f endpoints/s\n", n, p, e - s, n / (e - s) }'
