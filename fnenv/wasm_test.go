package fnenv

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

// countingWasm stands in for the wasm tier (this test binary links no
// real tier): it counts its opens and keeps the settings of each.
type countingWasm struct {
	mu     sync.Mutex
	opened []runtime.Settings
}

var fakeWasm = &countingWasm{}

func init() { runtime.Register(fakeWasm) }

func (*countingWasm) Info() runtime.TierInfo { return runtime.TierInfo{Name: runtime.Wasm} }
func (*countingWasm) Probe(string, bool) []runtime.ProbeResult {
	return []runtime.ProbeResult{{Name: "p", Status: runtime.StatusOK}}
}
func (w *countingWasm) Open(opts ...runtime.Option) (runtime.Sandbox, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.opened = append(w.opened, runtime.NewSettings(opts...))
	return &countedSandbox{n: len(w.opened)}, nil
}

// opens is how often the tier was opened since the last call, with the
// settings of each open.
func (w *countingWasm) opens() []runtime.Settings {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := w.opened
	w.opened = nil
	return o
}

// countedSandbox is the n-th open of countingWasm; every run says which.
type countedSandbox struct{ n int }

func (s *countedSandbox) Run(context.Context, bundle.Bundle, runtime.Invocation) (runtime.Result, error) {
	return runtime.Result{Stdout: []byte{byte('0' + s.n)}}, nil
}
func (*countedSandbox) Precompile(context.Context, bundle.Bundle) error            { return nil }
func (*countedSandbox) Prepare(context.Context, bundle.Bundle, runtime.Invocation) {}
func (*countedSandbox) Probes() []runtime.ProbeResult                              { return nil }
func (*countedSandbox) Close() error                                               { return nil }

// With --sandbox=wasm the wasm tier is the sandbox, and wasm images run in
// that very tier: one open (one wazero runtime, one compiled-code cache
// handle), with the settings of both the sandbox (its image directory) and
// the wasm runs (the compile cache). Before, the sandbox opened one wasm
// tier and wasm images ran in a second.
func TestSandboxWasmIsTheWasmImagesTier(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fakeWasm.opens()
	e := New(Config{Sandbox: runtime.Wasm, AllowWasm: true, CacheDir: dir, OpenCache: func(extra ...cache.Option) (*cache.Cache, error) {
		return cache.Open(dir, extra...)
	}})
	defer e.Close()
	r := e.Runner()
	wasmRes, err := r.Run(ctx, bundle.Bundle{Ref: "example.com/fn:wasm", Wasm: "module.wasm"}, runtime.Invocation{})
	if err != nil {
		t.Fatal(err)
	}
	// a container image, refused by the real wasm tier: it reaches the sandbox
	imgRes, err := r.Run(ctx, bundle.Bundle{Ref: "example.com/fn:image", Rootfs: "/nonexistent"}, runtime.Invocation{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Compile(ctx, []string{"example.com/fn:wasm"}, []bundle.Bundle{{Ref: "example.com/fn:wasm", Wasm: "module.wasm"}}); err != nil {
		t.Fatal(err)
	}
	opens := fakeWasm.opens()
	if len(opens) != 1 || string(wasmRes.Stdout) != string(imgRes.Stdout) {
		t.Fatalf("--sandbox=wasm opened the wasm tier %d times (wasm images ran in open %s, the sandbox's runs in open %s), want once", len(opens), wasmRes.Stdout, imgRes.Stdout)
	}
	if s := opens[0]; s.ImageDir != dir || s.CompileCache != filepath.Join(dir, cache.WasmDir) {
		t.Errorf("the one wasm tier was opened with image dir %q and compile cache %q, want %q and %q", s.ImageDir, s.CompileCache, dir, filepath.Join(dir, cache.WasmDir))
	}
}

// Under any other sandbox the wasm tier opens for the wasm images alone,
// when the first runs, and once.
func TestWasmTierOpensOnceBesideTheSandbox(t *testing.T) {
	ctx := context.Background()
	fakeWasm.opens()
	e := New(Config{Sandbox: SandboxNone, AllowWasm: true, OpenCache: func(...cache.Option) (*cache.Cache, error) {
		return cache.Open(t.TempDir())
	}})
	defer e.Close()
	if n := len(fakeWasm.opens()); n != 0 {
		t.Fatalf("the chain opened the wasm tier %d times before any run", n)
	}
	for range 2 {
		if _, err := e.Runner().Run(ctx, bundle.Bundle{Ref: "example.com/fn:wasm", Wasm: "module.wasm"}, runtime.Invocation{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(fakeWasm.opens()); n != 1 {
		t.Fatalf("two wasm runs opened the wasm tier %d times, want once", n)
	}
}
