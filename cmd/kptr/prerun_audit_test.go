package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An unusable --results-dir fails render and eval before anything runs, with
// kpt's message, and the package stays untouched (render used to rewrite the
// package in place and only then fail to save the results).
func TestUnusableResultsDirLeavesThePackageUntouched(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - exec: sed -e s/name:\\ x/name:\\ y/\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	before := treeHash(t, dir)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(file, "results")
	want := "Error: cannot read or create results dir \"" + results + "\": mkdir " + file + ": not a directory \n"
	for _, tc := range []struct {
		argv []string
		code int
	}{
		{[]string{"kptr", "fn", "render", dir, "--allow-exec", "--results-dir", results}, exitUsage},
		{[]string{"kpt", "fn", "eval", dir, "--exec", "sed -e s/name:\\ x/name:\\ y/", "--results-dir", results}, 1},
	} {
		argv := tc.argv
		code, out, errs := runIn(t, argv...)
		if code != tc.code || out != "" || errs != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", argv[1:3], code, out, errs, want)
		}
		if treeHash(t, dir) != before {
			t.Fatalf("%v changed the package", argv[1:3])
		}
	}
	// A usable one is created up front and filled.
	ok := filepath.Join(t.TempDir(), "a", "b")
	if code, _, errs := runIn(t, "kptr", "fn", "render", dir, "--allow-exec", "--results-dir", ok); code != 0 {
		t.Fatalf("render: exit %d, %q", code, errs)
	}
	if b, err := os.ReadFile(filepath.Join(ok, "results.yaml")); err != nil || !strings.Contains(string(b), "FunctionResultList") {
		t.Errorf("results.yaml: %v %q", err, b)
	}
}
