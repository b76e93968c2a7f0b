#!/usr/bin/env bash
# Build the Debian package of rlock (`make deb`): dpkg-deb only, no extra
# tool (cargo-deb would be one more thing to install on every builder).
#
#   scripts/deb.sh                 packages what `make build` made
#   RLOCK_BIN=path DEB_DIR=dir scripts/deb.sh
#
# Writes $DEB_DIR/rlock_<version>_<arch>.deb (DEB_DIR defaults to
# target/debian) and prints its path. It never builds: `make deb` runs
# `make build` first. Needs dpkg-deb (dpkg), dpkg-shlibdeps (dpkg-dev) and
# readelf (binutils), not root: the files are owned by root in the package
# (--root-owner-group) whoever builds it.
#
# What goes where (Debian policy and the shells' vendor directories):
#   /usr/bin/rlock                                   stripped binary
#   /usr/share/man/man1/rlock*.1.gz                  man/*.1, gzip -9n
#   /usr/share/bash-completion/completions/rlock     completions/rlock.bash
#   /usr/share/zsh/vendor-completions/_rlock         completions/_rlock
#   /usr/share/fish/vendor_completions.d/rlock.fish  completions/rlock.fish
#   /usr/share/doc/rlock/copyright                   machine-readable, from Cargo.toml's license
#   /usr/share/doc/rlock/changelog.gz                CHANGELOG.md
#   /usr/share/doc/rlock/changelog.Debian.gz         one entry per package version
#   /usr/share/doc/rlock/examples/rlock-exporter.service  contrib/systemd/
#   /usr/share/doc/rlock/examples/alerts.yml         contrib/prometheus/alerts.yml
#   DEBIAN/control, DEBIAN/md5sums
#
# The exporter's unit is an example, not in /lib/systemd/system: it needs
# /etc/default/rlock-exporter (the Redis URL, a password) that only the
# admin can write, and one host of a site runs it; a unit there would be
# listed but inert (enabling it takes maintainer scripts this package does
# not have). The admin copies it to /etc/systemd/system (README,
# "Operating").
#
# The fields come from Cargo.toml: Version (`version`, a pre-release's `-`
# becomes `~` so that 1.0.0~rc.1 sorts before 1.0.0), the short Description
# (`description`), Homepage (`homepage`, else `repository`), and from its
# [package.metadata.deb] table: Maintainer, Section, Priority. Depends is
# computed by dpkg-shlibdeps from the libraries the binary links, and
# Architecture is dpkg's. The same binary gives a byte-identical package:
# every timestamp is SOURCE_DATE_EPOCH, by default the last commit's time
# (and when git cannot tell it, the script stops and asks for one).
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
  echo "rlock: $*" >&2
  exit 1
}

bin=${RLOCK_BIN:-$(scripts/cargo-release.sh --dir)/rlock}
out=${DEB_DIR:-target/debian}
[ -x "$bin" ] || die "$bin is missing: run \`make deb\` (it builds first), or give RLOCK_BIN=path/to/rlock"
command -v dpkg-deb >/dev/null || die "dpkg-deb is missing: is this Debian?"
command -v dpkg-shlibdeps >/dev/null || die "dpkg-shlibdeps is missing: apt-get install dpkg-dev"
command -v strip >/dev/null || die "strip is missing: apt-get install binutils"
command -v readelf >/dev/null || die "readelf is missing: apt-get install binutils"

# `key = "value"` of one [section] of Cargo.toml (the first one).
toml() {
  awk -v sec="[$1]" -v key="$2" '
    /^\[/ { in_sec = ($0 == sec); next }
    in_sec && $1 == key && $2 == "=" {
      v = $0; sub(/^[^=]*= *"/, "", v); sub(/".*$/, "", v); print v; exit
    }' Cargo.toml
}
field() {
  local v
  v=$(toml "$@")
  [ -n "$v" ] || die "Cargo.toml has no $2 in [$1]"
  printf '%s' "$v"
}

version=$(field package version)
version=${version//-/\~}
arch=$(dpkg --print-architecture)
summary=$(field package description)
homepage=$(toml package homepage)
[ -n "$homepage" ] || homepage=$(field package repository)
license=$(field package license)
maintainer=$(field package.metadata.deb maintainer)
section=$(field package.metadata.deb section)
priority=$(field package.metadata.deb priority)
# The copyright file below spells out these two licenses: a new license
# expression must be written there too before it can be packaged.
[ "$license" = "MIT OR Apache-2.0" ] ||
  die "Cargo.toml's license is \"$license\": scripts/deb.sh only knows \"MIT OR Apache-2.0\""

# Never the build's own time: that would make the package differ from
# one build to the next. Without git's answer (a tarball without .git, or
# a checkout git refuses: "dubious ownership" of another user's tree),
# the caller must say.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null) && [ -n "$SOURCE_DATE_EPOCH" ] ||
    die "no commit time from git (no .git, or git refuses this checkout): set SOURCE_DATE_EPOCH (seconds since 1970) for a reproducible package"
fi
case $SOURCE_DATE_EPOCH in
  *[!0-9]*) die "SOURCE_DATE_EPOCH must be seconds since 1970, not \"$SOURCE_DATE_EPOCH\"" ;;
esac
export SOURCE_DATE_EPOCH
year=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
# mktemp's 0700 would become the package's "./" entry.
install -d -m 755 "$root" "$root/DEBIAN"
dir() { install -d -m 755 "$root/$1"; }

dir usr/bin
install -m 755 "$bin" "$root/usr/bin/rlock"
# As dh_strip does; `make build`'s binary is already stripped (Cargo.toml
# strip = true), a debug build is not.
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/rlock"

dir usr/share/man/man1
for page in man/*.1; do
  gzip -9n <"$page" >"$root/usr/share/man/man1/$(basename "$page").gz"
  chmod 644 "$root/usr/share/man/man1/$(basename "$page").gz"
done

dir usr/share/bash-completion/completions
dir usr/share/zsh/vendor-completions
dir usr/share/fish/vendor_completions.d
install -m 644 completions/rlock.bash "$root/usr/share/bash-completion/completions/rlock"
install -m 644 completions/_rlock "$root/usr/share/zsh/vendor-completions/_rlock"
install -m 644 completions/rlock.fish "$root/usr/share/fish/vendor_completions.d/rlock.fish"

doc=usr/share/doc/rlock
dir "$doc"
dir "$doc/examples"
install -m 644 contrib/systemd/rlock-exporter.service "$root/$doc/examples/rlock-exporter.service"
install -m 644 contrib/prometheus/alerts.yml "$root/$doc/examples/alerts.yml"
gzip -9n <CHANGELOG.md >"$root/$doc/changelog.gz"
gzip -9n >"$root/$doc/changelog.Debian.gz" <<EOF
rlock ($version) unstable; urgency=medium

  * Package of rlock $version, built from its source tree with make deb.
    Its changes are in /usr/share/doc/rlock/changelog.gz.

 -- $maintainer  $(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")
EOF
# Apache-2.0's text is in base-files; MIT's is short and must be quoted.
cat >"$root/$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: rlock
Upstream-Contact: $maintainer
Source: $homepage

Files: *
Copyright: $year rlock contributors
License: MIT or Apache-2.0

License: MIT
 Permission is hereby granted, free of charge, to any person obtaining a copy
 of this software and associated documentation files (the "Software"), to
 deal in the Software without restriction, including without limitation the
 rights to use, copy, modify, merge, publish, distribute, sublicense, and/or
 sell copies of the Software, and to permit persons to whom the Software is
 furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in
 all copies or substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING
 FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS
 IN THE SOFTWARE.

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not
 use this file except in compliance with the License. You may obtain a copy
 of the License at
 .
 http://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
 WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
 License for the specific language governing permissions and limitations
 under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in "/usr/share/common-licenses/Apache-2.0".
EOF
chmod 644 "$root/$doc/copyright"

# Depends: dpkg-shlibdeps maps each library the binary links (ELF NEEDED)
# to the package that ships it and the oldest version with the symbols it
# uses. It wants a debian/control naming the package, so it runs in a
# scratch source tree. A binary with its C library linked in (`make
# build` on Linux/glibc: no program interpreter, nothing NEEDED) depends
# on no package, and has no Depends field.
depends_line=
headers=$(LC_ALL=C readelf -lW "$root/usr/bin/rlock") || die "readelf cannot read $bin"
if [[ $headers == *"program interpreter"* ]]; then
  install -d "$work/src/debian"
  printf 'Source: rlock\n\nPackage: rlock\nArchitecture: any\n' >"$work/src/debian/control"
  depends=$(cd "$work/src" && dpkg-shlibdeps -O "$root/usr/bin/rlock" 2>"$work/shlibdeps.err") ||
    die "dpkg-shlibdeps failed: $(cat "$work/shlibdeps.err")"
  depends=${depends#shlibs:Depends=}
  [ -n "$depends" ] || die "dpkg-shlibdeps found no dependency"
  depends_line="Depends: $depends
"
fi

# Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up,
# and 1 per directory.
installed_size=$(cd "$root" && find usr \( -type f -printf '%s\n' \) -o -printf '0\n' |
  awk '{ n += ($1 == 0) ? 1 : int(($1 + 1023) / 1024) } END { print n }')

cat >"$root/DEBIAN/control" <<EOF
Package: rlock
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
${depends_line}Section: $section
Priority: $priority
Homepage: $homepage
Description: $summary
 rlock puts a lock in front of a command and gives mutual exclusion across
 every host that shares one Redis (or Valkey, Sentinel, Redis Cluster, or
 several independent servers with RedLock): rlock exec KEY -- command.
 .
 Waiters queue in Redis and never poll; holders renew their lease while the
 command runs, and a command whose lock is lost is stopped. It also offers
 counting semaphores, read-write locks, fencing tokens, shell-style
 acquire/release, and status, list, top, history and Prometheus metrics
 for operators.
EOF
chmod 644 "$root/DEBIAN/control"
# dpkg --verify checks the installed files against these.
(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/md5sums"

mkdir -p "$out"
deb=$out/rlock_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
