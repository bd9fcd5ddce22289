# Vigil — build, run and test. `make run` and `make test` are the two commands a newcomer needs;
# both install what is missing first (Debian packages, Rust components).

CARGO ?= cargo
VIGIL := target/release/vigil
# The statically linked vigil of the container image (scripts/build-static.sh).
HOST_TRIPLE := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
# `make static ARCH=aarch64` cross-builds the arm64 one (Graviton, Fargate ARM).
ARCH ?= $(firstword $(subst -, ,$(HOST_TRIPLE)))
STATIC_VIGIL := target/$(ARCH)-unknown-linux-gnu/release/vigil
STATIC_VIGIL_AARCH64 := target/aarch64-unknown-linux-gnu/release/vigil
# Debian packages the build needs (clang, llvm, libelf, zlib: the eBPF programs and libbpf;
# libelf-dev and zlib1g-dev also ship the archives the static build links). `make run` installs
# these alone.
BUILD_PACKAGES := pkg-config make gcc clang llvm libelf-dev zlib1g-dev
# What the tests need besides (strace, runc, debootstrap, openssl, curl, bpftool, sudo,
# logrotate, rsyslog; buildah: the image and its test; qemu-system-x86, qemu-system-arm, cpio
# and busybox-static: the kernel matrix, crates/cli/tests/e2e/kernels.rs; maven and Java 17:
# the Kafka broker of crates/cli/tests/e2e/fleet.rs).
TEST_PACKAGES := strace runc debootstrap openssl curl bpftool sudo logrotate rsyslog buildah \
  qemu-system-x86 qemu-system-arm cpio busybox-static maven openjdk-17-jre-headless
# The aarch64 cross build (`make static ARCH=aarch64`, and `make test`, whose kernel matrix
# boots arm64 guests): Debian's cross compiler and C library, and the static libelf and zlib
# of the arm64 dpkg architecture (`cross-deps` adds it); the Rust target comes from rustup.
CROSS_PACKAGES := gcc-aarch64-linux-gnu libc6-dev-arm64-cross libelf-dev:arm64 zlib1g-dev:arm64
RUST_COMPONENTS := rustfmt clippy

.PHONY: all deps test-deps cross-deps runtime-deps bench-deps build static static-aarch64 image \
  image-multiarch run test \
  lint fmt bench bench-svg bench-falco fuzz clean

all: build

# Installs the Debian packages of $(1) that are missing. A package installed for two dpkg
# architectures (libelf-dev and libelf-dev:arm64 after `cross-deps`) is named with the native
# one, since its bare name is then ambiguous to `dpkg -s`.
define apt_install
	@missing=""; for p in $(1); do \
	  dpkg -s $$p >/dev/null 2>&1 || dpkg -s $$p:$$(dpkg --print-architecture) >/dev/null 2>&1 || \
	    missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; fi
endef

deps:
	$(call apt_install,$(BUILD_PACKAGES))
	@command -v $(CARGO) >/dev/null || { echo "cargo not found: install Rust from https://rustup.rs"; exit 1; }

# The tests' tools: Debian packages, rustfmt and clippy, helm.
test-deps: deps
	$(call apt_install,$(TEST_PACKAGES))
	@if command -v rustup >/dev/null; then \
	  for c in $(RUST_COMPONENTS); do rustup component list --installed | grep -q "^$$c" || rustup component add $$c; done; fi

# helm, for the Helm chart test (crates/cli/tests/e2e/helm.rs): built from its Go module into
# target/tools/bin when missing (a few minutes once; it needs Go: without it the test skips).
HELM_VERSION := v3.22.0
HELM := target/tools/bin/helm
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
test-deps: $(HELM)
$(HELM):
	@if [ -x "$(GO)" ]; then \
	  echo "installing helm $(HELM_VERSION) into $(@D)"; \
	  GOBIN=$(CURDIR)/$(@D) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); \
	else echo "go not found: helm not installed, the Helm chart test will skip"; fi

# The fleet tests' services (crates/cli/tests/e2e/fleet.rs), fetched once into target/tools:
# an OpenTelemetry Collector with only the OTLP receiver and the file exporter, built from the
# Go module proxy by tools/otelcol (a few minutes once; Go's build cache keeps later builds
# short), and Apache Kafka's broker and tools from Maven Central (tools/kafka/pom.xml, ~55 MB
# of jars, run with Java 17). Without Go or Maven the tests skip (fail under
# VIGIL_TEST_STRICT=1).
OTELCOL := target/tools/bin/vigil-otelcol
KAFKA_LIBS := target/tools/kafka/libs/.complete
test-deps: $(OTELCOL) $(KAFKA_LIBS)
$(OTELCOL): tools/otelcol/main.go tools/otelcol/go.mod tools/otelcol/go.sum
	@if [ -x "$(GO)" ]; then \
	  echo "building the OpenTelemetry Collector of the tests into $(@D)"; \
	  cd tools/otelcol && $(GO) build -trimpath -ldflags=-s -o $(CURDIR)/$@ .; \
	else echo "go not found: $@ not built, the OTLP tests will skip"; fi
$(KAFKA_LIBS): tools/kafka/pom.xml
	@if command -v mvn >/dev/null; then \
	  echo "fetching Apache Kafka into $(@D)"; \
	  rm -rf $(@D) && mvn -q -B -f tools/kafka/pom.xml dependency:copy-dependencies \
	    -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(@D) && touch $@; \
	else echo "mvn not found: Kafka not fetched, the Kafka tests will skip"; fi

# Container runtimes for the runtime tests (crates/cli/tests/e2e/runtimes.rs), which start and stop
# every daemon themselves: docker.io (dockerd, with its containerd), containerd, podman, and
# busybox-static for the images the tests import (no registry). Installed with a temporary
# policy-rc.d so that no package starts its daemon on a host with an init system (a daemon the
# tests did not start owns the default locations, and they would skip).
RUNTIME_PACKAGES := docker.io containerd podman busybox-static
runtime-deps:
	@missing=""; for p in $(RUNTIME_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || dpkg -s $$p:$$(dpkg --print-architecture) >/dev/null 2>&1 || \
	    missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  policy=; if [ ! -e /usr/sbin/policy-rc.d ]; then policy=1; \
	    printf '#!/bin/sh\nexit 101\n' | $$SUDO tee /usr/sbin/policy-rc.d >/dev/null; \
	    $$SUDO chmod +x /usr/sbin/policy-rc.d; fi; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq $$missing; rc=$$?; \
	  if [ -n "$$policy" ]; then $$SUDO rm -f /usr/sbin/policy-rc.d; fi; exit $$rc; fi

# crictl, the CRI client of the CRI test: built from its Go module like helm (without Go the
# test skips, or fails under VIGIL_TEST_STRICT=1).
CRICTL_VERSION := v1.37.0
CRICTL := target/tools/bin/crictl
runtime-deps: $(CRICTL)
$(CRICTL):
	@if [ -x "$(GO)" ]; then \
	  echo "installing crictl $(CRICTL_VERSION) into $(@D)"; \
	  GOBIN=$(CURDIR)/$(@D) $(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$(CRICTL_VERSION); \
	else echo "go not found: crictl not installed, the CRI test will skip"; fi

build: deps
	$(CARGO) build --release --bin vigil

cross-deps: deps
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then \
	  echo "adding the arm64 dpkg architecture"; \
	  $$SUDO dpkg --add-architecture arm64 && $$SUDO apt-get update -qq; fi
	$(call apt_install,$(CROSS_PACKAGES))
	@rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || \
	  rustup target add aarch64-unknown-linux-gnu

# The statically linked vigil (glibc, libelf, zlib, libbpf inside; runs in an empty root
# filesystem): target/<arch>-unknown-linux-gnu/release/vigil, for the host's architecture or
# ARCH (x86_64, aarch64).
static: deps $(if $(filter-out $(firstword $(subst -, ,$(HOST_TRIPLE))),$(ARCH)),cross-deps)
	CARGO=$(CARGO) scripts/build-static.sh $(ARCH)

static-aarch64: cross-deps
	CARGO=$(CARGO) scripts/build-static.sh aarch64

# The container image `vigil:<version>` and `vigil:latest` (only /vigil, entrypoint /vigil) in
# buildah's storage, built from the static binary without a registry; push it with
# `buildah push vigil:<version> docker://REGISTRY/vigil:<version>`. The Containerfile builds the
# same image, compiling in a builder stage.
image: static
	$(call apt_install,buildah)
	scripts/build-image.sh -b $(STATIC_VIGIL)

# The multi-architecture image `vigil:<version>` and `vigil:latest`: a manifest list of the
# amd64 and arm64 images (Graviton, Fargate ARM64), in buildah's storage, without a registry;
# `buildah manifest push --all vigil:<version> docker://REGISTRY/vigil:<version>` publishes it.
image-multiarch: static static-aarch64
	$(call apt_install,buildah)
	scripts/build-image-multiarch.sh target/x86_64-unknown-linux-gnu/release/vigil \
	  $(STATIC_VIGIL_AARCH64)

# Starts the agent: `vigil watch` on its embedded default ruleset (host-wide, eBPF; root and a
# BTF kernel). It names what is missing otherwise; `vigil run -- CMD` works without them.
run: build
	$(VIGIL) watch

# Clippy for aarch64 too: every x86-64 assumption must be guarded by `cfg(target_arch)`.
lint: test-deps cross-deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace --all-targets --target aarch64-unknown-linux-gnu -- -D warnings

# The image test (crates/cli/tests/e2e/image.rs) runs the static binary: build it first; the
# kernel matrix boots both architectures' (crates/cli/tests/e2e/kernels.rs).
test: lint static static-aarch64 runtime-deps bench-deps
	VIGIL_STATIC_BIN=$(abspath $(STATIC_VIGIL)) \
	  VIGIL_STATIC_BIN_AARCH64=$(abspath $(STATIC_VIGIL_AARCH64)) $(CARGO) test --workspace

fmt:
	$(CARGO) fmt --all

bench: deps
	$(CARGO) bench -p vigil-engine
	$(CARGO) bench -p vigil-output

# The plots of every published bench run (docs/bench keeps only report.md and report.json),
# drawn from its report.json into target/bench-svg/<run>/.
bench-svg: build
	@for j in $$(find docs/bench -name report.json | sort); do \
	  d=$$(dirname $$j); $(VIGIL) bench report --svg target/bench-svg/$${d#docs/bench/} $$d || exit 1; \
	done

# The real workloads of `vigil bench overhead --tests redis,nginx` (their e2e test and `make
# bench-falco`): installed with a temporary policy-rc.d, so that no package starts its daemon on a
# host with an init system (a redis or nginx of its own would load the machine during a bench).
BENCH_PACKAGES := redis-server redis-tools nginx wrk
bench-deps:
	@missing=""; for p in $(BENCH_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  policy=; if [ ! -e /usr/sbin/policy-rc.d ]; then policy=1; \
	    printf '#!/bin/sh\nexit 101\n' | $$SUDO tee /usr/sbin/policy-rc.d >/dev/null; \
	    $$SUDO chmod +x /usr/sbin/policy-rc.d; fi; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq $$missing; rc=$$?; \
	  if [ -n "$$policy" ]; then $$SUDO rm -f /usr/sbin/policy-rc.d; fi; exit $$rc; fi

# Falco and Vigil side by side in one run, with Falco's stable rules for both
# (docs/bench/README.md, "make bench-falco"): the overhead set with redis and nginx, then the
# capacity ramps. Falco is built by the user; FALCO names its install (a prefix or bin/falco).
# Reports in BENCH_FALCO_OUT/{overhead,capacity}. Root (the probes, the canary).
FALCO ?= target/peers/falco
FALCO_RULES ?= ../shared/falco-rules/falco_rules.yaml
BENCH_FALCO_STAMP := $(shell date -u +%Y%m%d-%H%M%S)
BENCH_FALCO_OUT ?= target/bench/falco-$(BENCH_FALCO_STAMP)
# A run that failed (an agent that died or did not start) is in its report; the capacity ramps
# run even then, and the target fails at the end.
bench-falco: build bench-deps
	@rc=0; \
	$(VIGIL) bench overhead --falco $(FALCO) -r $(FALCO_RULES) \
	  --agent falco --agent watch --agent run --agent-per-test --canary 5 \
	  --tests syscall,pipe,context1,spawn,execl,fstime,shell1,redis,nginx \
	  --iterations 3 --duration 2 --out $(BENCH_FALCO_OUT)/overhead || rc=$$?; \
	$(VIGIL) bench capacity --falco $(FALCO) -r $(FALCO_RULES) --agent falco --agent watch \
	  --cpus 0.5,1,2 --start 25000 --step x1.5 --max-steps 8 --duration 4 --canary 5 \
	  --out $(BENCH_FALCO_OUT)/capacity || rc=$$?; \
	exit $$rc

# Runs each fuzz target for FUZZ_SECONDS (needs the nightly toolchain and cargo-fuzz). The
# rules targets start from fuzz/seeds/<target> (checked in; new corpus entries go to the
# ignored fuzz/corpus/<target>) with a dictionary of the language's words (fuzz/dict).
FUZZ_SECONDS ?= 300
fuzz:
	cd fuzz && mkdir -p corpus/condition_parser corpus/rules_loader && \
	  cargo +nightly fuzz run condition_parser corpus/condition_parser seeds/condition_parser -- \
	    -dict=dict/condition.dict -max_total_time=$(FUZZ_SECONDS) && \
	  cargo +nightly fuzz run rules_loader corpus/rules_loader seeds/rules_loader -- \
	    -dict=dict/rules.dict -max_total_time=$(FUZZ_SECONDS) && \
	  cargo +nightly fuzz run capture_reader -- -max_total_time=$(FUZZ_SECONDS)

clean:
	$(CARGO) clean
