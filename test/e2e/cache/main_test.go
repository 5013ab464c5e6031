// Package cache_test is the end-to-end suite of kptr's image cache: the kptr
// binary against Debian's docker-registry, as a user or an operator would
// drive it (kptr cache pull|ls|verify|prune|import|export).
package cache_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/cache"

	"github.com/kptr-dev/kptr/test/fnimage"
)

var kptrBin string

func TestMain(m *testing.M) {
	if ref := os.Getenv("KPTR_E2E_HOLD"); ref != "" {
		holdAndWait(ref)
		return
	}
	dir, err := os.MkdirTemp("", "kptr-e2e-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kptrBin = filepath.Join(dir, "kptr")
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOMOD:", err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", kptrBin, "./cmd/kptr")
	build.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kptr: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one kptr run.
type result struct {
	stdout, stderr string
	code           int
}

// kptr runs the binary with a clean environment and the given cache dir.
func kptr(t *testing.T, cacheDir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kptrBin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir(), "KPTR_CACHE_DIR=" + cacheDir, "KPTR_PROGRESS=plain"}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kptr %v: %v", args, err)
	}
	return r
}

func (r result) must(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// randomLayer is a layer of n incompressible bytes (so sizes are real).
func randomLayer(t *testing.T, seed int64, path string, n int) v1.Layer {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return fnimage.Layer(t, map[string]string{path: string(b)})
}

// bigImage is the function image plus three random layers of n bytes each.
func bigImage(t *testing.T, seed int64, n int) v1.Image {
	return fnimage.Build(t, "cat", fnimage.WithLayers(
		randomLayer(t, seed, "data/one", n), randomLayer(t, seed+1, "data/two", n), randomLayer(t, seed+2, "data/three", n)))
}

// blobsOf lists the config and layer digests of img.
func blobsOf(t *testing.T, img v1.Image) []string {
	cfg, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	out := []string{cfg.String()}
	ls, _ := img.Layers()
	for _, l := range ls {
		d, _ := l.Digest()
		out = append(out, d.String())
	}
	return out
}

func digestOf(t *testing.T, img v1.Image) string {
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func countEntries(dir string) int {
	ents, _ := os.ReadDir(dir)
	return len(ents)
}

// errorLines are the stderr lines that are not progress log lines.
func errorLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" && !strings.HasPrefix(l, "time=") {
			out = append(out, l)
		}
	}
	return out
}

// holdAndWait is a stand-in for a long render: another process that resolved
// an image and is still using it. It prints the rootfs, then waits for stdin
// to close.
func holdAndWait(ref string) {
	c, err := cache.Open(os.Getenv("KPTR_CACHE_DIR"), cache.WithOffline(true))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	b, err := c.Resolve(context.Background(), ref)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(b.Rootfs)
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
