package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// exitModule is the smallest wasip1 function: _start returns at once.
var exitModule = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
	0x03, 0x02, 0x01, 0x00, 0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b}

// kptr prewarm --allow-alpha-wasm pulls a wasm image (its wasm entry) and
// compiles the module into <cache>/wasm; without the flag it fails naming
// the flag.
func TestPrewarmWasm(t *testing.T) {
	reg := registry.Start(t)
	mod := filepath.Join(t.TempDir(), "fn.wasm")
	if err := os.WriteFile(mod, exitModule, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := reg.Addr + "/fn/wasm:v1"
	fnimage.PushIndex(t, fnimage.WasmIndex(t, mod, fnimage.PlatformWASIP1), ref)
	cacheDir := t.TempDir()
	env := map[string]string{"KPTR_CACHE_DIR": cacheDir, "KPTR_PROGRESS": "none", "HOME": t.TempDir()}
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		g := newGlobals(nil, &out, &errb, envMap(env))
		err := execIn(context.Background(), g, append([]string{"prewarm", "--image", ref}, args...)...)
		return errb.String(), err
	}
	if errs, err := run(); err == nil || !strings.Contains(errs+err.Error(), "--allow-alpha-wasm") {
		t.Fatalf("without the flag: %v\n%s", err, errs)
	}
	errs, err := run("--allow-alpha-wasm")
	if err != nil || !strings.Contains(errs, ref+" sha256:") {
		t.Fatalf("prewarm: %v\n%s", err, errs)
	}
	n := 0
	_ = filepath.Walk(filepath.Join(cacheDir, "wasm"), func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n++
		}
		return nil
	})
	if n == 0 {
		t.Fatal("prewarm compiled nothing into the cache's wasm/")
	}
}
