package hostile

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Package files and function output cost kptr bounded memory (issue 21):
// package files are measured against a budget before they are decoded
// (KPTR_PKG_MAX_BYTES, 32 MiB; KPTR_PKG_MAX_NODES, 1,500,000), and a
// function's output is held once.

// bigFile writes a ConfigMap of size about n bytes: keys small keys, or
// (keys 0) one value of n bytes on a single line.
func bigFile(t *testing.T, path string, keys, valueLen int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprint(w, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n")
	if keys == 0 {
		fmt.Fprint(w, "  k: ")
		chunk := strings.Repeat("x", 1<<16)
		for n := valueLen; n > 0; n -= len(chunk) {
			w.WriteString(chunk[:min(n, len(chunk))])
		}
		w.WriteString("\n")
	}
	v := ""
	if keys > 0 {
		v = strings.Repeat("v", valueLen)
	}
	for i := range keys {
		fmt.Fprintf(w, "  k%d: %s\n", i, v)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

const plainKptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n"

// TestPackageMemoryBudget: 27 MB of 2 million small keys (1.13 GB in render,
// 1.23 GB in generate on 8b0215c), a 200 MB single line (1.0 GB) and an
// alias bomb fail render, eval and generate with one line naming the file and the
// setting, exit 2, at a small fraction of that; a package at both limits
// renders and generates under 1 GiB.
func TestPackageMemoryBudget(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		keys := h.pkg(t, "keys", map[string]string{"Kptfile": plainKptfile})
		bigFile(t, filepath.Join(keys, "cm.yaml"), 2_000_000, 1)
		line := h.pkg(t, "line", map[string]string{"Kptfile": plainKptfile})
		bigFile(t, filepath.Join(line, "cm.yaml"), 0, 200<<20)
		bomb := h.pkg(t, "bomb", map[string]string{"Kptfile": plainKptfile, "lol.yaml": laughs(9)})
		for _, c := range []struct{ pkg, setting string }{{keys, "KPTR_PKG_MAX_NODES"}, {line, "KPTR_PKG_MAX_BYTES"}, {bomb, "KPTR_PKG_MAX_NODES"}} {
			file := "cm.yaml"
			if c.pkg == bomb {
				file = "lol.yaml"
			}
			h.own(t, c.pkg)
			h.kptr(t, call{args: []string{"fn", "render", c.pkg, "-o", "stdout"}, discard: true}).
				exits(t, 2).says(t, file, "the package's files hold more than", c.setting).rssBelow(t, 256<<20)
			// eval measures an alias bomb over the whole tree it read: the
			// line names the package there, not the file
			evalNames := file
			if c.pkg == bomb {
				evalNames = c.pkg
			}
			h.kptr(t, call{args: []string{"fn", "eval", c.pkg, "--exec", "true", "-o", "stdout"}, discard: true}).
				exits(t, 2).says(t, evalNames, c.setting).rssBelow(t, 256<<20)
			r := h.kptr(t, call{args: []string{"generate"}, dir: c.pkg, discard: true}).
				exits(t, 2).says(t, file, c.setting).rssBelow(t, 256<<20)
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("generate: want one line, got\n%s", r.stderr)
			}
		}
		// at both limits: about 1,500,000 nodes in 32 MiB
		full := h.pkg(t, "full", map[string]string{"Kptfile": plainKptfile})
		bigFile(t, filepath.Join(full, "cm.yaml"), 749_900, 31)
		h.own(t, full)
		h.kptr(t, call{args: []string{"fn", "render", full, "-o", "stdout"}, timeout: 5 * time.Minute, discard: true}).exits(t, 0).rssBelow(t, 1<<30)
		h.kptr(t, call{args: []string{"generate"}, dir: full, timeout: 5 * time.Minute, discard: true}).exits(t, 0).rssBelow(t, 1<<30)
		h.sentinelsUnchanged(t)
	})
}

// laughs is a ConfigMap whose data expands to 10^levels values through
// aliases.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// TestOutputHeldOnce: a function writing 300 MiB to stdout (cap 256 MiB)
// fails at the cap with kptr holding the output once: 684 MB of kptr on
// 8b0215c (the runtime's doubling buffer held old and new arrays and the
// garbage of earlier sizes), now the cap plus kptr's own ~30 MB.
func TestOutputHeldOnce(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: hostile flood 314572800\n",
			"a.yaml":  configMap("a"),
		})
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--allow-exec", "-o", "stdout"}, discard: true}).
			exits(t, 1).says(t, "output limit exceeded", "268435456 bytes on stdout").rssBelow(t, 320<<20)
		h.sentinelsUnchanged(t)
	})
}

// One results budget for the whole render (issue 30 item 4): each of 40
// functions prints 45,000 results, under KPTR_FN_MAX_RESULTS, and kptr held
// them all (3.01 GB in fn render, 2.22 GB in generate, which never prints
// them). The function that takes the render past KPTR_MAX_RESULTS (100,000)
// fails with one line naming it and the setting, exit 1, under 1 GiB; a
// render just within the budget (90,000 results) writes them into the
// Kptfile's render status, and generate, which keeps only a failed
// function's results, under 1 GiB too.
func TestResultBudgetAcrossFunctions(t *testing.T) {
	validators := func(n int) string {
		return plainKptfile + "pipeline:\n  validators:\n" + strings.Repeat("    - exec: hostile results 45000\n", n)
	}
	forEachIdentity(t, func(t *testing.T, h *harness) {
		many := h.pkg(t, "many", map[string]string{"Kptfile": validators(40), "cm.yaml": configMap("cm")})
		within := h.pkg(t, "within", map[string]string{"Kptfile": validators(2), "cm.yaml": configMap("cm")})
		h.sentinel(t, filepath.Join(h.base, "outside"))
		for _, c := range []call{
			{args: []string{"fn", "render", many, "--allow-exec"}},
			{args: []string{"generate"}, dir: many, env: []string{"KPTR_ALLOW_EXEC=true"}},
		} {
			c.timeout, c.discard = 3*time.Minute, true
			r := h.kptr(t, c).exits(t, 1).says(t, "hostile results 45000", "over 100000 results in all (KPTR_MAX_RESULTS)").rssBelow(t, 1<<30)
			if c.args[0] == "generate" && strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("generate: want one line, got\n%s", tail(r.stderr))
			}
		}
		if got := tree(t, many)["cm.yaml"]; got != configMap("cm") {
			t.Errorf("cm.yaml changed:\n%s", got)
		}
		for _, c := range []call{
			{args: []string{"fn", "render", within, "--allow-exec"}},
			{args: []string{"generate"}, dir: within, env: []string{"KPTR_ALLOW_EXEC=true"}},
		} {
			c.timeout, c.discard = 3*time.Minute, true
			h.kptr(t, c).exits(t, 0).rssBelow(t, 1<<30)
		}
		if got := tree(t, within)["Kptfile"]; strings.Count(got, "message: m") != 90_000 {
			t.Errorf("the render status holds %d results, want 90000", strings.Count(got, "message: m"))
		}
		h.sentinelsUnchanged(t)
	})
}
