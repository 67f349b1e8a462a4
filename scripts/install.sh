#!/usr/bin/env bash
# Installs a built certfleet as a systemd service (docs/install.md):
#   /usr/local/bin/certfleet                     the binary, stripped
#   /usr/lib/debug/usr/local/bin/certfleet.debug its debug info (gdb finds it by the debuglink)
#   /usr/local/lib/certfleet/certfleet_store_mongo.so
#                                                the MongoDB backend, stripped (its debug info
#                                                likewise under /usr/lib/debug): the binary loads it
#                                                from bin/../lib/certfleet/ only for a mongodb:// store
#   /etc/certfleet/certfleet.toml                the config (packaging/certfleet.toml; kept if present)
#   /var/lib/certfleet                           data: store, key file, owner token (mode 0700)
#   /etc/systemd/system/certfleet.service        the unit (packaging/certfleet.service)
# and a `certfleet` system user that owns the data. Run it as root after the build
# (cmake --build build --target certfleet). Safe to run again: an upgrade replaces the binary
# and the unit, never the config or the data.
#
#   scripts/install.sh [--binary PATH] [--root DIR] [--no-user]
#     --binary  the certfleet to install (default: build/certfleet); the MongoDB backend
#               (certfleet_store_mongo.so) is taken from beside it, where the build puts it
#     --root    install under DIR instead of / (packaging, tests); no user, no systemctl
#     --no-user do not create the certfleet user (the files stay root's)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
binary="$here/build/certfleet"
root=""
make_user=1
while (($#)); do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --root) root="${2%/}"; make_user=0; shift 2 ;;
    --no-user) make_user=0; shift ;;
    *) echo "install.sh: unknown option $1 (see the comment at the top of the script)" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$binary" ]]; then
  echo "install.sh: $binary is not an executable: build first (cmake --build build --target certfleet)" >&2
  exit 2
fi
module="$(dirname "$binary")/certfleet_store_mongo.so"
if [[ ! -f "$module" ]]; then
  echo "install.sh: $module is missing: build first (cmake --build build --target certfleet builds it too)" >&2
  exit 2
fi
if [[ -z "$root" && $(id -u) -ne 0 ]]; then
  echo "install.sh: run as root (or with --root DIR)" >&2
  exit 2
fi
for tool in objcopy install; do
  command -v "$tool" >/dev/null || { echo "install.sh: $tool is missing (apt-get install binutils coreutils)" >&2; exit 2; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The debug info goes to its own file; the installed binary keeps only a link to it (its name
# and CRC), so gdb and coredumpctl find it under /usr/lib/debug.
objcopy --only-keep-debug "$binary" "$work/certfleet.debug"
objcopy --strip-debug --strip-unneeded "$binary" "$work/certfleet"
objcopy --add-gnu-debuglink="$work/certfleet.debug" "$work/certfleet"
# The MongoDB backend likewise; its exported entry point and dynamic symbols stay.
objcopy --only-keep-debug "$module" "$work/certfleet_store_mongo.so.debug"
objcopy --strip-debug --strip-unneeded "$module" "$work/certfleet_store_mongo.so"
objcopy --add-gnu-debuglink="$work/certfleet_store_mongo.so.debug" "$work/certfleet_store_mongo.so"

install -d -m 0755 "$root/usr/local/bin" "$root/usr/lib/debug/usr/local/bin" "$root/etc/certfleet" \
  "$root/etc/systemd/system" "$root/usr/local/lib/certfleet" "$root/usr/lib/debug/usr/local/lib/certfleet"
install -m 0755 "$work/certfleet" "$root/usr/local/bin/certfleet"
install -m 0644 "$work/certfleet.debug" "$root/usr/lib/debug/usr/local/bin/certfleet.debug"
install -m 0644 "$work/certfleet_store_mongo.so" "$root/usr/local/lib/certfleet/certfleet_store_mongo.so"
install -m 0644 "$work/certfleet_store_mongo.so.debug" \
  "$root/usr/lib/debug/usr/local/lib/certfleet/certfleet_store_mongo.so.debug"

owner=root
if ((make_user)); then
  if ! getent passwd certfleet >/dev/null; then
    useradd --system --user-group --home-dir /var/lib/certfleet --no-create-home --shell /usr/sbin/nologin \
      --comment "certfleet service" certfleet
  fi
  owner=certfleet
fi

# Data: the store, the key-encryption key and the owner token; nobody else may list it.
install -d -m 0700 -o "$owner" -g "$owner" "$root/var/lib/certfleet"
chmod 0700 "$root/var/lib/certfleet"

# Config: the generated sample with the install layout's values, readable by the service only.
if [[ ! -e "$root/etc/certfleet/certfleet.toml" ]]; then
  install -m 0640 -o root -g "$owner" "$here/packaging/certfleet.toml" "$root/etc/certfleet/certfleet.toml"
else
  echo "install.sh: kept $root/etc/certfleet/certfleet.toml (the new sample is packaging/certfleet.toml)"
fi

install -m 0644 "$here/packaging/certfleet.service" "$root/etc/systemd/system/certfleet.service"
if [[ -z "$root" ]] && [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
fi

size() { stat -c %s "$1"; }
echo "install.sh: $root/usr/local/bin/certfleet $(size "$root/usr/local/bin/certfleet") bytes" \
  "(built: $(size "$binary") bytes; debug info: $(size "$root/usr/lib/debug/usr/local/bin/certfleet.debug") bytes" \
  "in $root/usr/lib/debug/usr/local/bin/certfleet.debug)"
if [[ -z "$root" ]]; then
  cat <<'NEXT'
install.sh: next: put a certificate in place and set tls_cert_file / tls_key_file (or tls_certificate)
  in /etc/certfleet/certfleet.toml, then:
    certfleet doctor --config /etc/certfleet/certfleet.toml
    systemctl enable --now certfleet
NEXT
fi
