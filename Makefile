# Conveniences; each target is one script or cargo command.
.PHONY: demo test bench bench-market docs lint build install uninstall deb

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
	scripts/cargo-release.sh bench --locked --bench cli

# The seed-000 market simulation beside the article's table (about 50 s);
# MARKET_ARGS="--seconds 60" for the article's cell length.
MARKET_ARGS ?=
bench-market:
	scripts/ensure-redis.sh
	cargo bench --locked --bench market -- $(MARKET_ARGS)

# Regenerate man/ and completions/ from the clap definition.
docs:
	RLOCK_BLESS=1 cargo test --locked --bin rlock generate

lint:
	cargo fmt --all -- --check
	cargo clippy --locked --workspace --all-targets -- -D warnings
	cargo clippy --locked --lib --no-default-features -- -D warnings
	RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps

# Install the binary, the man pages and the completions where each shell
# looks for them. PREFIX (default /usr/local) and DESTDIR as usual.
PREFIX ?= /usr/local
BINDIR = $(DESTDIR)$(PREFIX)/bin
MANDIR = $(DESTDIR)$(PREFIX)/share/man/man1
BASHDIR = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR = $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR = $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
# The binary to install (a test installs the one it built): what `make
# build` makes (scripts/cargo-release.sh: on Linux with glibc, the C
# library linked in, under target/<host>/release).
RLOCK_BIN ?= $(shell scripts/cargo-release.sh --dir)/rlock

build:
	scripts/cargo-release.sh build --locked --release --bin rlock

# Copies only: build first as yourself (`make build`, or `cargo install`
# and RLOCK_BIN=~/.cargo/bin/rlock). A build under sudo would find no
# rustup cargo on root's PATH, and would leave a root-owned target/.
install:
	@test -x $(RLOCK_BIN) || { echo "rlock: $(RLOCK_BIN) is missing: run \`make build\` (as your user, not root) first, or give RLOCK_BIN=path/to/rlock" >&2; exit 1; }
	install -d $(BINDIR) $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	install -m 755 $(RLOCK_BIN) $(BINDIR)/rlock
	install -m 644 man/*.1 $(MANDIR)/
	install -m 644 completions/rlock.bash $(BASHDIR)/rlock
	install -m 644 completions/_rlock $(ZSHDIR)/_rlock
	install -m 644 completions/rlock.fish $(FISHDIR)/rlock.fish

uninstall:
	rm -f $(BINDIR)/rlock $(BASHDIR)/rlock $(ZSHDIR)/_rlock $(FISHDIR)/rlock.fish
	for page in man/*.1; do rm -f $(MANDIR)/$$(basename $$page); done

# The Debian package, target/debian/rlock_<version>_<arch>.deb (see
# scripts/deb.sh): builds the release binary first (`make build`), as yourself; root is
# not needed. Given RLOCK_BIN=path, packages that binary instead of
# building (a test packages the one it built); DEB_DIR=dir writes there.
DEB_DIR ?= target/debian
deb: $(if $(filter file,$(origin RLOCK_BIN)),build)
	RLOCK_BIN=$(RLOCK_BIN) DEB_DIR=$(DEB_DIR) scripts/deb.sh
