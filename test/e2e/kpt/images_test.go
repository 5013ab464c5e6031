package kpt

import (
	"sync"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// Image cases name upstream-looking images (gcr.io/kpt-fn/...); the fixture
// images are pushed to a local registry that --mirror gcr.io=127.0.0.1:PORT
// (KPTR_MIRRORS) stands in for, and kptr pulls, caches and runs them in its
// sandbox like real catalog images.
var (
	imagesOnce sync.Once
	imagesEnv  []string
	imagesErr  string
)

// fixtureImages maps repositories (under gcr.io/kpt-fn/) to a fixture and tags.
var fixtureImages = []struct {
	repo, fixture string
	tags          []string
}{
	{"set-labels", "set-labels", []string{"v0.1.5", "latest"}},
	{"set-annotations", "set-annotations", []string{"v0.1.4"}},
	{"generator", "generator", []string{"v0.1.0"}},
	{"kptr-fx", "kptr-fx", []string{"v0.2.1", "v0.2.3", "v0.3.0", "sha256-abc.sig", "v0.2.9-git-deadbeef"}},
}

// wasmImages are wasm function images, packaged as `kpt alpha wasm push`
// does (fnimage.WasmIndex): kpt's own wasm cases name
// gcr.io/kpt-fn-demo/set-namespace:v0.5.0 and set-labels:v0.2.0, built there
// from the catalog's functions; here from the fixtures of the same semantics,
// compiled with GOOS=js GOARCH=wasm (or wasip1 for the wasip1 cases).
var wasmImages = []struct {
	repo, fixture, goos, tag string
}{
	{"kpt-fn-demo/set-namespace", "set-namespace", "js", "v0.5.0"},
	{"kpt-fn-demo/set-labels", "set-labels-catalog", "js", "v0.2.0"},
	{"kpt-fn-demo/set-namespace-wasip1", "set-namespace", "wasip1", "v0.5.0"},
}

// ensureImages starts one registry for the whole run (owned by the parent
// test t, which outlives its parallel subtests) and pushes the images once.
func ensureImages(t *testing.T) {
	if imagesEnv == nil && imagesErr == "" {
		t.Fatal("ensureImages must be primed by the parent test (primeImages)")
	}
	if imagesErr != "" {
		t.Fatal(imagesErr)
	}
}

func primeImages(parent *testing.T) {
	imagesOnce.Do(func() {
		reg := registry.Start(parent)
		for _, fi := range fixtureImages {
			img := fnimage.Build(parent, fi.fixture)
			for _, tag := range fi.tags {
				fnimage.Push(parent, img, reg.Addr+"/kpt-fn/"+fi.repo+":"+tag)
			}
		}
		for _, wi := range wasmImages {
			p := fnimage.PlatformJS
			if wi.goos == "wasip1" {
				p = fnimage.PlatformWASIP1
			}
			idx := fnimage.WasmIndex(parent, fnimage.WasmModule(parent, wi.fixture, wi.goos), p)
			fnimage.PushIndex(parent, idx, reg.Addr+"/"+wi.repo+":"+wi.tag)
		}
		imagesEnv = []string{"KPTR_MIRRORS=gcr.io=" + reg.Addr, "REGISTRY=" + reg.Addr}
		// the registry stops with parent: let the next top-level test start its own
		parent.Cleanup(func() { imagesOnce, imagesEnv, imagesErr = sync.Once{}, nil, "" })
	})
}
