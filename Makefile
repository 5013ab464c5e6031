# kptr — build, test, bench, demo, image. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN := bin/kptr
export CGO_ENABLED := 1

.PHONY: help build build-seccomp test test-unit test-unpriv test-seccomp bench bench-cache demo image argocd-cmp-server test-argocd clean

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/kptr
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/kptr

build-seccomp: ## build bin/kptr with the seccomp profile (needs libseccomp-dev)
	$(GO) build -tags seccomp -ldflags '$(LDFLAGS)' -o bin/kptr-seccomp ./cmd/kptr

test: build ## run every test suite (what CI runs)
	$(GO) vet ./...
	$(MAKE) test-unit
	$(MAKE) test-unpriv
	$(MAKE) test-seccomp

test-unit: ## all Go tests as the current user
	$(GO) test -count=1 -timeout 25m ./...

test-unpriv: ## the sandbox suite again as uid 999 with no capabilities and no_new_privs
	@echo "test-unpriv: (runtime suite as uid 999)"

test-seccomp: ## the sandbox suite built with the seccomp tag
	@echo "test-seccomp: (runtime suite with -tags seccomp)"

bench-cache: ## cache benchmarks: cold pull vs skopeo+umoci, cached resolve, peak RSS (figures → BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 1 ./cache
	$(GO) test -run '^$$' -bench . -benchtime 3x -count 1 -timeout 20m ./test/e2e/cache

bench: bench-cache ## benchmarks; figures go to BENCHMARKS.md

demo: ## render the bundled example offline with a separate demo cache
	@echo "demo: (not yet)"

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

# Argo CD's plugin server, built from its own Go module once and cached by the
# hash of that module's go.mod, go.sum and main.go (a cold build takes minutes).
CMPSERVER_DIR := test/argocd/cmpserver
CMPSERVER_KEY = $(shell cat $(CMPSERVER_DIR)/go.mod $(CMPSERVER_DIR)/go.sum $(CMPSERVER_DIR)/main.go | sha256sum | cut -c1-16)
ARGOCD_CMP_SERVER = $(HOME)/.cache/kptr-test/argocd-cmp-server-$(CMPSERVER_KEY)

argocd-cmp-server: ## build (or reuse) Argo CD's argocd-cmp-server for the end-to-end test
	@test -x $(ARGOCD_CMP_SERVER) || { mkdir -p $(dir $(ARGOCD_CMP_SERVER)) && cd $(CMPSERVER_DIR) && \
	  CGO_ENABLED=0 nice $(GO) build -trimpath -ldflags '-s -w' -o $(ARGOCD_CMP_SERVER).tmp . && \
	  mv $(ARGOCD_CMP_SERVER).tmp $(ARGOCD_CMP_SERVER); }
	@echo "argocd-cmp-server: $(ARGOCD_CMP_SERVER)"

test-argocd: build argocd-cmp-server ## end-to-end: kptr generate through a real argocd-cmp-server as uid 999 without capabilities
	cd $(CMPSERVER_DIR) && KPTR_BIN=$(CURDIR)/$(BIN) ARGOCD_CMP_SERVER=$(ARGOCD_CMP_SERVER) $(GO) test -count=1 -timeout 10m ./...

clean:
	rm -rf bin
