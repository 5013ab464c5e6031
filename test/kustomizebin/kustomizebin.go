// Package kustomizebin gives tests the real kustomize: the release
// test/kustomize/go.mod names (its `tool` and `require` lines), built from
// the Go module proxy with kptr's own Go toolchain in that small module of
// its own, once per content of its go.mod and go.sum, and cached under
// ~/.cache/kptr-test (as the Argo CD build is; `make kustomize` builds the
// same file). KUSTOMIZE_BIN names a binary to use instead.
package kustomizebin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
)

// pkg is the kustomize command's package.
const pkg = "sigs.k8s.io/kustomize/kustomize/v5"

var (
	once  sync.Once
	built string
	err   error
)

// Path returns the kustomize binary, building it on first use (a cold build
// fetches kustomize's modules: a minute or two).
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("KUSTOMIZE_BIN"); p != "" {
		return p
	}
	once.Do(func() { built, err = build() })
	if err != nil {
		t.Fatalf("kustomize: %v", err)
	}
	return built
}

// Version is the kustomize release test/kustomize/go.mod requires.
func Version() (string, error) {
	b, err := os.ReadFile(filepath.Join(moduleDir(), "go.mod"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(pkg) + ` (v\S+)`).FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("test/kustomize/go.mod requires no %s", pkg)
	}
	return string(m[1]), nil
}

// moduleDir is test/kustomize, beside this package.
func moduleDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "kustomize")
}

func build() (string, error) {
	dir := moduleDir()
	v, err := Version()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(home, ".cache", "kptr-test", "kustomize-"+v+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", out+".tmp", pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building kustomize %s in test/kustomize: %v\n%s", v, err, b)
	}
	return out, os.Rename(out+".tmp", out)
}
