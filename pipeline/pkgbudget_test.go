package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageBudget (issue 21): a package over its byte or node budget, or
// holding an alias bomb, fails render and eval (in place, to stdout, in
// memory) with a PackageLimitError naming the file and the setting, exit
// code 2, before the file is decoded; the package's resources are untouched
// (in place, the Kptfile records the failure, as kpt's does). A package
// within the limits renders.
func TestPackageBudget(t *testing.T) {
	const kf = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n"
	keys := func(n int) string {
		var b strings.Builder
		b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
		for i := range n {
			b.WriteString("  k")
			b.WriteString(strings.Repeat("x", i%7))
			b.WriteString(string(rune('a'+i%26)) + "_" + itoa(i) + ": v\n")
		}
		return b.String()
	}
	bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\na: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
	lim := PackageLimits{MaxBytes: 100_000, MaxNodes: 5_000}
	for _, c := range []struct {
		name, file, content, what, setting string
	}{
		{"bytes", "big.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  k: " + strings.Repeat("x", 100_001) + "\n", "100000 bytes", "KPTR_PKG_MAX_BYTES"},
		{"nodes", "keys.yaml", keys(3_000), "5000 YAML nodes", "KPTR_PKG_MAX_NODES"},
		{"aliases", "lol.yaml", bomb, "5000 YAML nodes", "KPTR_PKG_MAX_NODES"},
		{"bytes over files", "sub/z.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: z\ndata:\n  k: " + strings.Repeat("y", 60_000) + "\n", "100000 bytes", "KPTR_PKG_MAX_BYTES"},
	} {
		for _, output := range []string{OutputInPlace, OutputStdout, OutputMemory} {
			t.Run(c.name+"/"+output, func(t *testing.T) {
				dir := t.TempDir()
				files := map[string]string{"Kptfile": kf, "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: " + strings.Repeat("y", 50_000) + "\n", c.file: c.content}
				if strings.HasPrefix(c.file, "sub/") {
					files["sub/Kptfile"] = strings.Replace(kf, "name: p", "name: sub", 1)
				}
				for rel, s := range files {
					os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755)
					if err := os.WriteFile(filepath.Join(dir, rel), []byte(s), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				before := readTreeFiles(t, dir)
				var out strings.Builder
				_, err := Render(context.Background(), dir, Options{Output: output, Stdout: &out, PkgLimits: lim})
				var over *PackageLimitError
				var pe *Error
				if !errors.As(err, &over) || !errors.As(err, &pe) || pe.ExitCode() != 2 {
					t.Fatalf("render: %v (%T); want a PackageLimitError, exit 2", err, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, filepath.Base(c.file)) || !strings.Contains(msg, c.what) || !strings.Contains(msg, c.setting) || strings.Contains(msg, "\n") && !strings.Contains(msg, "pkg.") {
					t.Fatalf("error %q; want it to name %s, %q and %s", msg, c.file, c.what, c.setting)
				}
				if after := readTreeFiles(t, dir); len(after) != len(before) {
					t.Fatalf("the package changed: %d files, were %d", len(after), len(before))
				}
				for rel, s := range before {
					// in place, kpt records the failure in the Kptfile's status
					if readTreeFiles(t, dir)[rel] != s && !(output == OutputInPlace && filepath.Base(rel) == "Kptfile") {
						t.Fatalf("%s changed", rel)
					}
				}
			})
		}
	}
	// eval reads through kyaml's reader: the same budget
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Kptfile"), []byte(kf), 0o644)
	os.WriteFile(filepath.Join(dir, "lol.yaml"), []byte(bomb), 0o644)
	_, err := Eval(context.Background(), dir, EvalFunction{Exec: "true"}, Options{Output: OutputStdout, Stdout: &strings.Builder{}, PkgLimits: lim, AllowExec: true}, nil)
	var over *PackageLimitError
	if !errors.As(err, &over) {
		t.Fatalf("eval of an alias bomb: %v", err)
	}
	// and a file over the node budget, counted before kyaml decodes it
	os.Remove(filepath.Join(dir, "lol.yaml"))
	os.WriteFile(filepath.Join(dir, "keys.yaml"), []byte(keys(3_000)), 0o644)
	_, err = Eval(context.Background(), dir, EvalFunction{Exec: "true"}, Options{Output: OutputStdout, Stdout: &strings.Builder{}, PkgLimits: lim, AllowExec: true}, nil)
	if !errors.As(err, &over) || over.What != "YAML nodes" {
		t.Fatalf("eval of a package over the node budget: %v", err)
	}
	// within the limits
	ok := t.TempDir()
	os.WriteFile(filepath.Join(ok, "Kptfile"), []byte(kf), 0o644)
	os.WriteFile(filepath.Join(ok, "keys.yaml"), []byte(keys(2_000)), 0o644)
	if _, err := Render(context.Background(), ok, Options{Output: OutputMemory, PkgLimits: lim}); err != nil {
		t.Fatalf("a package within the limits: %v", err)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func readTreeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			m[rel] = string(b)
		}
		return nil
	})
	return m
}
