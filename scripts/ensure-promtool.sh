#!/usr/bin/env bash
# Install promtool if it is missing: the tests run `promtool test rules` on
# contrib/prometheus/alerts.test.yml and `promtool check metrics` on real
# output of `rlock metrics`. Debian ships promtool in its `prometheus`
# package, whose install would start a Prometheus server (port 9090) and,
# through Recommends, a node exporter (port 9100). Neither is wanted:
# Recommends are not installed, and while apt runs a policy-rc.d that
# answers 101 ("action forbidden") keeps invoke-rc.d from starting the
# server. An existing policy-rc.d (Docker images have one) is left as it
# is; one made here is removed on exit.
set -euo pipefail
command -v promtool >/dev/null && exit 0
echo "rlock: installing prometheus, for promtool (apt-get)..." >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# systemd may start a unit without invoke-rc.d (deb-systemd-invoke): stop
# and disable it where systemd runs, so no server outlives the install.
if [ -d /run/systemd/system ]; then
  $sudo systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null
