package hostile

import (
	"path/filepath"
	"testing"
	"time"
)

// The command line given what a user mistypes or misnames: a file or a
// missing directory as the package, a package that is a sentinel tree, an
// unknown flag, a non-tarball to import. Each is a one-line usage or input
// error (exit 2 as kptr, 1 with kpt's line as kpt), in bounded time and
// memory, and leaves every tree it was pointed at untouched (a file given
// as the package used to get as far as writing PKG/.kptr-tx before failing
// with "journal: not a directory").
func TestCommandLineMistakes(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile":         "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - exec: fx op=label key=tier value=web\n",
			"deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n",
		})
		h.sentinel(t, pkg)
		file := filepath.Join(pkg, "deployment.yaml")
		missing := filepath.Join(h.base, "missing")
		notes := filepath.Join(h.sentinel(t, filepath.Join(h.base, "outside")), "config", "notes.txt")
		for _, c := range []struct {
			args      []string
			kptr, kpt int
			line      []string
		}{
			{[]string{"fn", "render", file, "--allow-exec"}, 2, 1, []string{"Error: " + file + " is a file: fn render takes a package directory"}},
			{[]string{"fn", "eval", file, "--exec", "fx op=label key=a value=b"}, 2, 1, []string{"is a file: fn eval takes a package directory"}},
			{[]string{"fn", "render", missing}, 2, 1, []string{"Error: package " + missing + ": no such directory (fn render takes a package directory)"}},
			{[]string{"fn", "render", pkg, "--alow-exec"}, 2, 1, []string{"unknown flag: --alow-exec"}},
			{[]string{"cache", "import", notes}, 2, 1, nil},
			{[]string{"cache", "import", missing}, 2, 1, []string{"kptr cache import: source " + missing + ": no such file or directory"}},
		} {
			r := h.kptr(t, call{args: c.args, timeout: 30 * time.Second}).exits(t, c.kptr).within(t, 20*time.Second).rssBelow(t, 256<<20)
			if c.line != nil {
				r.says(t, c.line...)
			}
			h.kptr(t, call{args: c.args, asKpt: true, timeout: 30 * time.Second}).exits(t, c.kpt)
		}
		// the suggestion names the flag meant
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--alow-exec"}}).says(t, "kptr fn render: unknown flag: --alow-exec; did you mean --allow-exec?")
		h.sentinelsUnchanged(t)
	})
}
