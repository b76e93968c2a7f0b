# Conveniences; each target is one script or cargo command.
.PHONY: demo test bench docs lint

demo:
	scripts/demo.sh

test:
	scripts/test.sh

# etcd (Debian's etcd-server, etcd-client) only adds comparison rows: if it
# cannot be installed, the bench runs anyway and says it skipped them.
bench:
	scripts/ensure-redis.sh
	@command -v etcd >/dev/null && command -v etcdctl >/dev/null || { \
	  echo "rlock: installing etcd-server, etcd-client (apt-get)..." >&2; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    etcd-server etcd-client >/dev/null || \
	  echo "rlock: could not install etcd; the bench will skip it" >&2; }
	cargo bench --locked --bench cli

# Regenerate man/ and completions/ from the clap definition.
docs:
	RLOCK_BLESS=1 cargo test --locked --test integration docs

lint:
	cargo fmt --all -- --check
	cargo clippy --locked --all-targets -- -D warnings
