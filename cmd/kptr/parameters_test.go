package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// announced runs kptr parameters in dir and returns the functions it
// announces.
func announced(t *testing.T, dir string, env map[string]string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	g := newGlobals(nil, &out, &errb, envMap(env))
	if err := execIn(context.Background(), g, "parameters", dir); err != nil {
		t.Fatalf("kptr parameters: %v\n%s", err, errb.String())
	}
	var anns []parameterAnnouncement
	if err := json.Unmarshal(out.Bytes(), &anns); err != nil || len(anns) != 1 {
		t.Fatalf("kptr parameters printed %q: %v", out.String(), err)
	}
	return anns[0].Array
}

// kptr parameters announces each function image through the chain's
// offline view of the cache: a cached image with its digest, one not
// cached as such (never pulled: the cache stays without it), one outside
// the operator's allow-list as refused; a cached wasm image, allowed by
// the operator's KPTR_ALLOW_WASM, with its digest as generate resolves it
// (before, the command opened a cache of its own that resolved no wasm
// image, and announced a cached one as not cached).
func TestParametersAnnounceThroughTheChain(t *testing.T) {
	wasmRef, _, env := wasmImage(t)
	f := fixture(t)
	env["KPTR_ALLOWED_IMAGES"] = f.reg.Addr + "/fn/set-labels:*," + strings.TrimSuffix(wasmRef, ":v1") + ":*"
	env["KPTR_ALLOW_WASM"] = "true"
	refused := f.reg.Addr + "/fn/set-annotations:v1"
	for _, args := range [][]string{{"--image", f.labels}, {"--image", wasmRef, "--allow-alpha-wasm"}} {
		var errb bytes.Buffer
		if err := execIn(context.Background(), newGlobals(nil, &bytes.Buffer{}, &errb, envMap(env)), append([]string{"prewarm"}, args...)...); err != nil {
			t.Fatalf("prewarm %v: %v\n%s", args, err, errb.String())
		}
	}
	notCached := f.reg.Addr + "/fn/set-labels:v2"
	app := t.TempDir()
	kptfile := "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n"
	for _, ref := range []string{f.labels, wasmRef, refused, notCached} {
		kptfile += "  - image: " + ref + "\n"
	}
	if err := os.WriteFile(filepath.Join(app, "Kptfile"), []byte(kptfile), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(announced(t, app, env), "\n")
	for _, want := range []string{
		f.labels + "@sha256:",
		wasmRef + "@sha256:",
		refused + " (refused: not in the operator's allow-list)",
		notCached + " (not cached: pulled at the first render)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the announcement lacks %q:\n%s", want, got)
		}
	}
	// announcing pulled nothing
	if again := strings.Join(announced(t, app, env), "\n"); again != got {
		t.Errorf("a second announcement differs:\n%s\nfirst:\n%s", again, got)
	}
}
