#!/usr/bin/env bash
# Release artifacts from the README's build (docs/install.md#the-package):
#   certfleet_<version>_amd64.deb         the binary (stripped), the MongoDB backend, the unit, the
#                                          config example (a conffile), the man page; postinst makes
#                                          the `certfleet` system user and /var/lib/certfleet (0700)
#   certfleet-dbgsym_<version>_amd64.deb  the debug info, under /usr/lib/debug/.build-id/
#   certfleet_<version>_linux_amd64.tar.gz the stripped binary and backend, the unit, the config
#                                          example and docs/, for machines without dpkg
#   SHA256SUMS                             of the three
#
#   scripts/package.sh [--build DIR] [--out DIR]
#     --build  the build directory holding certfleet and certfleet_store_mongo.so (default: build)
#     --out    where the artifacts go (default: DIR/package)
# Needs: dpkg-deb, dpkg-shlibdeps (dpkg-dev), objcopy (binutils), fakeroot; `lintian` checks the
# result (tests/packaging/deb_test.sh does, in CI). Nothing here needs root.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$here/build"
out=""
while (($#)); do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "package.sh: unknown option $1 (see the comment at the top of the script)" >&2; exit 2 ;;
  esac
done
out="${out:-$build/package}"
binary="$build/certfleet"
module="$build/certfleet_store_mongo.so"
for f in "$binary" "$module"; do
  [[ -f "$f" ]] || { echo "package.sh: $f is missing: build first (cmake --build $build --target certfleet)" >&2; exit 2; }
done
for tool in dpkg-deb dpkg-shlibdeps objcopy fakeroot gzip; do
  command -v "$tool" >/dev/null || { echo "package.sh: $tool is missing (./scripts/install-deps.sh --test installs it)" >&2; exit 2; }
done

# The version the binary reports ("certfleet 0.1.0 (commit …)"): one version, the build's.
version="$("$binary" --version | awk 'NR == 1 {print $2}')"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "package.sh: cannot read the version from $binary --version" >&2; exit 2; }
arch=amd64
# Who answers for the package (Maintainer:, the changelog); set CERTFLEET_MAINTAINER for a release.
maintainer="${CERTFLEET_MAINTAINER:-certfleet maintainers <maintainers@certfleet.example.org>}"
# File times in the archives: the last commit's, so two builds of one commit give the same bytes.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct 2>/dev/null || date +%s)}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
pkg="$work/certfleet"
dbg="$work/certfleet-dbgsym"

# --- Binaries: stripped, each with a debuglink to its debug file under /usr/lib/debug/.build-id/.
build_id() { readelf -n "$1" | awk '/Build ID:/ {print $3; exit}'; }
strip_into() {  # strip_into SRC DEST_IN_PKG
  local src="$1" dest="$2" id
  id="$(build_id "$src")"
  [[ -n "$id" ]] || { echo "package.sh: $src has no build ID (link with --build-id)" >&2; exit 2; }
  local debug_rel="usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  mkdir -p "$(dirname "$dbg/$debug_rel")" "$(dirname "$pkg/$dest")"
  objcopy --only-keep-debug --compress-debug-sections "$src" "$dbg/$debug_rel"
  chmod 0644 "$dbg/$debug_rel"
  objcopy --strip-debug --strip-unneeded --remove-section=.comment --remove-section=.note "$src" "$pkg/$dest"
  objcopy --add-gnu-debuglink="$dbg/$debug_rel" "$pkg/$dest"
  build_ids+=("$id")
}
build_ids=()
strip_into "$binary" usr/bin/certfleet
chmod 0755 "$pkg/usr/bin/certfleet"
strip_into "$module" usr/lib/certfleet/certfleet_store_mongo.so
chmod 0644 "$pkg/usr/lib/certfleet/certfleet_store_mongo.so"

# --- The unit, the config example, the docs, the man page.
install -D -m 0644 /dev/stdin "$pkg/lib/systemd/system/certfleet.service" \
  < <(sed 's|/usr/local/bin/certfleet|/usr/bin/certfleet|g; s|Installed by scripts/install.sh as|Installed by the certfleet package as|; s|/etc/systemd/system/certfleet.service|/lib/systemd/system/certfleet.service|; s|the install script replaces this file|an upgrade of the package replaces this file|' \
      "$here/packaging/certfleet.service")
install -D -m 0644 "$here/packaging/certfleet.toml" "$pkg/etc/certfleet/certfleet.toml"
doc="$pkg/usr/share/doc/certfleet"
install -d -m 0755 "$doc"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: certfleet
Upstream-Contact: the certfleet authors
Comment: The authors have not chosen a license yet; until they do, no license is granted
 beyond running this package as installed.

Files: *
Copyright: 2026 the certfleet authors
License: none
 No license has been chosen yet. All rights reserved by the authors.
EOF
when="$(date -u -d "@$SOURCE_DATE_EPOCH" -R)"
commit="$(git -C "$here" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
printf 'certfleet (%s) stable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
  "$version" "$commit" "$maintainer" "$when" | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
install -d -m 0755 "$pkg/usr/share/man/man1"
{
  echo ".TH CERTFLEET 1 \"$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)\" \"certfleet $version\" \"User Commands\""
  echo ".SH NAME"
  echo "certfleet \\- certificate automation and delivery to server fleets"
  echo ".SH SYNOPSIS"
  echo ".B certfleet"
  echo ".I command"
  echo "[\\fIoptions\\fR]"
  echo ".SH DESCRIPTION"
  echo "certfleet obtains and renews certificates over ACME and delivers them to servers over SSH,"
  echo "to local files and to webhooks, as durable jobs; an HTTP API and a web UI show every job."
  echo "The service runs as \\fBcertfleet serve \\-\\-config /etc/certfleet/certfleet.toml\\fR"
  echo "(the certfleet.service unit)."
  echo ".SH COMMANDS"
  "$binary" --help | awk '/^Subcommands:/ {on = 1; next} on && NF { name = $1; $1 = ""; sub(/^ +/, ""); printf ".TP\n.B %s\n%s\n", name, $0 }' \
    | sed 's/-/\\-/g'
  echo ".SH FILES"
  echo ".TP"
  echo ".I /etc/certfleet/certfleet.toml"
  echo "the configuration: every process setting, commented out at its default"
  echo ".TP"
  echo ".I /var/lib/certfleet"
  echo "the store, the key-encryption key and the first owner token (mode 0700)"
  echo ".SH SEE ALSO"
  echo "\\fBcertfleet <command> \\-\\-help\\fR; the documentation in the source tree's docs/ (install.md, cli.md, api.md)."
} | gzip -9n > "$pkg/usr/share/man/man1/certfleet.1.gz"
chmod 0644 "$pkg/usr/share/man/man1/certfleet.1.gz"
# Shell completion where bash-completion and fish look for it (zsh's is a bashcompinit script a
# user sources: docs/cli.md).
install -d -m 0755 "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/fish/vendor_completions.d"
"$binary" completion bash > "$pkg/usr/share/bash-completion/completions/certfleet"
"$binary" completion fish > "$pkg/usr/share/fish/vendor_completions.d/certfleet.fish"
chmod 0644 "$pkg/usr/share/bash-completion/completions/certfleet" "$pkg/usr/share/fish/vendor_completions.d/certfleet.fish"

# --- Control files. The runtime libraries come from dpkg-shlibdeps: the binary's are Depends, the
# MongoDB backend's (libmongoc) only Recommends, as only a mongodb:// store loads it.
mkdir -p "$work/shlibs/debian" "$pkg/DEBIAN" "$dbg/DEBIAN"
printf 'Source: certfleet\n\nPackage: certfleet\nArchitecture: %s\n' "$arch" > "$work/shlibs/debian/control"
(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$pkg/usr/bin/certfleet" -dRecommends -e"$pkg/usr/lib/certfleet/certfleet_store_mongo.so" 2>"$work/shlibdeps.err") \
  > "$work/substvars" || { cat "$work/shlibdeps.err" >&2; exit 2; }
depends="$(sed -n 's/^shlibs:Depends=//p' "$work/substvars")"
recommends="$(sed -n 's/^shlibs:Recommends=//p' "$work/substvars")"
[[ -n "$depends" ]] || { echo "package.sh: dpkg-shlibdeps found no library dependency" >&2; exit 2; }
installed_size="$(du -k -s --apparent-size "$pkg" | awk '{print $1}')"
{
  echo "Package: certfleet"
  echo "Version: $version"
  echo "Architecture: $arch"
  echo "Maintainer: $maintainer"
  echo "Installed-Size: $installed_size"
  echo "Depends: $depends, passwd"
  [[ -n "$recommends" ]] && echo "Recommends: ca-certificates, $recommends" || echo "Recommends: ca-certificates"
  echo "Section: admin"
  echo "Priority: optional"
  echo "Homepage: https://certfleet.invalid/"
  echo "Description: certificate automation and delivery to server fleets"
  echo " certfleet obtains and renews certificates over ACME (DNS-01) and delivers"
  echo " them to fleets of servers over SSH, to local files and to webhooks, as"
  echo " durable jobs with live logs, an HTTP API and a web UI. It runs on one"
  echo " machine with its embedded SQLite store, or on several sharing MongoDB."
} > "$pkg/DEBIAN/control"
echo /etc/certfleet/certfleet.toml > "$pkg/DEBIAN/conffiles"
install -m 0755 "$here/packaging/deb/postinst" "$here/packaging/deb/postrm" "$here/packaging/deb/prerm" "$pkg/DEBIAN/"
(cd "$pkg" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"

dbg_doc="$dbg/usr/share/doc"
install -d -m 0755 "$dbg_doc"
ln -s certfleet "$dbg_doc/certfleet-dbgsym"
{
  echo "Package: certfleet-dbgsym"
  echo "Source: certfleet"
  echo "Version: $version"
  echo "Auto-Built-Package: debug-symbols"
  echo "Architecture: $arch"
  echo "Maintainer: $maintainer"
  echo "Installed-Size: $(du -k -s --apparent-size "$dbg" | awk '{print $1}')"
  echo "Depends: certfleet (= $version)"
  echo "Section: debug"
  echo "Priority: optional"
  echo "Description: debug symbols for certfleet"
  echo "Build-Ids: ${build_ids[*]}"
} > "$dbg/DEBIAN/control"
(cd "$dbg" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$dbg/DEBIAN/md5sums"
chmod 0644 "$dbg/DEBIAN/control" "$dbg/DEBIAN/md5sums"

# Directories 0755, files as set above; owned by root in the archive (fakeroot).
find "$pkg" "$dbg" -type d -exec chmod 0755 {} +
deb="$out/certfleet_${version}_${arch}.deb"
dbgdeb="$out/certfleet-dbgsym_${version}_${arch}.deb"
fakeroot dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
# The debug sections are compressed already (zlib): a second pass would only cost time.
fakeroot dpkg-deb --root-owner-group -Zgzip -z1 --build "$dbg" "$dbgdeb" >/dev/null

# --- The tarball: the same stripped files, for machines without dpkg.
tarname="certfleet_${version}_linux_${arch}"
tardir="$work/$tarname"
install -d "$tardir/bin" "$tardir/lib/certfleet" "$tardir/docs"
cp "$pkg/usr/bin/certfleet" "$tardir/bin/"
cp "$pkg/usr/lib/certfleet/certfleet_store_mongo.so" "$tardir/lib/certfleet/"
cp "$here/packaging/certfleet.service" "$here/packaging/certfleet.toml" "$tardir/"
cp -r "$here/docs/." "$tardir/docs/"
cp "$doc/copyright" "$tardir/COPYRIGHT"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -C "$work" -cf - "$tarname" \
  | gzip -9n > "$out/$tarname.tar.gz"

(cd "$out" && sha256sum "$(basename "$deb")" "$(basename "$dbgdeb")" "$tarname.tar.gz" > SHA256SUMS)
echo "package.sh: $deb ($(stat -c %s "$deb") bytes)"
echo "package.sh: $dbgdeb ($(stat -c %s "$dbgdeb") bytes)"
echo "package.sh: $out/$tarname.tar.gz ($(stat -c %s "$out/$tarname.tar.gz") bytes)"
echo "package.sh: $out/SHA256SUMS"
