package hostile

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hostile function output: what a function prints costs kptr memory in
// proportion to what kptr accepts, not to what the function makes it
// decode. A million results (35 MB), 200,000 small items (29 MB) or a
// billion laughs are refused before they are decoded (the aliases are
// measured, never expanded), with the function, the limit and its setting
// named, and the kptr process stays far below 1 GiB (before: 6.7 GB and
// 2.4 GB, and success). Through render, eval and Argo CD's generate, as root and
// as uid 999.
func TestFunctionOutputMemoryBounded(t *testing.T) {
	for _, tc := range []struct {
		mode, says string
	}{
		{"results 1000000", "output has more than 50000 results (KPTR_FN_MAX_RESULTS)"},
		{"items 200000", "output has more than 50000 items (KPTR_FN_MAX_ITEMS)"},
		{"laughs 9", "output has more than 4000000 YAML nodes (aliases expanded) (KPTR_FN_MAX_NODES)"},
	} {
		t.Run(strings.Fields(tc.mode)[0], func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, h *harness) {
				fn := "exec: hostile " + tc.mode
				pkg := h.pkg(t, "pkg", map[string]string{
					"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - " + fn + "\n",
					"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
				})
				h.sentinel(t, filepath.Join(h.base, "outside"))
				for _, c := range []call{
					{args: []string{"fn", "eval", pkg, "--exec", "hostile " + tc.mode, "-o", "stdout"}},
					{args: []string{"fn", "render", pkg, "--allow-exec"}},
					{args: []string{"generate"}, dir: pkg, env: []string{"KPTR_ALLOW_EXEC=true"}},
				} {
					c.timeout = 2 * time.Minute
					r := h.kptr(t, c)
					r.exits(t, 1).says(t, "hostile "+tc.mode, tc.says).rssBelow(t, 1<<30)
				}
				if got := tree(t, pkg)["cm.yaml"]; got != "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n" {
					t.Errorf("cm.yaml changed:\n%s", got)
				}
				h.sentinelsUnchanged(t)
			})
		})
	}
}

// TestFunctionStderrNeutralised: escape sequences a function prints on
// stderr or in a result (an OSC 52 clipboard write, cursor moves and a CR
// forging a [PASS] line, a bell) reach kptr's output made visible, never
// raw; results.yaml keeps the exact text.
func TestFunctionStderrNeutralised(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		results := h.dir(t, "results", 0o755)
		r := h.kptr(t, call{args: []string{"fn", "eval", pkg, "--exec", "hostile escapes", "-o", "stdout", "--results-dir", results}})
		r.exits(t, 0).says(t, "clipboard ^[]52;c;ZXZpbA==^G written").says(t, `progress 10%^M[PASS] "forged"`).
			says(t, "[info]: result ^[]52;c;ZXZpbA==^G done")
		for _, raw := range []string{"\x1b", "\x07", "\r"} {
			r.never(t, raw)
		}
		if got := tree(t, results)["results.yaml"]; !strings.Contains(got, `\e]52;c;ZXZpbA==\a written`) {
			t.Errorf("results.yaml does not keep the exact stderr:\n%s", got)
		}
		h.sentinelsUnchanged(t)
	})
}
