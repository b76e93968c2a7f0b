#!/usr/bin/env bash
# The whole test suite: unit tests, and integration tests that start their
# own redis-server processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
# Four at a time: the tests start ~150 redis-servers, clusters and
# Sentinels, and a 2-core machine running them all at once makes timeouts
# fire that measure the machine, not rlock.
cargo test --locked -- --test-threads=4
