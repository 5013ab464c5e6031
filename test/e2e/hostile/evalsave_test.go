package hostile

import (
	"path/filepath"
	"testing"
	"time"
)

// fn eval --save writes one file, the package's Kptfile, and only after the
// function succeeded: a --fn-config reaching outside the package through
// "..", a failing function, and a Kptfile that does not decode leave every
// file where it was, with a one-line reason, in bounded time and memory.
func TestEvalSaveStaysInThePackage(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		h.sentinel(t, filepath.Join(h.base, "outside"))
		kf := "# keep me\napiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n"
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": kf,
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		before := tree(t, pkg)
		cfg := filepath.Join(pkg, "..", "outside", "config", "app.yaml")

		h.kptr(t, call{args: []string{"fn", "eval", pkg, "-s", "-t", "mutator", "--exec", "fx", "--fn-config", cfg}}).
			exits(t, 2).says(t, "--fn-config must be under", pkg).rssBelow(t, 512<<20).within(t, 30*time.Second)
		h.kptr(t, call{args: []string{"fn", "eval", pkg, "-s", "-t", "mutator", "--exec", "fx", "--", "op=crash", "code=3", "message=boom"}}).
			exits(t, 1).rssBelow(t, 512<<20)
		if d := diffSnapshots(before, tree(t, pkg)); d != "" {
			t.Errorf("a refused or failed --save changed the package:\n%s", d)
		}

		bad := h.pkg(t, "bad", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bad\nbogus: field\n",
		})
		r := h.kptr(t, call{args: []string{"fn", "eval", bad, "-s", "-t", "validator", "--exec", "fx op=count"}})
		r.exits(t, 0).says(t, "function not added: Kptfile not exists")
		if got := tree(t, bad)["Kptfile"]; got != "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bad\nbogus: field\n" {
			t.Errorf("an undecodable Kptfile was rewritten:\n%s", got)
		}

		h.kptr(t, call{args: []string{"fn", "eval", pkg, "-s", "-t", "validator", "--exec", "fx op=count"}}).exits(t, 0)
		if got := tree(t, pkg)["Kptfile"]; got != kf+"pipeline:\n  validators:\n    - exec: fx op=count\n" {
			t.Errorf("saved Kptfile:\n%s", got)
		}
		h.sentinelsUnchanged(t)
	})
}
