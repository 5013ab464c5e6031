# kptr — build, test, bench, demo, image. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN := bin/kptr
export CGO_ENABLED := 1

.PHONY: help build build-seccomp test test-unit test-unpriv test-seccomp bench-runtime bench bench-cache bench-pipeline bench-render demo image argocd-src argocd test-argocd bench-argocd clean

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/kptr
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kptr

build-seccomp: ## build bin/kptr with the seccomp profile (needs libseccomp-dev)
	$(GO) build -tags seccomp -ldflags '$(LDFLAGS)' -o bin/kptr-seccomp ./cmd/kptr

# Every suite's log ends with its counts: test/testsum reads the `go test
# -json` (or test2json) events and prints one line per package, the output of
# what failed, and a final "N passed, N failed, N skipped" line per suite.
TESTSUM := $(CURDIR)/bin/testsum

$(TESTSUM): test/testsum/*.go
	$(GO) build -o $(TESTSUM) ./test/testsum

test: build $(TESTSUM) ## run every test suite (what CI runs)
	$(GO) vet ./...
	$(MAKE) test-unit
	$(MAKE) test-unpriv
	$(MAKE) test-seccomp
	$(MAKE) test-argocd

test-unit: $(TESTSUM) ## all Go tests as the current user; the sandbox suites again with the libcontainer launcher
	@set -o pipefail; $(GO) test -json -count=1 -timeout 25m ./... | $(TESTSUM) -suite "unit tests as $$(id -un)"
	@set -o pipefail; KPTR_LAUNCHER=libcontainer $(GO) test -json -count=1 ./runtime ./runtime/namespace | $(TESTSUM) -suite "runtime suites, libcontainer launcher, as $$(id -un)"

# The sandbox suites (runtime/: every tier through the shared interface;
# runtime/namespace, runtime/landlock, runtime/nsinit; kptr's doctor/refusal
# tests) compiled once,
# then run as the sidecar runs: uid 999, no capabilities, no_new_privs, its own
# HOME and TMPDIR, fixture binaries prebuilt (uid 999 has no Go toolchain cache).
UNPRIV_UID ?= 999
SANDBOX_CMD_TESTS := ^(TestDoctor|TestNewRunnerModes|TestRefusesWithoutUserNamespaces|TestExitCodesWithoutSandbox)$$
define run-unpriv
	set -euo pipefail; d=$$(mktemp -d /tmp/kptr-unpriv.XXXXXX); trap 'rm -rf "$$d"' EXIT; \
	mkdir -p "$$d/bin" "$$d/home" "$$d/tmp"; \
	for f in hostile cat escape-report; do CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o "$$d/bin/$$f" ./test/fixtures/$$f; done; \
	for f in wasm-hostile set-namespace; do for os in js wasip1; do GOOS=$$os GOARCH=wasm $(GO) build -trimpath -ldflags='-s -w' -o "$$d/bin/$$f.$$os.wasm" ./test/fixtures/$$f; done; done; \
	$(GO) test -c $(1) -o "$$d/runtime.test" ./runtime; \
	$(GO) test -c $(1) -o "$$d/wasm.test" ./runtime/wasm; \
	$(GO) test -c $(1) -o "$$d/namespace.test" ./runtime/namespace; \
	$(GO) test -c $(1) -o "$$d/landlock.test" ./runtime/landlock; \
	$(GO) test -c $(1) -o "$$d/kptr.test" ./cmd/kptr; \
	$(GO) test -c $(1) -o "$$d/nsinit.test" ./runtime/nsinit; \
	chmod -R a+rX "$$d"; \
	if [ "$$(id -u)" = 0 ]; then \
	  chown $(UNPRIV_UID):$(UNPRIV_UID) "$$d/home" "$$d/tmp"; \
	  as="setpriv --reuid=$(UNPRIV_UID) --regid=$(UNPRIV_UID) --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs"; \
	else as="setpriv --no-new-privs"; fi; \
	cd "$$d"; e="env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=$$d/home TMPDIR=$$d/tmp KPTR_FIXTURE_BIN_DIR=$$d/bin"; \
	who="as uid $$($$e $$as id -u), no caps, no_new_privs$(if $(1), with seccomp)"; \
	for p in runtime namespace landlock wasm; do \
	  echo "== $$p suite $$who"; \
	  $$e $$as ./$$p.test -test.v=test2json -test.count=1 -test.timeout=10m 2>&1 | $(GO) tool test2json -t -p $$p | $(TESTSUM) -suite "$$p suite $$who"; \
	done; \
	for p in runtime namespace; do \
	  $$e KPTR_LAUNCHER=libcontainer $$as ./$$p.test -test.v=test2json -test.count=1 -test.timeout=10m 2>&1 | $(GO) tool test2json -t -p $$p | $(TESTSUM) -suite "$$p suite, libcontainer launcher, $$who"; \
	done; \
	$$e $$as ./kptr.test -test.v=test2json -test.count=1 -test.run '$(SANDBOX_CMD_TESTS)' 2>&1 | $(GO) tool test2json -t -p cmd/kptr | $(TESTSUM) -suite "cmd/kptr sandbox tests $$who"; \
	$$e $$as ./nsinit.test -test.v=test2json -test.count=1 -test.timeout=5m 2>&1 | $(GO) tool test2json -t -p runtime/nsinit | $(TESTSUM) -suite "runtime/nsinit suite $$who"
endef

test-unpriv: $(TESTSUM) ## the sandbox suite again as uid 999 with no capabilities and no_new_privs
	@$(call run-unpriv,)

test-seccomp: $(TESTSUM) ## the sandbox suite built with the seccomp tag (libseccomp), as root and as uid 999
	@set -o pipefail; $(GO) test -json -count=1 -tags seccomp ./runtime ./runtime/namespace ./runtime/seccomp | $(TESTSUM) -suite "runtime with seccomp as $$(id -un)"
	@set -o pipefail; KPTR_LAUNCHER=libcontainer $(GO) test -json -count=1 -tags seccomp ./runtime ./runtime/namespace | $(TESTSUM) -suite "runtime with seccomp, libcontainer launcher, as $$(id -un)"
	@$(call run-unpriv,-tags seccomp)

bench-runtime: ## per-run cost of the sandbox (cold, pipelined, prepared) vs bare exec, bwrap, podman (root); as root and as uid 999 (figures → BENCHMARKS.md)
	$(GO) test -run '^$$' -bench BenchmarkRun -benchtime 100x -count 1 ./runtime/namespace ./runtime/landlock
	@set -euo pipefail; d=$$(mktemp -d /tmp/kptr-bench.XXXXXX); trap 'rm -rf "$$d"' EXIT; \
	mkdir -p "$$d/bin" "$$d/home" "$$d/tmp"; \
	for f in hostile set-labels; do CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o "$$d/bin/$$f" ./test/fixtures/$$f; done; \
	$(GO) test -c -o "$$d/namespace.test" ./runtime/namespace; $(GO) test -c -o "$$d/landlock.test" ./runtime/landlock; chmod -R a+rX "$$d"; \
	if [ "$$(id -u)" = 0 ]; then chown $(UNPRIV_UID):$(UNPRIV_UID) "$$d/home" "$$d/tmp"; \
	  echo "== as uid $(UNPRIV_UID), no capabilities, no_new_privs (the sidecar)"; \
	  cd "$$d" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=$$d/home TMPDIR=$$d/tmp KPTR_FIXTURE_BIN_DIR=$$d/bin \
	    setpriv --reuid=$(UNPRIV_UID) --regid=$(UNPRIV_UID) --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs \
	    sh -c "./namespace.test -test.run '^$$' -test.bench 'BenchmarkRun(KRM)?/(bare|bwrap|kptr|kptr-libcontainer|kptr-readonly|kptr-pipelined|kptr-prepared|kptr-prepared-readonly)$$' -test.benchtime 100x && ./landlock.test -test.run '^$$' -test.bench 'BenchmarkRun/landlock$$' -test.benchtime 100x"; fi

bench-wasm: ## set-namespace as a wasm function (cold, cached, warm) vs native in the namespace and landlock tiers at 50, 500 and 5,000 resources (figures → BENCHMARKS.md)
	nice $(GO) test -run '^$$' -bench BenchmarkSetNamespace -benchtime 3x -count 1 -timeout 60m ./runtime

bench-cache: ## cache benchmarks: cold pull vs skopeo+umoci, cached resolve, peak RSS (figures → BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 1 ./cache
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 1 -timeout 20m ./test/e2e/cache

bench: bench-cache bench-runtime bench-render bench-argocd ## benchmarks; figures go to BENCHMARKS.md

# Issue 13's benchmarks, side by side in one interleaved loop (test/bench/render):
# the realistic package (test/bench/pkggen) at 50, 500 and 5,000 resources
# through kptr, kptr --sandbox none, kpt in exec mode (/usr/bin/kpt when
# installed, never required) and kpt exec mode through bubblewrap, with the
# functions alone; the start-up and memo comparisons; then runtime's cold
# sandbox start against bubblewrap's. BENCH_RENDER_FLAGS passes flags on
# (e.g. -sizes 50,500 -runs 50=3,500=3).
BENCH_RENDER_FLAGS ?=
bench-render: build ## issue 13: realistic package at 50/500/5,000 resources vs kpt exec mode, bwrap, --sandbox none; start-up; memo (figures → BENCHMARKS.md)
	$(GO) run ./test/bench/render -kptr $(BIN) $(BENCH_RENDER_FLAGS)
	@echo "== cold sandbox start against bubblewrap's (runtime's BenchmarkRun: trivial function, median-ms)"
	$(GO) test -run '^$$' -bench '^BenchmarkRun$$/^(bare|bwrap|kptr)$$' -benchtime 50x -count 1 ./runtime/namespace

bench-pipeline: ## in-process render of comment-free ConfigMap packages (1k/10k) through 3 fixture functions, for profiling the pipeline; not part of make bench
	$(GO) test -run '^$$' -bench BenchmarkRender -benchtime 3x -count 1 -timeout 20m ./pipeline

# The demo works offline: function images are built from test/fixtures into an
# OCI layout, imported into out/demo-cache (never the user's cache), and the
# bundled package is rendered in a copy under out/demo.
DEMO_CACHE := out/demo-cache
DEMO_SANDBOX ?= auto
demo: build ## render the bundled example offline with a separate demo cache
	@set -euo pipefail; \
	echo "== building the example function images from test/fixtures (no daemon, no network)"; \
	$(GO) run ./examples/build-images -out out/demo-images; \
	rm -rf $(DEMO_CACHE) out/demo out/demo-again; \
	echo "== importing them into $(DEMO_CACHE)"; \
	$(BIN) cache import --cache-dir $(DEMO_CACHE) out/demo-images; \
	cp -r examples/demo out/demo; \
	echo "== kptr fn render out/demo --offline  (Kptfile: examples/demo/Kptfile, subpackage examples/demo/db)"; \
	$(BIN) fn render out/demo --cache-dir $(DEMO_CACHE) --offline --sandbox $(DEMO_SANDBOX); \
	echo "== the rendered package (out/demo), Kptfiles aside:"; \
	for f in $$(cd out/demo && find . -name '*.yaml' | sort); do echo "--- $$f"; cat out/demo/$$f; done; \
	echo "== what changed:"; diff -ru examples/demo out/demo --exclude=Kptfile --exclude=README.md || true; \
	cp -r out/demo out/demo-again; \
	$(BIN) fn render out/demo-again --cache-dir $(DEMO_CACHE) --offline --sandbox $(DEMO_SANDBOX) >/dev/null 2>&1; \
	if diff -r --exclude=Kptfile out/demo out/demo-again >/dev/null; then echo "== rendering out/demo again changes no resource (the generator is idempotent)"; \
	else echo "== rendering out/demo again changed it:"; diff -ru --exclude=Kptfile out/demo out/demo-again; exit 1; fi

# --- Argo CD plugin: image, argocd-cmp-server, end-to-end test -------------
IMAGE_TAG ?= ghcr.io/kptr-dev/kptr:$(subst +,-,$(VERSION))
IMAGE_OUT ?= out/image
STATIC_LDFLAGS := $(LDFLAGS) -s -w -linkmode external -extldflags -static

image: ## build the sidecar image without a daemon: out/image/oci (OCI layout) + out/image/kptr.tar; PREWARM=<dir> bakes the images its Kptfiles name
	$(GO) build -tags seccomp,netgo,osusergo -trimpath -ldflags '$(STATIC_LDFLAGS)' -o bin/kptr-static ./cmd/kptr
ifneq ($(PREWARM),)
	$(MAKE) build
	rm -rf out/prewarm
	$(BIN) prewarm --cache-dir out/prewarm-cache --export out/prewarm $(PREWARM)
endif
	$(GO) run ./deploy/image --kptr bin/kptr-static --out $(IMAGE_OUT) --tag $(IMAGE_TAG) $(if $(PREWARM),--prewarm out/prewarm)

# Argo CD's multi-call binary (argocd-repo-server and argocd-cmp-server), built
# from its own Go module (test/argocd/cmpserver) once per Argo CD version and
# content of that module, cached under ~/.cache/kptr-test (a cold build takes
# many minutes). Argo CD v3.6 declares Go 1.27 for encoding/json/v2, which Go
# 1.26 has under GOEXPERIMENT=jsonv2: test/argocd/argocd-src.sh lays the
# module out for Go 1.26 (see there). Same build settings as `go test` there,
# so the test binary reuses the compiled Argo CD packages.
ARGOCD_DIR := test/argocd/cmpserver
ARGOCD_VERSION := $(shell sed -n 's,^\tgithub.com/argoproj/argo-cd/v3 \(v[^ ]*\)$$,\1,p' $(ARGOCD_DIR)/go.mod)
ARGOCD_GOENV := GOEXPERIMENT=jsonv2 GOTOOLCHAIN=local
ARGOCD_LAYOUT = $(shell cat test/argocd/argocd-src.sh test/argocd/go126.py | sha256sum | cut -c1-16)
ARGOCD_KEY = $(shell cat $(ARGOCD_DIR)/go.mod $(ARGOCD_DIR)/go.sum $(ARGOCD_DIR)/main.go test/argocd/argocd-src.sh test/argocd/go126.py | sha256sum | cut -c1-16)
ARGOCD_BIN = $(HOME)/.cache/kptr-test/argocd-$(ARGOCD_VERSION)-$(ARGOCD_KEY)
ARGOCD_TEST_ENV = KPTR_BIN=$(CURDIR)/$(BIN) ARGOCD_BIN=$(ARGOCD_BIN) $(ARGOCD_GOENV)

# The layout lives in the cache, outside the work tree (thousands of Argo CD
# YAML files would join the corpora the pipeline's differential tests walk);
# test/argocd/cmpserver/.argo-cd, where the module's replace points, is a
# symbolic link to it, which those walks do not follow.
ARGOCD_SRC = $(HOME)/.cache/kptr-test/argocd-src-$(ARGOCD_VERSION)-$(ARGOCD_LAYOUT)

argocd-src: ## lay out Argo CD's Go module for Go 1.26 (in the cache; test/argocd/cmpserver/.argo-cd links to it)
	@grep -qx '$(ARGOCD_VERSION) $(ARGOCD_LAYOUT)' $(ARGOCD_SRC)/.kptr-layout 2>/dev/null || { \
	  test/argocd/argocd-src.sh $(ARGOCD_VERSION) $(ARGOCD_SRC) && \
	  echo '$(ARGOCD_VERSION) $(ARGOCD_LAYOUT)' > $(ARGOCD_SRC)/.kptr-layout; }
	@test "$$(readlink $(ARGOCD_DIR)/.argo-cd 2>/dev/null)" = "$(ARGOCD_SRC)" || { \
	  rm -rf $(ARGOCD_DIR)/.argo-cd && ln -s $(ARGOCD_SRC) $(ARGOCD_DIR)/.argo-cd; }

argocd: argocd-src ## build (or reuse) Argo CD's multi-call binary (argocd-repo-server, argocd-cmp-server) for the end-to-end tests
	@test -x $(ARGOCD_BIN) || { mkdir -p $(dir $(ARGOCD_BIN)) && cd $(ARGOCD_DIR) && \
	  $(ARGOCD_GOENV) nice -n 10 $(GO) build -ldflags '-s -w' -o $(ARGOCD_BIN).tmp . && \
	  mv $(ARGOCD_BIN).tmp $(ARGOCD_BIN); }
	@echo "argocd $(ARGOCD_VERSION): $(ARGOCD_BIN)"

test-argocd: build argocd $(TESTSUM) ## end-to-end: kptr through the real argocd-repo-server and argocd-cmp-server (uid 999, no capabilities), and through argocd-cmp-server alone
	@set -o pipefail; cd $(ARGOCD_DIR) && $(ARGOCD_TEST_ENV) $(GO) test -json -count=1 -timeout 15m ./... | $(TESTSUM) -suite "Argo CD end-to-end"

bench-argocd: build argocd ## Argo CD render latency through argocd-cmp-server, warm and cold cache
	cd $(ARGOCD_DIR) && $(ARGOCD_TEST_ENV) $(GO) test -run '^$$' -bench . -benchtime 20x ./...

clean:
	rm -rf bin out
