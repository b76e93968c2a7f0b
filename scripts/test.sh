#!/usr/bin/env bash
# The whole test suite: unit tests, and integration tests that start their
# own redis-server processes on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
cargo test --locked
