package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// exitModule is the smallest wasip1 function: _start returns at once.
var exitModule = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
	0x03, 0x02, 0x01, 0x00, 0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b}

// wasmImage pushes exitModule as kpt's wasm image format to a registry of
// its own and returns its reference, an empty cache directory and kptr's
// environment for it.
func wasmImage(t *testing.T) (ref, cacheDir string, env map[string]string) {
	t.Helper()
	reg := registry.Start(t)
	mod := filepath.Join(t.TempDir(), "fn.wasm")
	if err := os.WriteFile(mod, exitModule, 0o644); err != nil {
		t.Fatal(err)
	}
	ref = reg.Addr + "/fn/wasm:v1"
	fnimage.PushIndex(t, fnimage.WasmIndex(t, mod, fnimage.PlatformWASIP1), ref)
	cacheDir = t.TempDir()
	return ref, cacheDir, map[string]string{"KPTR_CACHE_DIR": cacheDir, "KPTR_PROGRESS": "none", "HOME": t.TempDir()}
}

// kptr prewarm --allow-alpha-wasm pulls a wasm image (its wasm entry) and
// compiles the module into <cache>/wasm; without the flag it fails naming
// the flag.
func TestPrewarmWasm(t *testing.T) {
	ref, cacheDir, env := wasmImage(t)
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

// kptr cache prune bounds the compiled wasm code too: the code of a module
// no cached image holds goes once unused for an hour (exec modules, an
// older layout's files), the code of a cached image's module stays while
// the image does, and goes with it; code used within the hour stays; what a
// compilation killed two hours ago left in the code that stays goes.
func TestPruneCompiledWasm(t *testing.T) {
	ref, cacheDir, env := wasmImage(t)
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		g := newGlobals(nil, &out, &errb, envMap(env))
		if err := execIn(context.Background(), g, args...); err != nil {
			t.Fatalf("kptr %v: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	run("prewarm", "--allow-alpha-wasm", "--image", ref)
	sum := sha256.Sum256(exitModule)
	compiled := filepath.Join(cacheDir, "wasm", hex.EncodeToString(sum[:]))
	if _, err := os.Stat(compiled); err != nil {
		t.Fatalf("the module's compiled code is not in its own directory: %v", err)
	}
	hoursAgo := time.Now().Add(-2 * time.Hour)
	// what a prewarm killed two hours ago between wazero's write and rename left
	wazeroDirs, err := filepath.Glob(filepath.Join(compiled, "wazero-*"))
	if err != nil || len(wazeroDirs) != 1 {
		t.Fatalf("wazero's directory in %s: %v %v", compiled, wazeroDirs, err)
	}
	leftover := filepath.Join(wazeroDirs[0], strings.Repeat("ef", 32)+".42.tmp")
	if err := os.WriteFile(leftover, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(leftover, hoursAgo, hoursAgo); err != nil {
		t.Fatal(err)
	}
	plant := func(name string, mtime time.Time) string {
		p := filepath.Join(cacheDir, "wasm", name)
		if err := os.MkdirAll(filepath.Join(p, "wazero-v0-amd64-linux"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "wazero-v0-amd64-linux", "code"), make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orphan := plant(strings.Repeat("ab", 32), hoursAgo)        // an exec module's, unused for two hours
	oldLayout := plant("wazero-v1.11.0-amd64-linux", hoursAgo) // before one directory per module
	recent := plant(strings.Repeat("cd", 32), time.Now())      // a module another kptr runs now
	out := run("cache", "prune", "--max-age", "24h")
	for _, p := range []string{orphan, oldLayout, leftover} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s survived the prune:\n%s", filepath.Base(p), out)
		}
	}
	for _, p := range []string{compiled, recent} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed:\n%s", filepath.Base(p), out)
		}
	}
	if !strings.Contains(out, "compiled wasm code: removed 1 half-written file(s) of killed compilations") ||
		!strings.Contains(out, "compiled wasm code: removed 2 module(s), 12.0 KiB") || !strings.Contains(out, "kept the compiled code of 1 wasm module(s) used within the last 1h0m0s") {
		t.Errorf("prune's report:\n%s", out)
	}
	// The image goes with --all, and its module's code with it once unused
	// for the grace period.
	if err := os.Chtimes(compiled, hoursAgo, hoursAgo); err != nil {
		t.Fatal(err)
	}
	out = run("cache", "prune", "--all")
	if _, err := os.Stat(compiled); err == nil {
		t.Errorf("the removed image's compiled code survived --all:\n%s", out)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("code used within the hour was removed by --all:\n%s", out)
	}
}

// kptr generate runs a wasm image when the operator allows it
// (KPTR_ALLOW_WASM), as fn render --allow-alpha-wasm does; without it the
// one line names the operator's setting, and nothing renders.
func TestGenerateWasm(t *testing.T) {
	reg := registry.Start(t)
	ref := reg.Addr + "/kpt-fn-demo/set-namespace:v0.5.0"
	fnimage.PushIndex(t, fnimage.WasmIndex(t, fnimage.WasmModule(t, "set-namespace", "js"), fnimage.PlatformJS), ref)
	app := t.TempDir()
	for name, body := range map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n" +
			"    - image: " + ref + "\n      configMap:\n        namespace: staging\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
	} {
		if err := os.WriteFile(filepath.Join(app, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"KPTR_CACHE_DIR": t.TempDir(), "KPTR_PROGRESS": "none", "HOME": t.TempDir(),
		"KPTR_ALLOWED_IMAGES": reg.Addr + "/**"}
	code, stdout, stderr := runGenerateCmd(t, app, env)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "wasm functions run only with the operator's policy (KPTR_ALLOW_WASM / --allow-alpha-wasm)") ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("without KPTR_ALLOW_WASM: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	env["KPTR_ALLOW_WASM"] = "true"
	code, stdout, stderr = runGenerateCmd(t, app, env)
	if code != 0 || !strings.Contains(stdout, "namespace: staging") || !strings.Contains(stdout, "name: cm") {
		t.Fatalf("with KPTR_ALLOW_WASM: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// the wasm tier as the sandbox runs the wasm images too
	env["KPTR_SANDBOX"], env["KPTR_CACHE_DIR"] = "wasm", t.TempDir()
	code, stdout, stderr = runGenerateCmd(t, app, env)
	if code != 0 || !strings.Contains(stdout, "namespace: staging") {
		t.Fatalf("KPTR_SANDBOX=wasm: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// Every way of filling the cache ahead (kptr prewarm of a package or of an
// image, kptr cache pull --allow-alpha-wasm) leaves the module of a wasm
// image compiled, for Go's js/wasm modules in kpt's index format and in
// kpt's single-image format alike: the render that follows compiles
// nothing (wazero's compilation cache is left as it was, and the progress
// does not say "compiling"), where a render on an empty cache says it
// compiles.
func TestWarmingLeavesWasmCompiled(t *testing.T) {
	reg := registry.Start(t)
	mod := fnimage.WasmModule(t, "cat", "js")
	indexRef := reg.Addr + "/kpt-fn-demo/cat:v1"
	fnimage.PushIndex(t, fnimage.WasmIndex(t, mod, fnimage.PlatformJS), indexRef)
	singleRef := reg.Addr + "/kpt-fn-demo/cat-single:v1"
	fnimage.Push(t, fnimage.WasmImage(t, mod), singleRef)

	pkg := func(ref string) string {
		dir := t.TempDir()
		for name, body := range map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - image: " + ref + "\n      configMap:\n        namespace: staging\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	run := func(t *testing.T, cacheDir string, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		env := map[string]string{"KPTR_CACHE_DIR": cacheDir, "KPTR_PROGRESS": "plain", "HOME": t.TempDir()}
		g := newGlobals(nil, &out, &errb, envMap(env))
		if err := execIn(context.Background(), g, args...); err != nil {
			t.Fatalf("kptr %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return errb.String()
	}
	// compiled is wazero's compilation cache: each file and its modification time.
	compiled := func(cacheDir string) map[string]time.Time {
		files := map[string]time.Time{}
		_ = filepath.Walk(filepath.Join(cacheDir, "wasm"), func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				files[p] = info.ModTime()
			}
			return nil
		})
		return files
	}
	const notice = "compiling the wasm module of"

	cold := t.TempDir()
	if errs := run(t, cold, "fn", "render", pkg(indexRef), "--allow-alpha-wasm"); !strings.Contains(errs, notice+" "+indexRef) {
		t.Errorf("a render on an empty cache does not say it compiles:\n%s", errs)
	}

	for _, c := range []struct {
		name, ref string
		warm      func(cacheDir, pkgDir string) []string
	}{
		{"prewarm of a package, js/wasm index", indexRef, func(_, d string) []string { return []string{"prewarm", d, "--allow-alpha-wasm"} }},
		{"prewarm of an image, kpt's single-image format", singleRef, func(string, string) []string {
			return []string{"prewarm", "--image", singleRef, "--allow-alpha-wasm"}
		}},
		{"cache pull, js/wasm index", indexRef, func(string, string) []string { return []string{"cache", "pull", indexRef, "--allow-alpha-wasm"} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cacheDir, dir := t.TempDir(), pkg(c.ref)
			run(t, cacheDir, c.warm(cacheDir, dir)...)
			before := compiled(cacheDir)
			if len(before) == 0 {
				t.Fatal("nothing compiled into the cache's wasm/")
			}
			errs := run(t, cacheDir, "fn", "render", dir, "--allow-alpha-wasm")
			if strings.Contains(errs, notice) {
				t.Errorf("the render after warming compiles:\n%s", errs)
			}
			if after := compiled(cacheDir); !maps.Equal(before, after) {
				t.Errorf("the render changed the compiled code:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
