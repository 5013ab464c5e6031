package runtime_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/wasm"
	"github.com/kptr-dev/kptr/test/bench/pkggen"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// BenchmarkSetNamespace runs the fixture set-namespace over a ResourceList
// of n resources (a third each ConfigMaps, Deployments and Services, the
// shapes the catalog's set-namespace changes) three ways:
//
//   - native/<tier>: the static linux binary in the test image, in the
//     namespace and the landlock tier (a fresh sandbox per run);
//   - wasm-js/cold: the GOOS=js module compiled from nothing on every run (a
//     new wazero runtime, no compilation cache: the first run on a machine);
//   - wasm-js/cached: a new runtime per run whose compilation cache directory
//     already holds the module (a later kptr process: kptr's cache dir/wasm);
//   - wasm-js/warm, wasm-wasip1/warm: one runtime, the module compiled once
//     (later runs in the same kptr process).
//
// make bench-wasm runs it; the figures are in BENCHMARKS.md.
func BenchmarkSetNamespace(b *testing.B) {
	for _, n := range []int{50, 500, 5000} {
		input := pkggen.ResourceList(n, "namespace: bench")
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			for _, name := range []string{"namespace", "landlock"} {
				b.Run("native/"+name, func(b *testing.B) {
					t, ok := runtime.Lookup(name)
					if !ok {
						b.Skip("tier not registered")
					}
					sb := open(b, t)
					bn := nativeSetNamespace(b)
					benchRuns(b, sb, bn, input)
				})
			}
			jsMod := fnimage.WasmModule(b, "set-namespace", "js")
			wasiMod := fnimage.WasmModule(b, "set-namespace", "wasip1")
			b.Run("wasm-js/cold", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r := wasm.New()
					runOnce(b, r, bundle.Bundle{Ref: "set-namespace", Wasm: jsMod}, input)
					r.Close()
				}
			})
			dir := b.TempDir()
			warmUp := wasm.New(wasm.WithCacheDir(dir))
			runOnce(b, warmUp, bundle.Bundle{Ref: "set-namespace", Wasm: jsMod}, input)
			warmUp.Close()
			b.Run("wasm-js/cached", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					r := wasm.New(wasm.WithCacheDir(dir))
					runOnce(b, r, bundle.Bundle{Ref: "set-namespace", Wasm: jsMod}, input)
					r.Close()
				}
			})
			for goos, mod := range map[string]string{"js": jsMod, "wasip1": wasiMod} {
				b.Run("wasm-"+goos+"/warm", func(b *testing.B) {
					r := wasm.New()
					defer r.Close()
					bn := bundle.Bundle{Ref: "set-namespace", Wasm: mod}
					runOnce(b, r, bn, input)
					benchRuns(b, r, bn, input)
				})
			}
		})
	}
}

func benchRuns(b *testing.B, r runtime.Runner, bn bundle.Bundle, input string) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runOnce(b, r, bn, input)
	}
}

func runOnce(b *testing.B, r runtime.Runner, bn bundle.Bundle, input string) {
	res, err := r.Run(context.Background(), bn, runtime.Invocation{Stdin: strings.NewReader(input)})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "namespace: bench") {
		b.Fatalf("%v exit %d: %.300s", err, res.ExitCode, res.Stderr)
	}
}

var (
	nativeOnce   sync.Once
	nativeRootfs string
)

// nativeSetNamespace is the test image (with /proc and /dev) with the
// fixture set-namespace as its function.
func nativeSetNamespace(b *testing.B) bundle.Bundle {
	nativeOnce.Do(func() {
		src := directRootfs(b)
		dir := filepath.Join(testTmp, "cache", "rootfs-set-namespace")
		if out, err := exec.Command("cp", "-a", src, dir).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		fn := filepath.Join(dir, "usr/local/bin/function")
		must(b, os.Remove(fn))
		copyFile(b, fnimage.Binary(b, "set-namespace"), fn, 0o755)
		nativeRootfs = dir
	})
	return bundle.Bundle{Ref: "set-namespace", Rootfs: nativeRootfs,
		Config: v1.Config{Entrypoint: []string{"function"}, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}}
}
