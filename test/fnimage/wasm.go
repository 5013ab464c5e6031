package fnimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Wasm platforms of function images.
var (
	PlatformJS     = v1.Platform{OS: "js", Architecture: "wasm"}
	PlatformWASIP1 = v1.Platform{OS: "wasip1", Architecture: "wasm"}
)

var (
	wasmMu    sync.Mutex
	wasmPaths = map[string]string{}
)

// WasmModule compiles test/fixtures/<fixture> for GOOS=goos GOARCH=wasm
// ("js" or "wasip1"), once per source content, and returns the module's path.
// With $KPTR_FIXTURE_BIN_DIR set, <dir>/<fixture>.<goos>.wasm is used when present.
func WasmModule(t testing.TB, fixture, goos string) string {
	t.Helper()
	wasmMu.Lock()
	defer wasmMu.Unlock()
	key := fixture + "." + goos
	if p, ok := wasmPaths[key]; ok {
		return p
	}
	p, err := CompileWasm(fixture, goos)
	if err != nil {
		t.Fatalf("fnimage: wasm fixture %s (%s): %v", fixture, goos, err)
	}
	wasmPaths[key] = p
	return p
}

// CompileWasm is WasmModule for code outside tests.
func CompileWasm(fixture, goos string) (string, error) {
	t, err := fixtureTarget(fixture, fixture+"."+goos+".wasm", fixture+"-"+goos, ".wasm", false)
	if err != nil || t.done {
		return t.out, err
	}
	root, outDir, out := t.root, t.outDir, t.out
	tmp, err := os.CreateTemp(outDir, fixture+".tmp-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp.Name(), "./test/fixtures/"+fixture)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, os.Rename(tmp.Name(), out)
}

// LegacyJSToolchain is the Go toolchain the tests build js modules of the
// port before Go 1.21 with (host module "go", as kpt's earliest published
// wasm images): runtime/wasm's TestJSBeforeGo121. The Makefile's
// LEGACY_JS_GO names the same one for the uid-999 suite.
const LegacyJSToolchain = "go1.20.14"

// LegacyJSFixtures are the fixtures TestJSBeforeGo121 builds with it.
var LegacyJSFixtures = []string{"js-contract", "cat"}

// WasmModuleWith is WasmModule built by another Go toolchain (GOTOOLCHAIN,
// e.g. "go1.20.14", fetched through the module proxy as any toolchain), for
// fixtures that use the standard library alone: the fixture's files are
// built in a scratch module of their own, whose go line is the toolchain's.
// It is how the tests get modules of the js port before Go 1.21 (host module
// "go"). With $KPTR_FIXTURE_BIN_DIR set, <dir>/<fixture>.<goos>.<toolchain>.wasm
// is used when present.
func WasmModuleWith(t testing.TB, fixture, goos, toolchain string) string {
	t.Helper()
	wasmMu.Lock()
	defer wasmMu.Unlock()
	key := fixture + "." + goos + "." + toolchain
	if p, ok := wasmPaths[key]; ok {
		return p
	}
	p, err := CompileWasmWith(fixture, goos, toolchain)
	if err != nil {
		t.Fatalf("fnimage: wasm fixture %s (%s, %s): %v", fixture, goos, toolchain, err)
	}
	wasmPaths[key] = p
	return p
}

// CompileWasmWith is WasmModuleWith for code outside tests.
func CompileWasmWith(fixture, goos, toolchain string) (string, error) {
	v, ok := strings.CutPrefix(toolchain, "go")
	parts := strings.Split(v, ".")
	if !ok || len(parts) < 2 {
		return "", fmt.Errorf("toolchain %q is not goN.M[.P]", toolchain)
	}
	t, err := fixtureTarget(fixture, fixture+"."+goos+"."+toolchain+".wasm", fixture+"-"+goos+"-"+toolchain, ".wasm", false)
	if err != nil || t.done {
		return t.out, err
	}
	src, outDir, out := t.src, t.outDir, t.out
	scratch, err := os.MkdirTemp(outDir, fixture+".mod-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(scratch, filepath.Base(f)), b, 0o644); err != nil {
			return "", err
		}
	}
	gomod := "module kptr.test/" + fixture + "\n\ngo " + parts[0] + "." + parts[1] + "\n"
	if err := os.WriteFile(filepath.Join(scratch, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", err
	}
	tmp := filepath.Join(scratch, "module.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, ".")
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN="+toolchain, "GOFLAGS=", "GOWORK=off", "CGO_ENABLED=0", "GOOS="+goos, "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build (GOTOOLCHAIN=%s): %v\n%s", toolchain, err, b)
	}
	return out, os.Rename(tmp, out)
}

// WasmIndex packages a module as `kpt alpha wasm push` does (kpt's
// pkg/wasm): an image of one gzip layer holding the one file at the top
// (named as the module file is), on an empty config (no platform in it),
// Docker v2 media types, in a Docker manifest list whose one entry carries
// the platform (kpt writes js/wasm; PlatformWASIP1 for a wasip1 module).
// The image's creation time is fixed so digests are stable.
func WasmIndex(t testing.TB, module string, p v1.Platform) v1.ImageIndex {
	t.Helper()
	img := WasmImage(t, module)
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add:        img,
		Descriptor: v1.Descriptor{MediaType: types.DockerManifestSchema2, Digest: d, Platform: &p},
	}), types.DockerManifestList)
}

// WasmImage is the image WasmIndex puts in its list: one layer holding the
// module, an empty config.
func WasmImage(t testing.TB, module string) v1.Image {
	t.Helper()
	code, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	name := filepath.Base(module)
	if err := tw.WriteHeader(&tar.Header{Name: name, Size: int64(len(code)), Mode: 0o644, ModTime: epoch}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(code); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tarBytes := buf.Bytes()
	// kpt compresses the layer with gzip's best compression
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil },
		tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.MediaType(img, types.DockerManifestSchema2)
	img, err = mutate.CreatedAt(img, v1.Time{Time: epoch})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// WasmConfigImage is a single wasm image (no index) whose config names the
// platform p: how other tools publish wasip1 modules.
func WasmConfigImage(t testing.TB, module string, p v1.Platform) v1.Image {
	t.Helper()
	img := WasmImage(t, module)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
