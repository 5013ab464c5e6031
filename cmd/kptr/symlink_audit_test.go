package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// symlinkedTree writes a package with a subpackage under DIR/real and returns
// the path of a symlink DIR/link → real. Each package runs `exec: cat` (an
// identity function) and names an image in a validator-free mutator list.
func symlinkedTree(t *testing.T) (link, real string) {
	t.Helper()
	dir := t.TempDir()
	real = filepath.Join(dir, "real")
	kptfile := func(name string) string {
		return "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: " + name + "\npipeline:\n  mutators:\n  - exec: cat\n"
	}
	writeTree(t, real, map[string]string{
		"Kptfile":     kptfile("real"),
		"cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: top\n",
		"sub/Kptfile": strings.Replace(kptfile("sub"), "  - exec: cat\n", "  - exec: cat\n  - image: gcr.io/kpt-fn/set-labels:v0.1.5\n", 1),
		"sub/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nested\n",
	})
	link = filepath.Join(dir, "link")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	return link, real
}

// A package path that is a symlink is resolved as kpt resolves it (with kpt's
// warning): the package walk used to stop at the link, so render silently
// skipped every subpackage, prewarm found no image and generate lost the
// subpackages' resources.
func TestSymlinkedPackagePath(t *testing.T) {
	link, real := symlinkedTree(t)
	// render -o unwrap: nothing written; the subpackage's image is not cached,
	// so reaching it fails the render, which proves the subpackage was seen.
	code, out, errs := runIn(t, "kptr", "fn", "render", link, "--allow-exec", "-o", "unwrap", "--offline", "--cache-dir", t.TempDir())
	if !strings.HasPrefix(errs, "[WARN] resolved symlink \""+link+"\" to \""+real+"\", please note that the symlinks within the package are ignored\n") {
		t.Errorf("render: no kpt warning: %q", errs)
	}
	// (exit 3: the image could not be had offline, an environment error)
	if code != exitEnv || !strings.Contains(errs, "No such image: gcr.io/kpt-fn/set-labels:v0.1.5: image not known: not in the cache (offline)") || out != "" {
		t.Errorf("render: the subpackage was not rendered: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	refs, err := prewarmRefs([]string{link}, nil, "ghcr.io/kptdev/krm-functions-catalog/", nil)
	if err != nil || strings.Join(refs, ",") != "gcr.io/kpt-fn/set-labels:v0.1.5" {
		t.Errorf("prewarm: refs %v, %v", refs, err)
	}

	// generate: the subpackage (exec only here) contributes its resources.
	if err := os.WriteFile(filepath.Join(real, "sub", "Kptfile"), []byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\npipeline:\n  mutators:\n  - exec: cat\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var gout, gerr bytes.Buffer
	g := newGlobals(nil, &gout, &gerr, envMap(map[string]string{"KPTR_ALLOW_EXEC": "true", "KPTR_CACHE_DIR": t.TempDir()}))
	if err := execIn(t.Context(), g, "generate", link); err != nil || !strings.Contains(gout.String(), "name: nested") || !strings.Contains(gout.String(), "name: top") {
		t.Errorf("generate: %v, stdout %q, stderr %q", err, gout.String(), gerr.String())
	}
}

// As kpt resolves every package path before rendering, a missing one is the
// resolution's error ("Error: lstat PATH: no such file or directory").
func TestRenderOfAMissingPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	code, _, errs := runIn(t, "kpt", "fn", "render", missing)
	if code != 1 || errs != "Error: lstat "+missing+": no such file or directory \n" {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
