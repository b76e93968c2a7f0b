#!/usr/bin/env bash
# Install redis-server and redis-cli from Debian's packages if they are missing.
set -euo pipefail
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
  exit 0
fi
echo "rlock: installing redis-server (apt-get)..." >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq redis-server >/dev/null
