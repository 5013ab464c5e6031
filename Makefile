# kptr — build, test, bench, demo, image. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# kptr is linked statically (the C library's static archive, Go's own DNS
# resolver and user lookup): the binary make install installs is the one the
# image ships, and it starts without the dynamic loader, which kptr pays at
# every command and its sealed copy at every sandboxed function's start
# (BENCHMARKS.md, "Issue 33: kptr's start and static kptr").
BUILD_TAGS := netgo,osusergo
LDFLAGS := -X main.version=$(VERSION) -linkmode external -extldflags -static
BIN := bin/kptr
# kptr's signature verifier (cmd/kptr-sigverify) is built beside kptr, where
# kptr looks for it; installed in ../libexec/kptr/ from kptr (off PATH).
SIGVERIFY = $(dir $(BIN))kptr-sigverify
export CGO_ENABLED := 1

.PHONY: help build install install-kpt-link install-docker-link uninstall kustomize test vet test-unit test-unpriv test-runtimedefault bench-runtime bench bench-cache bench-pipeline bench-render bench-wasm bench-wasm-start demo image push argocd test-argocd bench-argocd clean bench-fleet

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/kptr and its signature verifier bin/kptr-sigverify (both static)
	$(GO) build -tags $(BUILD_TAGS) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kptr
	CGO_ENABLED=0 $(GO) build -o $(SIGVERIFY) ./cmd/kptr-sigverify

# Installed as a Go tool is: the binary in $(PREFIX)/bin and cobra's shell
# completions where bash-completion, zsh and fish look for them. DESTDIR
# stages the tree for a package (nothing is written outside it). The kpt link
# is separate: kptr invoked as kpt takes kpt's command line (fn render, eval,
# source, sink), and a kpt already installed there is never replaced.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
INSTALLED := $(DESTDIR)$(BINDIR)/kptr
# where kptr looks for its verifier: ../libexec/kptr/ from its own directory
SIGVERIFY_INSTALLED := $(DESTDIR)$(patsubst %/,%,$(dir $(BINDIR)))/libexec/kptr/kptr-sigverify
COMPLETIONS := $(DESTDIR)$(DATADIR)/bash-completion/completions/kptr \
  $(DESTDIR)$(DATADIR)/zsh/site-functions/_kptr $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/kptr.fish

# The directories install creates (those that did not exist) are recorded
# in INSTALL_RECORD, so uninstall removes them again when they are empty,
# and never a directory that was there before (/usr/local/bin).
INSTALL_RECORD := $(DESTDIR)$(DATADIR)/kptr/installed-dirs
INSTALL_DIRS := $(DESTDIR)$(BINDIR) $(dir $(SIGVERIFY_INSTALLED)) $(sort $(dir $(COMPLETIONS))) $(dir $(INSTALL_RECORD))

install: build ## install bin/kptr into $(DESTDIR)$(PREFIX)/bin (PREFIX=/usr/local), its signature verifier into libexec/kptr/ there, and its bash, zsh and fish completions
	@set -euo pipefail; created=""; for d in $(INSTALL_DIRS); do p=$${d%/}; \
	  while [ -n "$$p" ] && [ ! -e "$$p" ]; do created="$$created $$p"; p=$${p%/*}; done; done; \
	install -d $(INSTALL_DIRS); \
	if [ -n "$$created" ]; then printf '%s\n' $$created >> $(INSTALL_RECORD); fi
	install -m 0755 $(BIN) $(INSTALLED)
	install -m 0755 $(SIGVERIFY) $(SIGVERIFY_INSTALLED)
	@set -euo pipefail; for f in $(COMPLETIONS); do \
	  case $$f in */_kptr) sh=zsh;; *.fish) sh=fish;; *) sh=bash;; esac; \
	  $(BIN) completion $$sh > $$f.tmp && chmod 0644 $$f.tmp && mv $$f.tmp $$f && echo "installed $$sh completion: $$f"; done

# Another kpt on PATH: the link would answer for it (or it for the link,
# when it comes first), so the target says which and refuses without
# FORCE=1. Only for a real install: a DESTDIR stages a tree for elsewhere.
install-kpt-link: install ## also install kpt as a symbolic link to kptr in the same directory (refuses to replace another kpt, or without FORCE=1 to shadow one on PATH)
	@set -euo pipefail; l=$(DESTDIR)$(BINDIR)/kpt; \
	if [ -e "$$l" -o -L "$$l" ] && [ "$$(readlink "$$l")" != kptr ]; then \
	  echo "make install-kpt-link: $$l exists and is not a link to kptr; remove it first to let kptr answer as kpt" >&2; exit 1; fi; \
	note=""; if [ -z "$(DESTDIR)" ]; then \
	  others=""; seen=" "; IFS=:; for d in $$PATH; do \
	    [ -n "$$d" ] && [ -x "$$d/kpt" ] && [ ! -d "$$d/kpt" ] || continue; \
	    [ "$$(readlink -f "$$d")" = "$$(readlink -f "$(BINDIR)")" ] && continue; \
	    r=$$(readlink -f "$$d/kpt"); case "$$seen" in *" $$r "*) continue;; esac; seen="$$seen$$r "; \
	    others="$$others $$d/kpt"; done; unset IFS; \
	  bindir_first=no; IFS=:; for d in $$PATH; do \
	    if [ "$$(readlink -f "$$d" 2>/dev/null)" = "$$(readlink -f "$(BINDIR)")" ]; then bindir_first=yes; break; fi; \
	    [ -x "$$d/kpt" ] && [ ! -d "$$d/kpt" ] && break; done; unset IFS; \
	  if [ -n "$$others" ]; then \
	    if [ $$bindir_first = yes ]; then note="it shadows$$others: kpt now runs kptr"; \
	    else note="it is shadowed by$$others, which comes first on PATH: kpt still runs that"; fi; \
	    if [ "$(FORCE)" != 1 ]; then \
	      echo "make install-kpt-link: another kpt is on PATH ($${others# }); the link $$l -> kptr would change what kpt runs or be hidden by it; FORCE=1 installs it anyway" >&2; exit 1; fi; \
	  fi; fi; \
	ln -sfn kptr "$$l" && echo "installed $$l -> kptr$${note:+; $$note}"

# kptr invoked as docker takes the command lines kustomize and kpt give a
# container CLI (docs/docker.md). It stands in for docker only where there
# is none: a docker, podman or nerdctl a user has is never shadowed.
install-docker-link: install ## also install docker as a symbolic link to kptr, for kustomize's and kpt's containerized functions (refuses where a docker command exists)
	@set -euo pipefail; l=$(DESTDIR)$(BINDIR)/docker; \
	if [ "$$(readlink "$$l" 2>/dev/null)" = kptr ]; then echo "$$l -> kptr (already)"; exit 0; fi; \
	if [ -e "$$l" -o -L "$$l" ]; then echo "make install-docker-link: $$l exists and is not a link to kptr; kptr stands in for docker only where there is none" >&2; exit 1; fi; \
	if [ -z "$(DESTDIR)" ] && c=$$(command -v docker); then echo "make install-docker-link: a docker command exists ($$c); kptr stands in for docker only where there is none" >&2; exit 1; fi; \
	ln -sfn kptr "$$l" && echo "installed $$l -> kptr"

uninstall: ## remove what install, install-kpt-link and install-docker-link installed (same PREFIX and DESTDIR), and the directories install created when they are empty
	@for n in kpt docker; do l=$(DESTDIR)$(BINDIR)/$$n; if [ "$$(readlink "$$l" 2>/dev/null)" = kptr ]; then rm -f "$$l"; fi; done
	rm -f $(INSTALLED) $(SIGVERIFY_INSTALLED) $(COMPLETIONS)
	@set -euo pipefail; if [ -f $(INSTALL_RECORD) ]; then dirs=$$(awk '{ print length($$0) " " $$0 }' $(INSTALL_RECORD) | sort -rn | cut -d' ' -f2- | uniq); \
	  rm -f $(INSTALL_RECORD); for d in $$dirs; do rmdir "$$d" 2>/dev/null && echo "removed empty $$d" || true; done; fi

# Every suite's log ends with its counts: test/testsum reads the `go test
# -json` (or test2json) events and prints one line per package, the output of
# what failed, and a final "N passed, N failed, N skipped" line per suite.
TESTSUM := $(CURDIR)/bin/testsum

$(TESTSUM): test/testsum/*.go
	$(GO) build -o $(TESTSUM) ./test/testsum

# make test runs every suite, also after one failed, and ends with each
# suite's verdict and time; it fails if any did. Within a suite every step
# runs too (rc collects the failures). TEST_SUITES is the list (test/ci's
# TestMakeTestRunsEverySuite sets its own).
TEST_SUITES ?= vet test-unit test-unpriv test-runtimedefault test-argocd
test: build $(TESTSUM) ## run every test suite (what CI runs); the last lines are each suite's verdict
	@set -u; rc=0; report=""; \
	for s in $(TEST_SUITES); do \
	  start=$$(date +%s); \
	  if $(MAKE) --no-print-directory $(addprefix -f ,$(MAKEFILE_LIST)) $$s; then v="ok  "; else v="FAIL"; rc=1; fi; \
	  report="$$report$$v $$s in $$(( $$(date +%s) - start )) s"$$'\n'; \
	done; \
	printf '== make test: each suite\x27s verdict\n%s' "$$report"; \
	if [ $$rc = 0 ]; then echo "== make test: every suite passed"; else echo "== make test: FAILED (see the suites marked FAIL above)"; fi; \
	exit $$rc

vet: ## go vet of every package
	$(GO) vet ./...

# A package's tests share one -timeout: sized for a loaded 2-core machine,
# where the pipeline and hostile suites take several times their quiet time.
UNIT_TIMEOUT ?= 45m
test-unit: $(TESTSUM) ## all Go tests as the current user; the sandbox suites again with the libcontainer launcher
	@set -o pipefail; rc=0; \
	$(GO) test -json -count=1 -timeout $(UNIT_TIMEOUT) ./... | $(TESTSUM) -suite "unit tests as $$(id -un)" || rc=1; \
	KPTR_LAUNCHER=libcontainer $(GO) test -json -count=1 -timeout 20m ./runtime ./runtime/namespace | $(TESTSUM) -suite "runtime suites, libcontainer launcher, as $$(id -un)" || rc=1; \
	exit $$rc

# The sandbox suites (runtime/: every tier through the shared interface;
# runtime/namespace, runtime/landlock, runtime/launcher; kptr's doctor/refusal
# tests) compiled once,
# then run as the sidecar runs: uid 999, no capabilities, no_new_privs, its own
# HOME and TMPDIR, fixture binaries prebuilt (uid 999 has no Go toolchain cache).
UNPRIV_UID ?= 999
# The Go toolchain runtime/wasm's TestJSBeforeGo121 builds js modules with
# (fetched through the module proxy): Go 1.20's js port imports the host as
# "go", as kpt's earliest published wasm images do. It and the fixtures
# prebuilt below are test/fnimage's LegacyJSToolchain and LegacyJSFixtures
# (test/fnimage TestMakefileLegacyJS holds them alike).
LEGACY_JS_GO := go1.20.14
SANDBOX_CMD_TESTS := ^(TestDoctor|TestNewRunnerModes|TestRefusesWithoutUserNamespaces|TestExitCodesWithoutSandbox|TestDocker.*)$$
define run-unpriv
	set -euo pipefail; rc=0; d=$$(mktemp -d /tmp/kptr-unpriv.XXXXXX); trap 'rm -rf "$$d"' EXIT; \
	mkdir -p "$$d/bin" "$$d/home" "$$d/tmp"; \
	for f in hostile cat escape-report set-labels; do CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o "$$d/bin/$$f" ./test/fixtures/$$f; done; \
	for f in wasm-hostile set-namespace; do for os in js wasip1; do GOOS=$$os GOARCH=wasm $(GO) build -trimpath -ldflags='-s -w' -o "$$d/bin/$$f.$$os.wasm" ./test/fixtures/$$f; done; done; \
	for f in js-contract cat; do m=$$(mktemp -d "$$d/mod.XXXXXX"); cp test/fixtures/$$f/*.go "$$m/"; printf 'module kptr.test/%s\n\ngo 1.20\n' $$f >"$$m/go.mod"; \
	  (cd "$$m" && GOTOOLCHAIN=$(LEGACY_JS_GO) GOFLAGS= GOWORK=off CGO_ENABLED=0 GOOS=js GOARCH=wasm $(GO) build -trimpath -ldflags='-s -w' -o "$$d/bin/$$f.js.$(LEGACY_JS_GO).wasm" .); rm -rf "$$m"; done; \
	$(GO) test -c $(1) -o "$$d/runtime.test" ./runtime; \
	$(GO) test -c $(1) -o "$$d/wasm.test" ./runtime/wasm; \
	$(GO) test -c $(1) -o "$$d/namespace.test" ./runtime/namespace; \
	$(GO) test -c $(1) -o "$$d/landlock.test" ./runtime/landlock; \
	$(GO) test -c $(1) -o "$$d/kptr.test" ./cmd/kptr; \
	$(GO) test -c $(1) -o "$$d/launcher.test" ./runtime/launcher; \
	$(GO) test -c $(1) -o "$$d/cache.test" ./cache; \
	$(GO) build -o "$$d/kptr-sigverify" ./cmd/kptr-sigverify; \
	chmod -R a+rX "$$d"; \
	if [ "$$(id -u)" = 0 ]; then \
	  chown $(UNPRIV_UID):$(UNPRIV_UID) "$$d/home" "$$d/tmp"; \
	  as="setpriv --reuid=$(UNPRIV_UID) --regid=$(UNPRIV_UID) --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs"; \
	else as="setpriv --no-new-privs"; fi; \
	cd "$$d"; e="env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=$$d/home TMPDIR=$$d/tmp KPTR_FIXTURE_BIN_DIR=$$d/bin"; \
	who="as uid $$($$e $$as id -u), no caps, no_new_privs"; \
	for p in runtime namespace landlock wasm; do \
	  echo "== $$p suite $$who"; \
	  $$e $$as ./$$p.test -test.v=test2json -test.count=1 -test.timeout=10m 2>&1 | $(GO) tool test2json -t -p $$p | $(TESTSUM) -suite "$$p suite $$who" || rc=1; \
	done; \
	for p in runtime namespace; do \
	  $$e KPTR_LAUNCHER=libcontainer $$as ./$$p.test -test.v=test2json -test.count=1 -test.timeout=10m 2>&1 | $(GO) tool test2json -t -p $$p | $(TESTSUM) -suite "$$p suite, libcontainer launcher, $$who" || rc=1; \
	done; \
	$$e $$as ./kptr.test -test.v=test2json -test.count=1 -test.run '$(SANDBOX_CMD_TESTS)' 2>&1 | $(GO) tool test2json -t -p cmd/kptr | $(TESTSUM) -suite "cmd/kptr sandbox tests $$who" || rc=1; \
	$$e $$as ./launcher.test -test.v=test2json -test.count=1 -test.timeout=5m 2>&1 | $(GO) tool test2json -t -p runtime/launcher | $(TESTSUM) -suite "runtime/launcher suite $$who" || rc=1; \
	$$e $$as ./cache.test -test.v=test2json -test.count=1 -test.timeout=10m 2>&1 | $(GO) tool test2json -t -p cache | $(TESTSUM) -suite "cache suite (ownership checks as the sidecar's user) $$who" || rc=1; \
	exit $$rc
endef

test-unpriv: $(TESTSUM) ## the sandbox suite again as uid 999 with no capabilities and no_new_privs
	@$(call run-unpriv,)

# The tier an Argo CD repo server under RuntimeDefault runs functions in,
# tested there: the shared tier suite's landlock half and the landlock
# package's suite as uid 999 (no capabilities, no_new_privs) under
# containerd's default seccomp profile, loaded by test/e2e/argocd/seccompexec
# as a node would (the namespace tier cannot start under it).
RUNTIMEDEFAULT := $(CURDIR)/test/e2e/argocd/testdata/runtime-default/containerd-docker-default.json
test-runtimedefault: $(TESTSUM) ## the landlock tier's suites as uid 999 under containerd's RuntimeDefault seccomp profile
	@set -euo pipefail; rc=0; d=$$(mktemp -d /tmp/kptr-rtdefault.XXXXXX); trap 'rm -rf "$$d"' EXIT; \
	mkdir -p "$$d/bin" "$$d/home" "$$d/tmp"; \
	for f in hostile cat escape-report set-labels; do CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o "$$d/bin/$$f" ./test/fixtures/$$f; done; \
	$(GO) build -o "$$d/seccompexec" ./test/e2e/argocd/seccompexec; \
	$(GO) test -c -o "$$d/runtime.test" ./runtime; \
	$(GO) test -c -o "$$d/landlock.test" ./runtime/landlock; \
	chmod -R a+rX "$$d"; \
	if [ "$$(id -u)" = 0 ]; then \
	  chown $(UNPRIV_UID):$(UNPRIV_UID) "$$d/home" "$$d/tmp"; \
	  as="setpriv --reuid=$(UNPRIV_UID) --regid=$(UNPRIV_UID) --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs"; \
	else as="setpriv --no-new-privs"; fi; \
	cd "$$d"; e="env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=$$d/home TMPDIR=$$d/tmp KPTR_FIXTURE_BIN_DIR=$$d/bin"; \
	who="as uid $$($$e $$as id -u) under containerd's RuntimeDefault"; \
	$$e $$as ./seccompexec $(RUNTIMEDEFAULT) ./runtime.test -test.v=test2json -test.count=1 -test.timeout=10m -test.run 'TestTiers[A-Za-z]*/landlock' 2>&1 | $(GO) tool test2json -t -p runtime | $(TESTSUM) -suite "runtime tier suite, landlock, $$who" || rc=1; \
	$$e $$as ./seccompexec $(RUNTIMEDEFAULT) ./landlock.test -test.v=test2json -test.count=1 -test.timeout=10m 2>&1 | $(GO) tool test2json -t -p landlock | $(TESTSUM) -suite "landlock suite $$who" || rc=1; \
	exit $$rc

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

bench-wasm-start: ## a wasm module's first run with nothing compiled: compile, interpret, both at once, cached; kpt's two wasm e2e modules at 50, 500 and 5,000 resources (figures → BENCHMARKS.md)
	nice $(GO) run ./test/bench/wasmstart

bench-cache: ## cache benchmarks: cold pull vs skopeo+umoci, cached resolve, peak RSS (figures → BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 1 ./cache
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 1 -timeout 20m ./test/e2e/cache

bench: bench-cache bench-runtime bench-render bench-argocd ## benchmarks; figures go to BENCHMARKS.md

# Issue 13's benchmarks, side by side in one interleaved loop (test/bench/render):
# the realistic package (test/bench/pkggen) at 50, 500 and 5,000 resources,
# run by the catalog's own functions (-images catalog, the default: the
# images of -catalog-layout pushed to a local docker-registry under their
# catalog names, their binaries for exec mode and the functions alone),
# through kptr, kptr --sandbox none, kpt in exec mode (/usr/bin/kpt when
# installed, never required) and kpt exec mode through bubblewrap, with the
# functions alone; the start-up and memo comparisons; then runtime's cold
# sandbox start against bubblewrap's. BENCH_RENDER_FLAGS passes flags on
# (e.g. -sizes 50,500 -runs 50=3,500=3).
BENCH_RENDER_FLAGS ?=
# Then the 50-resource rows again with catalog-shaped images (-images
# catalog-shaped: test/fnimage.WithCatalogShape), with issue 26's cold-cache
# comparison (-cold-runs: kptr and kpt + podman pulling from Debian's
# docker-registry on loopback, crane as the floor; about 80 s);
# BENCH_RENDER_CATALOG_FLAGS passes flags to that run (e.g. -kptr-base
# OLD-KPTR for an A/B comparison).
BENCH_RENDER_CATALOG_FLAGS ?=
bench-render: build ## issue 13: realistic package at 50/500/5,000 resources vs kpt exec mode, bwrap, --sandbox none; start-up; memo (figures → BENCHMARKS.md)
	$(GO) run ./test/bench/render -kptr $(BIN) $(BENCH_RENDER_FLAGS)
	@echo "== issue 26: the sandbox's cost at 50 resources with images shaped like the catalog's (alpine-like base, 28 MB dynamically linked binaries, a Starlark validator)"
	$(GO) run ./test/bench/render -kptr $(BIN) -images catalog-shaped -sizes 50 -runs 50=15 -startup-runs 30 -memo-runs 0 -cold-runs 7 $(BENCH_RENDER_CATALOG_FLAGS)
	@echo "== cold sandbox start against bubblewrap's (runtime's BenchmarkRun: trivial function, median-ms)"
	$(GO) test -run '^$$' -bench '^BenchmarkRun$$/^(bare|bwrap|kptr)$$' -benchtime 50x -count 1 ./runtime/namespace

bench-pipeline: ## in-process render of comment-free ConfigMap packages (1k/10k) through 3 fixture functions, for profiling the pipeline; not part of make bench
	$(GO) test -run '^$$' -bench BenchmarkRender -benchtime 3x -count 1 -timeout 20m ./pipeline

# The demo works offline: function images are built from test/fixtures into an
# OCI layout, imported into out/demo-cache (never the user's cache), and the
# bundled package is rendered in a copy under out/demo. examples/demo.sh does
# it (building bin/kptr first), printing each command as it runs it.
DEMO_OUT ?= out
DEMO_SANDBOX ?= auto
demo: ## build kptr and render the bundled example offline with a separate demo cache; prints each command and the one to re-run the render
	@GO='$(GO)' BUILD_TAGS='$(BUILD_TAGS)' examples/demo.sh --build '$(LDFLAGS)' $(BIN) $(DEMO_OUT) $(DEMO_SANDBOX)

# --- Argo CD plugin: image, argocd-cmp-server, end-to-end test -------------
# The image is tagged with the version (git describe) and latest, the tag
# deploy/ and deploy/helm/values.yaml name: pin a version there with the
# kustomization's images: newTag (deploy/examples/install) or the values' image.
IMAGE_REPO ?= ghcr.io/kptr-dev/kptr
IMAGE_TAG ?= $(IMAGE_REPO):$(subst +,-,$(VERSION))
IMAGE_OUT ?= out/image
PUSH_REPO ?= $(IMAGE_REPO)
STATIC_LDFLAGS := $(LDFLAGS) -s -w

image: ## build the sidecar image without a daemon: out/image/oci (OCI layout) + out/image/kptr.tar; PREWARM=<dir> bakes the images its Kptfiles name
	$(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags '$(STATIC_LDFLAGS)' -o bin/kptr-static ./cmd/kptr
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/kptr-sigverify-static ./cmd/kptr-sigverify
ifneq ($(PREWARM),)
	$(MAKE) build
	rm -rf out/prewarm
	$(BIN) prewarm --cache-dir out/prewarm-cache --export out/prewarm $(PREWARM)
endif
	$(GO) run ./deploy/image --kptr bin/kptr-static --sigverify bin/kptr-sigverify-static --out $(IMAGE_OUT) --tag $(IMAGE_TAG) --tag $(IMAGE_REPO):latest $(if $(PREWARM),--prewarm out/prewarm)

push: ## push the image make image wrote (out/image/oci) to PUSH_REPO (default ghcr.io/kptr-dev/kptr) under its tags, the version and latest, with the docker config's credentials; no daemon
	$(GO) run ./deploy/image --out $(IMAGE_OUT) --push $(PUSH_REPO)

# Argo CD's multi-call binary (argocd-repo-server and argocd-cmp-server), built
# from its own Go module (test/argocd/cmpserver) with Argo CD's source as
# published, once per Argo CD version and content of that module, cached
# under ~/.cache/kptr-test. Argo CD v3.6 declares Go 1.27: that module (and
# only it; kptr stays on Go 1.26) names the toolchain it builds with
# (`toolchain` in its go.mod), which the go command fetches from the module
# proxy on first use (GOTOOLCHAIN below, since Debian's and our images'
# go.env say GOTOOLCHAIN=local). A cold build (modules, toolchain, every
# package) takes many minutes: BENCHMARKS.md has the figure. Same build
# settings as `go test` there, so the test binary reuses the compiled Argo CD
# packages from the Go build cache.
ARGOCD_DIR := test/argocd/cmpserver
ARGOCD_VERSION := $(shell sed -n 's,^\tgithub.com/argoproj/argo-cd/v3 \(v[^ ]*\)$$,\1,p' $(ARGOCD_DIR)/go.mod)
ARGOCD_TOOLCHAIN := $(shell sed -n 's,^toolchain \(go[0-9.]*\)$$,\1,p' $(ARGOCD_DIR)/go.mod)
ARGOCD_GOENV := GOTOOLCHAIN=$(ARGOCD_TOOLCHAIN)
ARGOCD_KEY = $(shell cat $(ARGOCD_DIR)/go.mod $(ARGOCD_DIR)/go.sum $(ARGOCD_DIR)/main.go | sha256sum | cut -c1-16)
ARGOCD_BIN = $(HOME)/.cache/kptr-test/argocd-$(ARGOCD_VERSION)-$(ARGOCD_KEY)
ARGOCD_TEST_ENV = KPTR_BIN=$(CURDIR)/$(BIN) ARGOCD_BIN=$(ARGOCD_BIN) KUSTOMIZE_BIN=$(KUSTOMIZE_BIN) $(ARGOCD_GOENV)

argocd: ## build (or reuse) Argo CD's multi-call binary (argocd-repo-server, argocd-cmp-server) for the end-to-end tests
	@test -n '$(ARGOCD_VERSION)' -a -n '$(ARGOCD_TOOLCHAIN)' || { echo "make argocd: $(ARGOCD_DIR)/go.mod names no Argo CD version or no toolchain" >&2; exit 2; }
	@test -x $(ARGOCD_BIN) || { mkdir -p $(dir $(ARGOCD_BIN)) && \
	  echo "== building Argo CD $(ARGOCD_VERSION) with $(ARGOCD_TOOLCHAIN) into $(ARGOCD_BIN) (cold: many minutes; cached after)" && \
	  start=$$(date +%s) && \
	  { cd $(ARGOCD_DIR) && $(ARGOCD_GOENV) nice -n 10 $(GO) build -ldflags '-s -w' -o $(ARGOCD_BIN).tmp . ; } || { \
	    echo "make argocd: building Argo CD $(ARGOCD_VERSION) with $(ARGOCD_TOOLCHAIN) failed (see above; a cold build fetches the toolchain and modules from the Go module proxy, $$($(GO) env GOPROXY))" >&2; exit 1; } && \
	  mv $(ARGOCD_BIN).tmp $(ARGOCD_BIN) && echo "== built in $$(( $$(date +%s) - start )) s"; }
	@echo "argocd $(ARGOCD_VERSION) ($(ARGOCD_TOOLCHAIN)): $(ARGOCD_BIN)"

# The real kustomize, for kptr's docker face (test/e2e/dockerface and the
# Argo CD end-to-end suite): the release test/kustomize/go.mod names, built
# from the module proxy with kptr's own Go in that small module, cached under
# ~/.cache/kptr-test as test/kustomizebin builds it (same file, same flags:
# the tests build it themselves when it is missing). Argo CD v3.6.1 bundles
# kustomize v5.8.3, which needs Go 1.27 and a kube-openapi pseudo-version the
# module proxy refuses: v5.8.1 is the release nearest to it that builds here.
KUSTOMIZE_DIR := test/kustomize
KUSTOMIZE_VERSION := $(shell sed -n 's,^\tsigs.k8s.io/kustomize/kustomize/v5 \(v[^ ]*\).*$$,\1,p' $(KUSTOMIZE_DIR)/go.mod)
KUSTOMIZE_KEY = $(shell cat $(KUSTOMIZE_DIR)/go.mod $(KUSTOMIZE_DIR)/go.sum | sha256sum | cut -c1-16)
KUSTOMIZE_BIN = $(HOME)/.cache/kptr-test/kustomize-$(KUSTOMIZE_VERSION)-$(KUSTOMIZE_KEY)

kustomize: ## build (or reuse) the real kustomize the docker-face tests run
	@test -x $(KUSTOMIZE_BIN) || { mkdir -p $(dir $(KUSTOMIZE_BIN)) && \
	  cd $(KUSTOMIZE_DIR) && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 $(GO) build -trimpath -o $(KUSTOMIZE_BIN).tmp sigs.k8s.io/kustomize/kustomize/v5 && \
	  mv $(KUSTOMIZE_BIN).tmp $(KUSTOMIZE_BIN); }
	@echo "kustomize $(KUSTOMIZE_VERSION): $(KUSTOMIZE_BIN)"

test-argocd: build argocd kustomize $(TESTSUM) ## end-to-end: kptr through the real argocd-repo-server and argocd-cmp-server (uid 999, no capabilities), through argocd-cmp-server alone, and as the docker of the repo-server's built-in kustomize (RuntimeDefault)
	@set -o pipefail; cd $(ARGOCD_DIR) && $(ARGOCD_TEST_ENV) $(GO) test -json -count=1 -timeout 30m ./... | $(TESTSUM) -suite "Argo CD end-to-end"

bench-argocd: build argocd ## Argo CD render latency through argocd-cmp-server, warm and cold cache
	cd $(ARGOCD_DIR) && $(ARGOCD_TEST_ENV) $(GO) test -run '^$$' -bench '^BenchmarkGenerate' -benchtime 20x ./...

# Issue 34's fleet (test/argocd/cmpserver/fleet_bench_test.go): a monorepo of
# 100 kpt packages, one Application each, refreshed through the real
# argocd-repo-server and the sidecar under RuntimeDefault (cold, warm, one
# package changed, a function bumped in 30), against kptr --sandbox none and
# the functions alone; one run, one table. As root; not part of make bench
# or make test. BENCH_FLEET_FLAGS passes flags on (-fleet-apps=30 for a
# smaller fleet, -fleet-concurrency, -fleet-catalog=DIR for the catalog's
# OCI layout).
BENCH_FLEET_FLAGS ?=
bench-fleet: build argocd kustomize ## issue 34: 100 Applications through argocd-repo-server + the sidecar: cold, warm, one changed, a bump in 30 (figures → BENCHMARKS.md)
	cd $(ARGOCD_DIR) && $(ARGOCD_TEST_ENV) $(GO) test -run '^$$' -bench '^BenchmarkFleet$$' -benchtime 1x -timeout 40m . $(BENCH_FLEET_FLAGS)

clean:
	rm -rf bin out
