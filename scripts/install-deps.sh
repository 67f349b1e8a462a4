#!/usr/bin/env bash
# Installs, with apt-get, every Debian 12 package that building, running and testing certfleet
# needs and that is not installed yet. Safe to run again: it installs only what is missing.
set -euo pipefail

build_pkgs=(
  build-essential cmake ninja-build pkg-config ccache git
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libsqlite3-dev sqlite3 libmongoc-dev libbson-dev libssh2-1-dev libssl-dev openssl
  libsimdjson-dev libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev libxml2-dev libkrb5-dev
)
# systemd: `systemd-analyze verify` of the unit; binutils: the install script's objcopy.
test_pkgs=(
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-16 libclang-rt-16-dev
  openssh-server openssh-client procps iproute2 curl python3 sudo
  # the SMTP server of the email notification tests (tests/testbed/smtp_server.py)
  python3-aiosmtpd
  # the AD CS CEP/CES peer (tests/testbed/msca_server.py): its test CA signs with it
  python3-cryptography
  # its Kerberos port: a test realm on an MIT KDC (tests/testbed/kdc.*), SPNEGO through python3-gssapi
  krb5-kdc krb5-admin-server krb5-user python3-gssapi
  # the MongoDB store's wire-level tests: MongoDB's own wire-protocol test server
  # (tests/testbed/mockupdb_server.py, run with /usr/bin/python3)
  python3-mockupdb python3-pymongo
  # containers/check.py reads containers/compose.yaml
  python3-yaml
  chromium
  # DNS-01 tests: an authoritative server taking TSIG-signed RFC 2136 updates (knotd), and dig
  # and nsupdate as the independent client.
  knot bind9-dnsutils
  # PowerDNS Authoritative with its HTTP API (tests/testbed/pdns.*), for the pdns DNS-01 provider
  pdns-server pdns-backend-sqlite3
  pebble  # ACME tests: pebble and pebble-challtestsrv (tests/testbed/pebble.*)
  systemd binutils
  # the shells whose completion scripts `certfleet completion` prints (tests/app/cli_test.cpp)
  zsh fish
  # the Debian package (scripts/package.sh) and its check (tests/packaging/deb_test.sh): build it,
  # lint it, install it into a clean Debian 12 root
  dpkg-dev fakeroot lintian debootstrap
)
# promtool only; the server's recommends are not needed.
norec_pkgs=(prometheus)

want=("${build_pkgs[@]}")
if [[ "${1:-}" == "--test" ]]; then
  want+=("${test_pkgs[@]}" "${norec_pkgs[@]}")
  # The web UI's type check and browser tests run on Node.js and npm: the machine's when it has
  # them (any packaging), else Debian's.
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then want+=(nodejs npm); fi
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then exit 0; fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
rec=(); norec=()
for p in "${missing[@]}"; do
  if [[ " ${norec_pkgs[*]} " == *" $p "* ]]; then norec+=("$p"); else rec+=("$p"); fi
done
if ((${#rec[@]})); then $SUDO apt-get install -y -qq --no-install-recommends "${rec[@]}"; fi
if ((${#norec[@]})); then $SUDO apt-get install -y -qq --no-install-recommends "${norec[@]}"; fi
