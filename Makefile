# Vigil — build, run and test. `make run` and `make test` are the two commands a newcomer needs;
# both install what is missing first (Debian packages, Rust components).

CARGO ?= cargo
VIGIL := target/release/vigil
# Debian packages the build needs (clang, llvm, libelf, zlib: the eBPF programs and libbpf;
# strace, runc, debootstrap, openssl, curl, bpftool and rsyslog: tests).
APT_PACKAGES := pkg-config make gcc clang llvm libelf-dev zlib1g-dev strace runc debootstrap \
  openssl curl bpftool rsyslog
RUST_COMPONENTS := rustfmt clippy

.PHONY: all deps build run test lint fmt bench fuzz clean

all: build

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; fi
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs"; exit 1; }
	@if command -v rustup >/dev/null; then \
	  for c in $(RUST_COMPONENTS); do rustup component list --installed | grep -q "^$$c" || rustup component add $$c; done; fi

# helm, for the Helm chart test (crates/cli/tests/helm.rs): built from its Go module into
# target/tools/bin when missing (a few minutes once; it needs Go: without it the test skips).
HELM_VERSION := v3.22.0
HELM := target/tools/bin/helm
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
deps: $(HELM)
$(HELM):
	@if [ -x "$(GO)" ]; then \
	  echo "installing helm $(HELM_VERSION) into $(@D)"; \
	  GOBIN=$(CURDIR)/$(@D) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); \
	else echo "go not found: helm not installed, the Helm chart test will skip"; fi

build: deps
	$(CARGO) build --release --bin vigil

# Starts the agent: `vigil watch` on its embedded default ruleset (host-wide, eBPF; root and a
# BTF kernel). It names what is missing otherwise; `vigil run -- CMD` works without them.
run: build
	$(VIGIL) watch

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test: lint
	$(CARGO) test --workspace

fmt:
	$(CARGO) fmt --all

bench: deps
	$(CARGO) bench -p vigil-engine
	$(CARGO) bench -p vigil-output

# Runs each fuzz target for FUZZ_SECONDS (needs the nightly toolchain and cargo-fuzz).
FUZZ_SECONDS ?= 300
fuzz:
	cd fuzz && for t in condition_parser rules_loader capture_reader; do \
	  cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; done

clean:
	$(CARGO) clean
