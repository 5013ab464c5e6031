package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The harness itself: a benign render passes every check as every identity,
// and the sentinel check notices each kind of change a broken kptr could
// make (a rewrite, a chmod, a new file, a replaced link), so a case that
// relies on it cannot pass vacuously.
func TestHarness(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - exec: fx op=label key=tier value=web\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		outside := h.sentinel(t, filepath.Join(h.base, "outside"))
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--allow-exec"}}).exits(t, 0).rssBelow(t, 512<<20)
		if got := tree(t, pkg)["cm.yaml"]; !strings.Contains(got, "tier: 'web'") {
			t.Fatalf("render did not label the ConfigMap:\n%s", got)
		}
		h.sentinelsUnchanged(t)

		for name, change := range map[string]func(p string) error{
			"rewrite": func(p string) error { return os.WriteFile(filepath.Join(p, ".bashrc"), []byte("evil\n"), 0o644) },
			"chmod":   func(p string) error { return os.Chmod(filepath.Join(p, ".bashrc"), 0o777) },
			"add":     func(p string) error { return os.WriteFile(filepath.Join(p, "x.yaml"), nil, 0o644) },
			"relink": func(p string) error {
				os.Remove(filepath.Join(p, "config/app.yaml"))
				return os.Symlink("/etc/passwd", filepath.Join(p, "config/app.yaml"))
			},
		} {
			d := filepath.Join(h.base, "probe-"+name)
			if err := os.CopyFS(d, os.DirFS(outside)); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, d)
			if err := change(d); err != nil {
				t.Fatal(err)
			}
			if diffSnapshots(before, snapshot(t, d)) == "" {
				t.Errorf("the sentinel check missed a %s", name)
			}
		}
	})
}
