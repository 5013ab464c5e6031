package cache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// wasmModuleBytes stands for a module: the cache never looks inside.
const wasmModuleBytes = "\x00asm\x01\x00\x00\x00"

// kptWasmImage is `kpt alpha wasm push`'s image: one gzip layer with one
// .wasm file, an empty config, Docker v2 media types.
func kptWasmImage(t *testing.T, configPlatform *v1.Platform) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, gzipLayer(t, file("fn.wasm", wasmModuleBytes)))
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.MediaType(img, types.DockerManifestSchema2)
	if configPlatform != nil {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = configPlatform.OS, configPlatform.Architecture
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

func wasmIndex(t *testing.T, entries ...mutate.IndexAddendum) v1.ImageIndex {
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, entries...), types.DockerManifestList)
}

func TestResolveWasm(t *testing.T) {
	ctx := context.Background()
	reg := newTestRegistry(t)
	js := v1.Platform{OS: "js", Architecture: "wasm"}
	wasip1 := v1.Platform{OS: "wasip1", Architecture: "wasm"}
	host := HostPlatform()
	wasmImg := kptWasmImage(t, nil)
	wasmDigest, _ := wasmImg.Digest()
	hostImg := image(t, false, host.Architecture, gzipLayer(t, file("usr/local/bin/function", "#!native")))

	pushIndex(t, wasmIndex(t, mutate.IndexAddendum{Add: wasmImg, Descriptor: v1.Descriptor{Platform: &js}}), reg.Host+"/fn/kpt-format:v1")
	pushIndex(t, wasmIndex(t,
		mutate.IndexAddendum{Add: hostImg, Descriptor: v1.Descriptor{Platform: &host}},
		mutate.IndexAddendum{Add: wasmImg, Descriptor: v1.Descriptor{Platform: &js}}), reg.Host+"/fn/both:v1")
	push(t, kptWasmImage(t, &wasip1), reg.Host+"/fn/wasip1:v1")
	push(t, hostImg, reg.Host+"/fn/native:v1")

	allowed := openTest(t, "", WithWasm(true))
	refused := openTest(t, "", WithWasm(false))
	cases := []struct {
		ref      string
		wasm     bool   // resolves to a wasm bundle when allowed
		refused  bool   // fails without the flag
		platform string // recorded platform
	}{
		{ref: "fn/kpt-format:v1", wasm: true, refused: true, platform: "js/wasm"},
		{ref: "fn/both:v1", wasm: true},
		{ref: "fn/wasip1:v1", wasm: true, refused: true, platform: "wasip1/wasm"},
		{ref: "fn/native:v1"},
		// kpt's image by digest: no index says js/wasm, its format does
		{ref: "fn/kpt-format@" + wasmDigest.String(), wasm: true, refused: true, platform: "js/wasm"},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			b, err := allowed.Resolve(ctx, reg.Host+"/"+tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if (b.Wasm != "") != tc.wasm {
				t.Fatalf("Wasm = %q, want a module: %v", b.Wasm, tc.wasm)
			}
			if tc.wasm {
				if b.Wasm != "fn.wasm" {
					t.Fatalf("Wasm = %q", b.Wasm)
				}
				got, err := os.ReadFile(filepath.Join(b.Rootfs, b.Wasm))
				if err != nil || string(got) != wasmModuleBytes {
					t.Fatalf("module: %q %v", got, err)
				}
				if tc.platform != "" {
					m, err := allowed.readMeta(b.Digest.Hex)
					if err != nil || m.Platform != tc.platform {
						t.Fatalf("recorded platform %+v %v", m, err)
					}
				}
				// cached now: resolves again without the registry
				again, err := openTest(t, allowed.Dir(), WithWasm(true), WithOffline(true)).Resolve(ctx, reg.Host+"/"+tc.ref)
				if err != nil || again.Wasm != b.Wasm || again.Digest != b.Digest {
					t.Fatalf("offline: %+v %v", again, err)
				}
			}
			b, err = refused.Resolve(ctx, reg.Host+"/"+tc.ref)
			if tc.refused {
				if !errors.Is(err, ErrWasmNotAllowed) || !strings.Contains(err.Error(), "--allow-alpha-wasm") {
					t.Fatalf("without the flag: %+v, %v", b, err)
				}
				return
			}
			if err != nil || b.Wasm != "" {
				t.Fatalf("without the flag: %+v, %v", b, err)
			}
		})
	}
	// A wasm image unpacked by an allowed cache is refused by one that is
	// not, from the same directory.
	_, err := openTest(t, allowed.Dir(), WithWasm(false), WithOffline(true)).Resolve(ctx, reg.Host+"/fn/kpt-format@"+wasmDigest.String())
	if !errors.Is(err, ErrWasmNotAllowed) {
		t.Fatalf("cached wasm image without the flag: %v", err)
	}
}

// A declared wasm image with no single module at its top is refused.
func TestResolveWasmWithoutModule(t *testing.T) {
	reg := newTestRegistry(t)
	img, err := mutate.AppendLayers(empty.Image, gzipLayer(t, file("a.wasm", "x"), file("b.wasm", "y")))
	if err != nil {
		t.Fatal(err)
	}
	js := v1.Platform{OS: "js", Architecture: "wasm"}
	pushIndex(t, wasmIndex(t, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &js}}), reg.Host+"/fn/two:v1")
	_, err = openTest(t, "", WithWasm(true)).Resolve(context.Background(), reg.Host+"/fn/two:v1")
	if err == nil || !strings.Contains(err.Error(), "wasm image holds 2 .wasm files at its top, not one") {
		t.Fatal(err)
	}
}
