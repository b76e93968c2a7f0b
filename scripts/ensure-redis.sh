#!/usr/bin/env bash
# Install what the demo and the tests need from Debian's packages, if it is
# missing: redis-server and redis-cli, and openssl (the TLS tests make their
# certificates with it), make (a test runs make install), tmux (the
# `rlock top` tests drive it in a real terminal), dpkg-dev (`make deb`
# computes the package's Depends with dpkg-shlibdeps), binutils (its
# test checks them against objdump's list of linked libraries), busybox
# (`acquire --keep` is tested in a busybox sh script) and sudo (and under
# `sudo -u` as the same user), iproute2 (`ss` shows a test the bytes a
# stopped guard has not read) and strace (the files the shipped binary
# opens).
set -euo pipefail
missing=()
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || missing+=(redis-server)
command -v openssl >/dev/null || missing+=(openssl)
command -v make >/dev/null || missing+=(make)
command -v tmux >/dev/null || missing+=(tmux)
command -v dpkg-shlibdeps >/dev/null || missing+=(dpkg-dev)
command -v objdump >/dev/null || missing+=(binutils)
command -v busybox >/dev/null || missing+=(busybox)
command -v sudo >/dev/null || missing+=(sudo)
command -v ss >/dev/null || missing+=(iproute2)
command -v strace >/dev/null || missing+=(strace)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "rlock: installing ${missing[*]} (apt-get)..." >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}" >/dev/null
