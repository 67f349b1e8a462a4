#!/usr/bin/env bash
# ACME issuance benchmark (issue 15): N certificates of one name each from one pebble whose
# DNS-01 validation asks one knot, which both clients update with TSIG (RFC 2136) (or one
# PowerDNS, which both update through its HTTP API: --dns pdns):
#   certfleet: one `certfleet serve --mode all` per run (fresh data dir, account and provider
#              created before the clock starts), N `POST …/certificates/issue` at once, then
#              polled until every issue_certificate job has ended;
#   lego:      N `lego … --dns rfc2136|pdns run` one after the other (Debian lego 4.9), sharing one
#              account registered by a warm-up issuance before the first run.
#
#   bench/acme_bench.sh [--bin build/certfleet] [--runs 3] [--counts "1 50"]
#                       [--tools "certfleet lego"] [--set KEY=VALUE]... [--cf-trust bundle|env]
#                       [--va-sleep] [--dns knot|pdns]
#
# --set is passed to `certfleet serve` (process settings such as worker_main_concurrency).
# --cf-trust: how certfleet trusts pebble's HTTPS certificate. `bundle` (default): the account's
# `ca_bundle_pem`, as for any private CA. `env`: no ca_bundle_pem; SSL_CERT_FILE=<pebble's TLS CA>
# in certfleet's environment makes it OpenSSL's default store — the path a public CA (whose root
# is in the system store) takes.
# --va-sleep: pebble without PEBBLE_VA_NOSLEEP, so its validation authority waits a random time
# (pebble's own simulation of a real CA's multi-vantage validation) before each check.
# --dns pdns: PowerDNS Authoritative 4.7 (sqlite3 backend, the zone created through its API, no
# caches) instead of knot. certfleet writes through a `powerdns` provider and, as it talks no DNS
# to such a provider, finds the zone's NS through acme_dns_resolver = pdns itself; lego runs
# `--dns pdns` with the same --dns.resolvers (pdns) and --dns.disable-cp as for rfc2136, and
# PDNS_POLLING_INTERVAL=2/PDNS_PROPAGATION_TIMEOUT=60 pin its rfc2136 defaults (lego sleeps one
# polling interval before its propagation check, in both modes).
# Needs pebble, knot (knotd), lego, dig, jq, curl, openssl, GNU time (Debian packages;
# lego is installed with apt-get when missing, and with --dns pdns pdns-server,
# pdns-backend-sqlite3 and sqlite3 instead of knot). Everything listens on 127.0.0.1 only and is
# stopped by its PID on exit (ACME_BENCH_KEEP=1 keeps the temporary directory: logs, job store).
# Prints one line per (tool, N, run), then the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/certfleet
runs=3
counts="1 50"
tools="certfleet lego"
sets=()
cf_trust=bundle
va_env=(PEBBLE_VA_NOSLEEP=1)
dns=knot
while (($#)); do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --counts) counts=$2; shift 2 ;;
    --tools) tools=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
    --cf-trust) cf_trust=$2; shift 2 ;;
    --va-sleep) va_env=(); shift ;;
    --dns) dns=$2; shift 2 ;;
    *) echo "acme_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ $dns == knot || $dns == pdns ]] || { echo "acme_bench: --dns is knot or pdns, not $dns" >&2; exit 2; }
# A binary of a build tree is brought up to date first (after ./scripts/run.sh or test.sh alike).
if [[ -f $(dirname "$bin")/CMakeCache.txt ]]; then bench/build.sh --build "$(dirname "$bin")" certfleet; fi
[[ ${CERTFLEET_BENCH_CHECK:-} == 1 ]] && exit 0
[[ -x $bin ]] || { echo "acme_bench: no certfleet binary at $bin (give --bin PATH)" >&2; exit 1; }
bin=$(realpath "$bin")
dns_tools=(knotd)
[[ $dns == knot ]] || dns_tools=()
# pebble, knotd, dig and curl are test packages: after ./scripts/run.sh they are missing.
./scripts/install-deps.sh --test
command -v jq >/dev/null || ${SUDO:-$([ "$(id -u)" -ne 0 ] && echo sudo)} apt-get install -y -qq jq >/dev/null
for c in pebble "${dns_tools[@]}" dig jq curl openssl; do
  command -v "$c" >/dev/null || [[ -x /usr/sbin/$c ]] || { echo "acme_bench: install $c" >&2; exit 1; }
done
if [[ $dns == pdns ]]; then
  # The backend's schema: the package's own copy, else the doc directory's link to it (gzipped on
  # some images; gone where /usr/share/doc is dropped).
  pdns_schema=
  find_schema() {
    local f
    for f in /usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql \
      /usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql{,.gz}; do
      [[ -f $f ]] && { pdns_schema=$f; return 0; }
    done
    return 1
  }
  if [[ ! -x /usr/sbin/pdns_server ]] || ! command -v sqlite3 >/dev/null || ! find_schema; then
    apt-get install -y pdns-server pdns-backend-sqlite3 sqlite3 >/dev/null
    find_schema || { echo "acme_bench: pdns-backend-sqlite3 has no schema.sqlite3.sql" >&2; exit 1; }
  fi
fi
if [[ " $tools " == *" lego "* ]]; then
  command -v lego >/dev/null || apt-get install -y lego >/dev/null
  [[ -x /usr/bin/time ]] || apt-get install -y time >/dev/null
fi

work=$(mktemp -d /tmp/acme_bench.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -n ${ACME_BENCH_KEEP:-} ]]; then echo "acme_bench: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }
clk_tck=$(getconf CLK_TCK)
# utime + stime of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    ss -Htuln "( sport = :$p )" | grep -q . || { echo "$p"; return; }
  done
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

zone=bench.test
key_name=certfleet-bench-key.
secret=$(openssl rand -base64 32)

# Keeps PID (for cleanup) once CHECK… succeeds, within 10 s while PID lives; else stops PID and
# fails, so the caller can retry on other ports.
keep_when_ready() {
  local pid=$1
  shift
  for _ in $(seq 100); do
    if "$@"; then
      pids+=("$pid")
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 1
}

# ---- knot: authoritative for bench.test, TSIG (hmac-sha256) updates allowed -------------------
# knot serves the zone's marker record (it has loaded the zone).
knot_answers() {
  dig @127.0.0.1 -p "$knot_port" +norec +time=1 +tries=1 +short "_bench.$zone" TXT 2>/dev/null | grep -q "$1"
}

start_knot() {
  local d=$work/knot token
  mkdir -p "$d/run" "$d/db" "$d/zones"
  for _ in 1 2 3 4 5; do
    knot_port=$(free_port)
    token=$(openssl rand -hex 8)
    cat >"$d/knot.conf" <<EOF
server:
    rundir: $d/run
    listen: 127.0.0.1@$knot_port
$( ((EUID == 0)) && echo "    user: root:root")
log:
  - target: stderr
    any: warning
database:
    storage: $d/db
key:
  - id: $key_name
    algorithm: hmac-sha256
    secret: $secret
acl:
  - id: update_with_key
    key: $key_name
    action: update
template:
  - id: default
    storage: $d/zones
    zonefile-sync: -1
    journal-content: changes
zone:
  - domain: $zone.
    acl: update_with_key
EOF
    cat >"$d/zones/$zone.zone" <<EOF
\$ORIGIN $zone.
\$TTL 300
@ SOA ns1 hostmaster 1 3600 600 86400 300
@ NS ns1
ns1 A 127.0.0.1
_bench TXT "$token"
EOF
    rm -rf "$d/db" && mkdir -p "$d/db"
    /usr/sbin/knotd -c "$d/knot.conf" >"$d/knotd.log" 2>&1 &
    knot_pid=$!
    keep_when_ready "$knot_pid" knot_answers "$token" && return
  done
  echo "acme_bench: knotd did not start:" >&2
  cat "$d/knotd.log" >&2
  exit 1
}

# ---- pdns (--dns pdns): authoritative for bench.test, records written through its HTTP API -----
# pdns_api METHOD PATH [JSON]: prints the HTTP status; the answer's body is in $work/pdns/api.out.
pdns_api() {
  local body=()
  (($# > 2)) && body=(--data-binary "$3")
  curl -sS --max-time 10 -o "$work/pdns/api.out" -w '%{http_code}' -X "$1" -H "X-API-Key: $pdns_key" \
    -H 'Content-Type: application/json' "${body[@]}" "http://127.0.0.1:$pdns_web_port$2"
}
# Our key is accepted: a server that took the port first would answer 401 to it.
pdns_ready() { [[ $(pdns_api GET /api/v1/servers/localhost 2>/dev/null) == 200 ]]; }
pdns_answers() {
  dig @127.0.0.1 -p "$pdns_port" +norec +time=1 +tries=1 +short "ns1.$zone" A 2>/dev/null | grep -qx 127.0.0.1
}

start_pdns() {
  local d=$work/pdns started=
  mkdir -p "$d"
  pdns_key=$(openssl rand -hex 16)
  for _ in 1 2 3 4 5; do
    pdns_port=$(free_port)
    pdns_web_port=$(free_port)
    [[ $pdns_web_port == "$pdns_port" ]] && continue
    rm -f "$d/pdns.sqlite3"
    if [[ $pdns_schema == *.gz ]]; then zcat "$pdns_schema"; else cat "$pdns_schema"; fi | sqlite3 "$d/pdns.sqlite3"
    # security-poll-suffix=: no query for pdns's security status through the system resolver.
    # No caches: the API purges what it changes, but none at all means no run races one.
    # synchronous=0: the benchmark's database need not survive a power cut, and an fsync per
    # API write would time the disk rather than the clients.
    cat >"$d/pdns.conf" <<EOF
launch=gsqlite3
gsqlite3-database=$d/pdns.sqlite3
gsqlite3-pragma-synchronous=0
local-address=127.0.0.1
local-port=$pdns_port
api=yes
api-key=$pdns_key
webserver=yes
webserver-address=127.0.0.1
webserver-port=$pdns_web_port
webserver-allow-from=127.0.0.0/8
socket-dir=$d
guardian=no
daemon=no
disable-syslog=yes
setuid=
setgid=
security-poll-suffix=
cache-ttl=0
negquery-cache-ttl=0
query-cache-ttl=0
default-soa-content=ns1.@ hostmaster.@ 0 10800 3600 604800 3600
EOF
    /usr/sbin/pdns_server --config-dir="$d" >"$d/pdns.log" 2>&1 &
    pdns_pid=$!
    keep_when_ready "$pdns_pid" pdns_ready && { started=1; break; }
  done
  [[ -n $started ]] || { echo "acme_bench: pdns_server did not start:" >&2; cat "$d/pdns.log" >&2; exit 1; }
  local st
  st=$(pdns_api POST /api/v1/servers/localhost/zones "$(jq -nc --arg z "$zone." \
    '{name: $z, kind: "Native", nameservers: ["ns1." + $z]}')")
  [[ $st == 201 ]] || { echo "acme_bench: pdns: creating zone $zone: HTTP $st $(cat "$d/api.out")" >&2; exit 1; }
  st=$(pdns_api PATCH "/api/v1/servers/localhost/zones/$zone." "$(jq -nc --arg n "ns1.$zone." \
    '{rrsets: [{name: $n, type: "A", ttl: 300, changetype: "REPLACE", records: [{content: "127.0.0.1", disabled: false}]}]}')")
  [[ $st == 204 ]] || { echo "acme_bench: pdns: adding ns1.$zone: HTTP $st $(cat "$d/api.out")" >&2; exit 1; }
  for _ in $(seq 100); do pdns_answers && return; sleep 0.1; done
  echo "acme_bench: pdns does not answer ns1.$zone over DNS at 127.0.0.1:$pdns_port:" >&2
  cat "$d/pdns.log" >&2
  exit 1
}

# ---- pebble: its own TLS identity, DNS-01 against knot or pdns --------------------------------
start_pebble() {
  local d=$work/pebble
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=acme_bench pebble TLS CA" -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$d/tls.key" -out "$d/tls.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$d/ext"
  openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
    -extfile "$d/ext" -out "$d/tls.crt" 2>/dev/null
  cat "$d/ca.pem" >>"$d/tls.crt"
  pebble_ca=$d/ca.pem
  for _ in 1 2 3 4 5; do
    pebble_port=$(free_port)
    local mgmt
    mgmt=$(free_port)
    cat >"$d/pebble.json" <<EOF
{"pebble": {"listenAddress": "127.0.0.1:$pebble_port", "managementListenAddress": "127.0.0.1:$mgmt",
  "certificate": "$d/tls.crt", "privateKey": "$d/tls.key", "httpPort": 5002, "tlsPort": 5001,
  "ocspResponderURL": "", "externalAccountBindingRequired": false}}
EOF
    env "${va_env[@]}" pebble -config "$d/pebble.json" -dnsserver "127.0.0.1:$dns_port" >"$d/pebble.log" 2>&1 &
    directory=https://127.0.0.1:$pebble_port/dir
    pebble_pid=$!
    keep_when_ready "$pebble_pid" curl -sf -o /dev/null --cacert "$pebble_ca" "$directory" && return
  done
  echo "acme_bench: pebble did not start:" >&2
  cat "$d/pebble.log" >&2
  exit 1
}

# ---- certfleet: N issue_certificate jobs at once ---------------------------------------------
# Sets res="wall_s cpu_s rss_mib" for one run of N certificates named PREFIX-<i>.bench.test.
certfleet_run() {
  local n=$1 prefix=$2
  local d=$work/$prefix
  mkdir -p "$d"
  local trust_env=()
  [[ $cf_trust == env ]] && trust_env=(SSL_CERT_FILE="$pebble_ca")
  env "${trust_env[@]}" "$bin" serve --mode all --listen 127.0.0.1:0 --data "$d/var" --set log_level=warn "${sets[@]}" \
    >"$d/serve.out" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 200); do grep -q "listen=" "$d/serve.out" 2>/dev/null && break; sleep 0.05; done
  local port token api
  port=$(grep -o 'listen=[0-9.]*:[0-9]*' "$d/serve.out" | sed 's/.*://')
  [[ -n $port ]] || { echo "acme_bench: certfleet did not start:" >&2; cat "$d/serve.out" >&2; exit 1; }
  token=$(tr -d '\r\n' <"$d/var/owner-token")
  api=http://127.0.0.1:$port/api/v1
  call() { curl -sS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' "$@"; }
  # The zone's NS (ns1.bench.test → 127.0.0.1) answers at knot's (pdns's) port, not 53.
  # pebble and knot (pdns, its API too) listen on 127.0.0.1, which acme_allow_list reaches only
  # when listed. certfleet talks no DNS to a powerdns provider: it finds the zone and its NS
  # through acme_dns_resolver, here pdns itself (authoritative for the zone, no recursion needed).
  # Every kind asks acme_dns_resolver for a CNAME at _acme-challenge.<name> (delegation) before
  # presenting: it is the bench's own DNS server in both modes, never the host's resolver.
  local settings
  settings=$(jq -nc --argjson p "$dns_port" '{acme_dns_nameserver_port: $p, acme_allow_list: "127.0.0.1",
    acme_dns_resolver: "127.0.0.1:\($p)"}')
  call -X PUT "$api/settings" -d "$settings" -o /dev/null -w '%{http_code}' | grep -q 200 ||
    { echo "acme_bench: PUT settings failed" >&2; exit 1; }
  local account provider provider_body
  account=$(call -X POST "$api/projects/default/acme-accounts" -d "$(jq -n --arg u "$directory" --rawfile ca "$pebble_ca" --arg t "$cf_trust" \
    '{name: "pebble", directory_url: $u, contact_email: "bench@example.org", terms_agreed: true}
     + if $t == "bundle" then {ca_bundle_pem: $ca} else {} end')" | jq -r .id)
  if [[ $dns == pdns ]]; then
    provider_body=$(jq -n --arg u "http://127.0.0.1:$pdns_web_port" --arg k "$pdns_key" --arg z "$zone" \
      '{name: "pdns", kind: "powerdns", powerdns: {api_url: $u, api_key: $k, allow_plain_http: true, zone: $z}}')
  else
    provider_body=$(jq -n --arg s "127.0.0.1:$knot_port" --arg z "$zone" --arg k "$key_name" --arg sec "$secret" \
      '{name: "knot", kind: "rfc2136", rfc2136: {server: $s, zone: $z, tsig_key_name: $k, tsig_algorithm: "hmac-sha256", tsig_secret: $sec}}')
  fi
  call -X POST "$api/projects/default/dns-providers" -d "$provider_body" -o "$d/provider.json" || true
  provider=$(jq -r .id "$d/provider.json" 2>/dev/null || true)
  [[ $account =~ ^[0-9a-f]{24}$ && $provider =~ ^[0-9a-f]{24}$ ]] ||
    { echo "acme_bench: account ($account) or provider ($(cat "$d/provider.json")) not created" >&2; exit 1; }
  local i
  for i in $(seq "$n"); do
    jq -nc --arg name "$prefix-$i" --arg dom "$prefix-$i.$zone" --arg a "$account" --arg p "$provider" \
      '{name: $name, domains: [$dom], acme_account_id: $a, dns_provider_id: $p}' >"$d/body-$i.json"
  done
  local cpu0 t0 posts=()
  cpu0=$(cpu_ticks "$pid")
  t0=$(now_ms)
  # Every POST at once (one curl each, in parallel).
  for i in $(seq "$n"); do
    call -X POST "$api/projects/default/certificates/issue" --data-binary "@$d/body-$i.json" -o "$d/issue-$i.json" &
    posts+=($!)
  done
  for i in "${posts[@]}"; do wait "$i" || true; done
  for i in $(seq "$n"); do
    jq -e .job_id "$d/issue-$i.json" >/dev/null || { echo "acme_bench: issue $i refused: $(cat "$d/issue-$i.json")" >&2; exit 1; }
  done
  # Poll the issue_certificate jobs until none is pending, active or awaiting a retry.
  local list ended
  while :; do
    list=$(call "$api/projects/default/jobs?type=issue_certificate&page_size=200")
    ended=$(jq '[.items[] | select(.status == "completed" or .status == "dead" or .status == "cancelled")] | length' <<<"$list")
    ((ended >= n)) && break
    (($(now_ms) - t0 > 600000)) && { echo "acme_bench: certfleet: $ended of $n ended after 600 s" >&2; exit 1; }
    sleep 0.1
  done
  local cpu1 last done_n rss
  cpu1=$(cpu_ticks "$pid")
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  # The end is the last job's own completed_at (ms since the epoch), not the poll that saw it.
  last=$(jq '[.items[].completed_at | if type == "string"
    then (.[0:19] + "Z" | fromdateiso8601) * 1000 + ((.[20:23] + "000")[0:3] | tonumber) else . end] | max' <<<"$list")
  done_n=$(jq '[.items[] | select(.status == "completed")] | length' <<<"$list")
  if ((done_n != n)); then
    echo "acme_bench: certfleet: only $done_n of $n completed:" >&2
    jq -r '.items[] | select(.status != "completed") | "\(.id) \(.status) \(.error)"' <<<"$list" >&2
    exit 1
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  unset 'pids[-1]'
  res=$(awk -v w=$((last - t0)) -v c=$((cpu1 - cpu0)) -v t="$clk_tck" -v r="$rss" \
    'BEGIN {printf "%.2f %.2f %.1f", w / 1000, c / t, r / 1024}')
}

# ---- lego: N runs one after the other ---------------------------------------------------------
lego_one() {  # lego_one DOMAIN TIMEFILE
  local provider provider_env
  if [[ $dns == pdns ]]; then
    # The polling interval (slept once before the propagation check) and the timeout are lego's
    # rfc2136 defaults, which the knot runs use (pdns's own timeout default is 120 s).
    provider=pdns provider_env=(PDNS_API_URL="http://127.0.0.1:$pdns_web_port" PDNS_API_KEY="$pdns_key"
      PDNS_POLLING_INTERVAL=2 PDNS_PROPAGATION_TIMEOUT=60)
  else
    provider=rfc2136 provider_env=(RFC2136_NAMESERVER="127.0.0.1:$dns_port" RFC2136_TSIG_KEY="$key_name"
      RFC2136_TSIG_SECRET="$secret" RFC2136_TSIG_ALGORITHM=hmac-sha256.)
  fi
  env "${provider_env[@]}" LEGO_CA_CERTIFICATES="$pebble_ca" /usr/bin/time -f "%e %U %S %M" -o "$2" \
    lego --path "$work/lego" --server "$directory" --email bench@example.org --accept-tos \
    --dns "$provider" --dns.resolvers "127.0.0.1:$dns_port" --dns.disable-cp --domains "$1" run \
    >>"$work/lego.log" 2>&1 || { echo "acme_bench: lego failed for $1:" >&2; tail -20 "$work/lego.log" >&2; exit 1; }
}
lego_run() {
  local n=$1 prefix=$2 i t0 t1 cpu=0 rss=0
  t0=$(now_ms)
  for i in $(seq "$n"); do
    lego_one "$prefix-$i.$zone" "$work/time-$prefix-$i"
  done
  t1=$(now_ms)
  for i in $(seq "$n"); do
    read -r _ u s m <"$work/time-$prefix-$i"
    cpu=$(awk -v a="$cpu" -v b="$u" -v c="$s" 'BEGIN {print a + b + c}')
    ((m > rss)) && rss=$m
  done
  res=$(awk -v w=$((t1 - t0)) -v c="$cpu" -v r="$rss" 'BEGIN {printf "%.2f %.2f %.1f", w / 1000, c, r / 1024}')
}

if [[ $dns == pdns ]]; then
  start_pdns
  dns_port=$pdns_port dns_pid=$pdns_pid
  dns_where="pdns 127.0.0.1:$pdns_port (API http://127.0.0.1:$pdns_web_port)"
else
  start_knot
  dns_port=$knot_port dns_pid=$knot_pid
  dns_where="knot 127.0.0.1:$knot_port"
fi
start_pebble
echo "acme_bench: $dns_where (zone $zone), pebble $directory; certfleet $bin ${sets[*]} (trust: $cf_trust)"
echo "acme_bench: load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
# lego's account is registered once, by a warm-up issuance outside the measurements (certfleet
# registers its account before the clock starts, too).
if [[ " $tools " == *" lego "* ]]; then
  lego_one "warmup.$zone" "$work/time-warmup"
fi

declare -A results
for run in $(seq "$runs"); do
  for n in $counts; do
    for tool in $tools; do
      prefix=${tool:0:1}r${run}n$n
      # pebble's and knot's (pdns's) CPU over the whole run (setup included): the servers' share, not the client's.
      srv0=$(($(cpu_ticks "$pebble_pid") + $(cpu_ticks "$dns_pid")))
      if [[ $tool == certfleet ]]; then certfleet_run "$n" "$prefix"; else lego_run "$n" "$prefix"; fi
      srv=$(awk -v d=$(($(cpu_ticks "$pebble_pid") + $(cpu_ticks "$dns_pid") - srv0)) -v t="$clk_tck" 'BEGIN {printf "%.2f", d / t}')
      read -r wall cpu rss <<<"$res"
      results[$tool,$n]+="$res;"
      printf 'acme_bench: %-9s N=%-3s run %s: wall %6.2f s, %6.3f s/cert, client CPU %6.2f s, peak RSS %6.1f MiB; pebble+%s CPU %5.2f s (load %s)\n' \
        "$tool" "$n" "$run" "$wall" "$(awk -v w="$wall" -v n="$n" 'BEGIN {print w / n}')" "$cpu" "$rss" "$dns" "$srv" "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done

echo "acme_bench: medians of $runs runs"
for n in $counts; do
  for tool in $tools; do
    IFS=';' read -ra rs <<<"${results[$tool,$n]}"
    w=$(for x in "${rs[@]}"; do echo "$x" | cut -d' ' -f1; done | median)
    c=$(for x in "${rs[@]}"; do echo "$x" | cut -d' ' -f2; done | median)
    m=$(for x in "${rs[@]}"; do echo "$x" | cut -d' ' -f3; done | median)
    printf 'acme_bench: median %-9s N=%-3s wall %6.2f s, %6.3f s/cert, client CPU %6.2f s, peak RSS %6.1f MiB\n' \
      "$tool" "$n" "$w" "$(awk -v w="$w" -v n="$n" 'BEGIN {print w / n}')" "$c" "$m"
  done
done
echo "acme_bench: load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
