# Conveniences; each target is one script or cargo command.
.PHONY: demo test bench docs lint

demo:
	scripts/demo.sh

test:
	scripts/test.sh

bench:
	scripts/ensure-redis.sh
	cargo bench --locked --bench cli

# Regenerate man/ and completions/ from the clap definition.
docs:
	RLOCK_BLESS=1 cargo test --locked --test integration docs

lint:
	cargo fmt --all -- --check
	cargo clippy --locked --all-targets -- -D warnings
