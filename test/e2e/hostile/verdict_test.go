package hostile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sandbox probes' verdict is cached in the run-state directory
// (runtime/verdict.go, runtime/namespace/verdict.go). kptr trusts it only as the user's own private file:
// a verdict that is a symlink, readable by others or corrupt is ignored and
// replaced. A verdict that says the sandbox cannot run is never reused,
// not even the user's own (its cause may have passed): kptr probes again.
func TestProbeVerdictTrust(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		fn := h.importFixture(t, "hostile", []string{"cat"})
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - image: " + fn + "\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		render := call{args: []string{"fn", "render", pkg, "--offline", "--sandbox", "namespace"}}
		h.kptr(t, render).exits(t, 0)
		// one verdict per kptr build: probe-verdict-namespace-<build>.json
		found, _ := filepath.Glob(filepath.Join(h.stateDir(), "probe-verdict-namespace-*.json"))
		if len(found) != 1 {
			t.Fatalf("want one verdict cached after a run, found %v", found)
		}
		path := found[0]
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("no verdict cached after a run: %v", err)
		}
		// The same verdict (its key still matches) with a failed probe.
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		v["Results"] = []map[string]string{{"Name": "userns", "Status": "failed", "Detail": "forged", "Fix": "none"}}
		forged, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		place := func(t *testing.T, mode os.FileMode, link bool) {
			t.Helper()
			_ = os.Remove(path)
			target := path
			if link {
				target = filepath.Join(h.tmp, "forged-verdict.json")
				if err := os.Symlink(target, path); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(target, forged, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, mode); err != nil {
				t.Fatal(err)
			}
			if h.id.uid >= 0 {
				if err := os.Lchown(target, h.id.uid, h.id.uid); err != nil {
					t.Fatal(err)
				}
				if err := os.Lchown(path, h.id.uid, h.id.uid); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range []struct {
			name string
			mode os.FileMode
			link bool
		}{{"symlink", 0o600, true}, {"readable by others", 0o644, false}} {
			place(t, c.mode, c.link)
			h.kptr(t, render).exits(t, 0)
			if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: the verdict was not replaced by a private file: %v %v", c.name, fi, err)
			}
		}
		if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		h.kptr(t, render).exits(t, 0)

		place(t, 0o600, false)
		h.kptr(t, render).exits(t, 0)
		if b, err := os.ReadFile(path); err != nil || strings.Contains(string(b), "forged") {
			t.Errorf("the failed verdict was kept: %v", err)
		}
		h.kptr(t, call{args: []string{"doctor"}}).exits(t, 0)
		h.kptr(t, render).exits(t, 0)
		h.nothingOfRunsLeft(t, "")
	})
}
