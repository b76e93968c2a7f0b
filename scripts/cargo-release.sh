#!/bin/sh
# cargo, as the shipped binary is built (`make build`, `make deb`, `make
# bench`, the demo): on Linux with glibc, the C library is linked into the
# binary (`-C target-feature=+crt-static`, a static PIE), elsewhere cargo's
# defaults.
#
#   scripts/cargo-release.sh build --locked --release --bin rlock
#   scripts/cargo-release.sh bench --locked --bench cli
#   scripts/cargo-release.sh --dir     # where its release binaries go
#
# Why: every `rlock` run starts a process, and a dynamically linked one
# first has ld.so load libc.so.6 and bind its symbols: about 0.45 ms of
# the 3.8 ms an `rlock exec k -- true` took here (BENCHMARKS.md, "Issue 32:
# the run of session 12"). The flag goes through --target so
# that it reaches only what runs on the target (rlock, the tests and
# benches), never the build's proc-macros, which cannot be linked
# statically; so the binaries land in target/<host>/release, and a plain
# `cargo build --release` (target/release) stays as cargo makes it.
#
# What a static glibc changes (README, "Install"): host names resolve
# from /etc/hosts and DNS (glibc's built-in `files` and `dns`); other
# nsswitch.conf sources (mdns, myhostname, LDAP/SSSD users) are used only
# if the installed glibc is the one rlock was built with.
set -eu
dir=${CARGO_TARGET_DIR:-target}
host=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p') || true
# The static link needs glibc's archive, libc.a (Debian's libc6-dev, which
# a Rust toolchain's C linker comes with; some distributions package it
# apart, e.g. glibc-static): without it, cargo's defaults.
static=no
case $host in
*-linux-gnu*)
  libc_a=$(${CC:-cc} -print-file-name=libc.a 2>/dev/null) || libc_a=
  case $libc_a in /*) [ ! -e "$libc_a" ] || static=yes ;; esac
  ;;
esac
if [ $static = yes ]; then
  out=$dir/$host/release
else
  out=$dir/release
  # No rustc on PATH (`sudo make install`): where a build left an rlock.
  if [ -z "$host" ]; then
    for d in "$dir"/*-linux-gnu*/release; do
      if [ -x "$d/rlock" ]; then
        out=$d
        break
      fi
    done
  fi
fi
if [ "${1:-}" = --dir ]; then
  echo "$out"
  exit 0
fi
if [ $static = yes ]; then
  cmd=$1
  shift
  # The getrandom crate (owner tokens) finds glibc's getrandom(3) with
  # dlsym, which a static binary cannot answer: it then opens /dev/random,
  # polls it and reads /dev/urandom, four system calls and a file each
  # run. Named here, it calls getrandom(3) (glibc 2.25 on) directly.
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static --cfg getrandom_backend=\"linux_getrandom\"" exec cargo "$cmd" --target "$host" "$@"
fi
case $host in
*-linux-gnu*) echo "rlock: no static C library (libc.a) here: building a dynamically linked rlock" >&2 ;;
esac
exec cargo "$@"
