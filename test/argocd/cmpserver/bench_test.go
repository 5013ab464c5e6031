package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkGenerateWarm is one Argo CD render of the echoserver app (two
// functions, two packages) through argocd-cmp-server on a warm cache: the
// repo-server's gRPC stream, the tar.gz extraction, `kptr generate` with two
// sandboxed function runs, and the manifests back.
func BenchmarkGenerateWarm(b *testing.B) {
	f := pushFunctions(b)
	repo := repository(b, f)
	s := startServer(b, map[string]string{"KPTR_ALLOWED_IMAGES": f.allowed})
	env := requestEnv("echo", nil)
	if _, err := s.generate(repo, "apps/echo", env); err != nil { // warm the cache
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.generate(repo, "apps/echo", env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGenerateCold is `kptr generate` of the same app on an empty cache
// each time: resolve, pull (two images sharing a base layer, from a local
// registry), verify, unpack and render.
func BenchmarkGenerateCold(b *testing.B) {
	f := pushFunctions(b)
	repo := repository(b, f)
	kptr := kptrBinary(b)
	caches := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		cmd := exec.Command(kptr, "generate")
		cmd.Dir = filepath.Join(repo, "apps/echo")
		cmd.Env = append(os.Environ(), "KPTR_CACHE_DIR="+filepath.Join(caches, fmt.Sprint(i)),
			"KPTR_ALLOWED_IMAGES="+f.allowed, "KPTR_PROGRESS=none")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
}
