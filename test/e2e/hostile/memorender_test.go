package hostile

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
)

// A whole fn render replayed with memo on (cmd/kptr/memorender.go): a
// replay leaves exactly what a real render leaves (files and modes, stdout,
// stderr but for durations and the reuse marks, results), any change of
// what the render reads renders for real, failures are never recorded, and
// concurrent renders stay correct.

// wholeReplayed is the debug line of a whole replay.
const wholeReplayed = "replaying the recorded render of this unchanged package"

// replayPkg is a package with a subpackage, whose pipelines label, emit a
// result, write stderr, drop a resource (its file is removed) and move one
// to a new file; one file is mode 0600 (the commit keeps it).
func replayPkg(ref string) map[string]string {
	fn := func(cfg string) string { return "  - image: " + ref + "\n    configMap:\n" + cfg }
	return map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n" +
			fn("      op: label\n      key: app\n      value: web\n") +
			fn("      op: result\n      severity: info\n      message: looked\n") +
			fn("      op: stderr\n      message: said something\n") +
			fn("      op: delete\n      kind: ConfigMap\n      name: gone\n") +
			fn("      op: move\n      name: moved\n      path: new/moved.yaml\n"),
		"cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a # a comment\ndata:\n  k: v\n",
		"gone.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gone\n",
		"moved.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: moved\n",
		"secret.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: private\n",
		"sub/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub\npipeline:\n  mutators:\n" +
			fn("      op: label\n      key: tier\n      value: sub\n"),
		"sub/b.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
		"empty/.keep": "",
	}
}

// copyPkg makes a fresh copy of files at base/work/pkg, where every copy
// is (the functions see the package's path: a copy elsewhere is another
// input); secret.yaml is mode 0600.
func (h *harness) copyPkg(t *testing.T, files map[string]string) string {
	return h.copyPkgAt(t, "work", files)
}

// copyPkgAt is copyPkg at base/parent/pkg.
func (h *harness) copyPkgAt(t *testing.T, parent string, files map[string]string) string {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(h.base, parent)); err != nil {
		t.Fatal(err)
	}
	h.dir(t, parent, 0o755)
	p := h.pkg(t, filepath.Join(parent, "pkg"), files)
	if err := os.Chmod(filepath.Join(p, "secret.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	durations = regexp.MustCompile(`(?m)^\[PASS\] (".*") in [^ \n]+( \(cached result\))?$`)
	slogLines = regexp.MustCompile(`(?m)^time=.*\n`)
	labelled  = regexp.MustCompile(`app: '?web`)
)

// transcript is stderr without kptr's log lines, durations and reuse marks.
func transcript(s string) string {
	return durations.ReplaceAllString(slogLines.ReplaceAllString(s, ""), `[PASS] $1 in D`)
}

func TestMemoRenderReplaysAsARealRender(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		files := replayPkg(ref)
		fresh := func() string { return h.copyPkg(t, files) }
		for _, c := range []struct {
			name string
			args []string // after the package
		}{
			{"in place", nil},
			{"stdout", []string{"-o", "stdout"}},
			{"unwrap", []string{"-o", "unwrap"}},
			{"dir", []string{"-o", "OUT"}},
			{"in place, results", []string{"--results-dir", "RESULTS"}},
			{"unwrap, results", []string{"-o", "unwrap", "--results-dir", "RESULTS"}},
		} {
			run := func(memo string, debug bool) (*result, string, map[string]string) {
				pkg := fresh()
				// one output directory for every run: its path is in the transcript
				out := filepath.Join(h.base, "out")
				if err := os.RemoveAll(out); err != nil {
					t.Fatal(err)
				}
				h.dir(t, "out", 0o755)
				args := []string{"fn", "render", pkg, "--memo=" + memo}
				for _, a := range c.args {
					args = append(args, strings.NewReplacer("OUT", filepath.Join(out, "dir"), "RESULTS", filepath.Join(out, "results")).Replace(a))
				}
				env := []string{}
				if debug {
					env = append(env, "KPTR_LOG_LEVEL=debug")
				}
				r := h.kptr(t, call{args: args, env: env}).exits(t, 0)
				return r, pkg, snapshotFiles(t, pkg, out)
			}
			real, _, realFiles := run("off", false)
			first, _, _ := run("on", true)
			first.never(t, wholeReplayed)
			again, _, againFiles := run("on", true)
			again.says(t, wholeReplayed).says(t, `[PASS] "`+ref+`" in `, memoCached)
			if strings.Count(again.stderr, memoCached) != 6 {
				t.Errorf("%s: want all 6 functions marked as reused:\n%s", c.name, again.stderr)
			}
			if again.stdout != real.stdout {
				t.Errorf("%s: replayed stdout differs:\n%s\nreal:\n%s", c.name, again.stdout, real.stdout)
			}
			if got, want := transcript(again.stderr), transcript(real.stderr); got != want {
				t.Errorf("%s: replayed stderr differs:\n%s\nreal:\n%s", c.name, got, want)
			}
			if d := diffSnapshots(realFiles, againFiles); d != "" {
				t.Errorf("%s: replayed files differ from a real render's:\n%s", c.name, d)
			}
			if !labelled.MatchString(real.stdout + strings.Join(mapValues(realFiles), "")) {
				t.Errorf("%s: the render did nothing", c.name)
			}
		}
		h.sentinelsUnchanged(t)
	})
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// snapshotFiles is the package's and the output directory's snapshot, with
// file contents for a readable diff.
func snapshotFiles(t *testing.T, pkg, out string) map[string]string {
	t.Helper()
	s := map[string]string{}
	for prefix, dir := range map[string]string{"pkg": pkg, "out": out} {
		for rel, v := range snapshot(t, dir) {
			if strings.HasPrefix(v, "file ") {
				b, _ := os.ReadFile(filepath.Join(dir, rel))
				v += "\n" + string(b)
			}
			s[filepath.Join(prefix, rel)] = v
		}
	}
	return s
}

// TestMemoRenderKeysEveryInput: after a recorded render, a change of any
// input the render reads renders for real, as does memo off; an unchanged
// copy replays.
func TestMemoRenderKeysEveryInput(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		files := replayPkg(ref)
		fresh := func() string { return h.copyPkg(t, files) }
		render := func(pkg string, extra []string, env ...string) *result {
			args := append([]string{"fn", "render", pkg, "--memo=on"}, extra...)
			return h.kptr(t, call{args: args, env: append([]string{"KPTR_LOG_LEVEL=debug"}, env...)}).exits(t, 0)
		}
		render(fresh(), nil).never(t, wholeReplayed)
		render(fresh(), nil).says(t, wholeReplayed)
		p := func(pkg, rel string) string { return filepath.Join(pkg, rel) }
		for _, c := range []struct {
			name   string
			change func(pkg string) error
			args   []string
			env    []string
			asKpt  bool
		}{
			{name: "file content", change: func(pkg string) error {
				return os.WriteFile(p(pkg, "cm.yaml"), []byte(files["cm.yaml"]+"  k2: w\n"), 0o644)
			}},
			{name: "file mode", change: func(pkg string) error { return os.Chmod(p(pkg, "cm.yaml"), 0o640) }},
			{name: "new file", change: func(pkg string) error { return os.WriteFile(p(pkg, "notes.txt"), nil, 0o644) }},
			{name: "removed file", change: func(pkg string) error { return os.Remove(p(pkg, "sub/b.yaml")) }},
			{name: "renamed file", change: func(pkg string) error { return os.Rename(p(pkg, "cm.yaml"), p(pkg, "cm2.yaml")) }},
			{name: "new directory", change: func(pkg string) error { return os.Mkdir(p(pkg, "more"), 0o755) }},
			{name: "removed directory", change: func(pkg string) error { return os.RemoveAll(p(pkg, "empty")) }},
			{name: "renamed directory", change: func(pkg string) error { return os.Rename(p(pkg, "empty"), p(pkg, "full")) }},
			{name: "directory mode", change: func(pkg string) error { return os.Chmod(p(pkg, "empty"), 0o700) }},
			{name: "Kptfile", change: func(pkg string) error {
				return os.WriteFile(p(pkg, "Kptfile"), []byte(strings.Replace(files["Kptfile"], "value: web", "value: api", 1)), 0o644)
			}},
			{name: "-o stdout", args: []string{"-o", "stdout"}},
			{name: "--results-dir", args: []string{"--results-dir", "RESULTS"}},
			{name: "--image-prefix", args: []string{"--image-prefix", "example.test/"}},
			{name: "--fn-timeout", args: []string{"--fn-timeout", "1m"}},
			{name: "--sandbox", args: []string{"--sandbox", "namespace"}},
			{name: "--truncate-output", args: []string{"--truncate-output=false"}},
			{name: "KPTR_FN_MAX_OUTPUT", env: []string{"KPTR_FN_MAX_OUTPUT=1000000"}},
			{name: "KPTR_FN_MAX_ITEMS", env: []string{"KPTR_FN_MAX_ITEMS=1000"}},
			{name: "KPTR_OVERLAY", env: []string{"KPTR_OVERLAY=0"}},
			{name: "the kpt face", asKpt: true},
			{name: "the package's path", change: func(pkg string) error { return nil }},
			{name: "--memo=off", args: []string{"--memo=off"}},
		} {
			pkg := fresh()
			if c.name == "the package's path" {
				pkg = h.copyPkgAt(t, "elsewhere", files)
			}
			if c.change != nil {
				if err := c.change(pkg); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{}, c.args...)
			for i, a := range args {
				if a == "RESULTS" {
					args[i] = filepath.Join(h.dir(t, "results", 0o755), "r")
				}
			}
			var r *result
			if c.asKpt {
				r = h.kptr(t, call{args: []string{"fn", "render", pkg}, asKpt: true, env: []string{"KPTR_MEMO=on", "KPTR_LOG_LEVEL=debug"}}).exits(t, 0)
			} else {
				r = render(pkg, args, c.env...)
			}
			if strings.Contains(r.stderr, wholeReplayed) {
				t.Errorf("%s: replayed the render recorded before the change:\n%s", c.name, r.stderr)
			}
		}
		// invoked as kpt, a render replays the kpt face's own record (the
		// table's)
		h.kptr(t, call{args: []string{"fn", "render", fresh()}, asKpt: true, env: []string{"KPTR_MEMO=on", "KPTR_LOG_LEVEL=debug"}}).exits(t, 0).says(t, wholeReplayed)
		// the image behind the reference changes (another digest)
		h.importImage(t, ref, fnimage.Build(t, "kptr-fx", fnimage.WithEnv("CHANGED=1")))
		render(fresh(), nil).never(t, wholeReplayed)
		render(fresh(), nil).says(t, wholeReplayed)
		// an already rendered package is another input: rendered for real
		pkg := fresh()
		render(pkg, nil).says(t, wholeReplayed)
		render(pkg, nil).never(t, wholeReplayed)
		h.sentinelsUnchanged(t)
	})
}

// TestMemoRenderFailuresAndConcurrency: a failed render is not recorded, a
// package with a link is not memoised as a whole, and concurrent renders
// of the same package and of copies end as real renders do.
func TestMemoRenderFailuresAndConcurrency(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		files := replayPkg(ref)
		failing := map[string]string{}
		for k, v := range files {
			failing[k] = v
		}
		failing["Kptfile"] += "  - image: " + ref + "\n    configMap:\n      op: crash\n      code: \"3\"\n      message: broken\n"
		for range 2 {
			pkg := h.copyPkg(t, failing)
			before := tree(t, pkg)
			h.kptr(t, call{args: []string{"fn", "render", pkg, "--memo=on", "-o", "unwrap"}, env: []string{"KPTR_LOG_LEVEL=debug"}}).exits(t, 1).says(t, "broken").never(t, wholeReplayed)
			if d := diffSnapshots(before, tree(t, pkg)); d != "" {
				t.Errorf("a failed -o unwrap render changed the package:\n%s", d)
			}
		}
		// a link in the package: rendered for real every time
		linked := map[string]string{"link.yaml": "->cm.yaml"}
		for k, v := range files {
			linked[k] = v
		}
		for range 2 {
			pkg := h.copyPkg(t, linked)
			h.kptr(t, call{args: []string{"fn", "render", pkg, "--memo=on"}, env: []string{"KPTR_LOG_LEVEL=debug"}}).exits(t, 0).never(t, wholeReplayed)
		}

		// a real render's result, then concurrent renders: two of one
		// package (the second renders the first's output, which the
		// pipeline leaves unchanged), two of fresh copies (replays)
		realPkg := h.copyPkgAt(t, "real", files)
		h.kptr(t, call{args: []string{"fn", "render", realPkg, "--memo=off"}}).exits(t, 0)
		want := tree(t, realPkg)
		h.kptr(t, call{args: []string{"fn", "render", h.copyPkg(t, files), "--memo=on"}}).exits(t, 0)
		shared := h.copyPkg(t, files) // a replay, then a render of its output
		pkgs := []string{shared, shared, h.copyPkgAt(t, "other1", files), h.copyPkgAt(t, "other2", files)}
		var wg sync.WaitGroup
		results := make([]*result, len(pkgs))
		for i, pkg := range pkgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = h.kptr(t, call{args: []string{"fn", "render", pkg, "--memo=on"}})
			}()
		}
		wg.Wait()
		for i, r := range results {
			r.exits(t, 0)
			if d := diffSnapshots(want, tree(t, pkgs[i])); d != "" {
				t.Errorf("concurrent render %d of %s differs from a real render:\n%s", i, pkgs[i], d)
			}
		}
		h.sentinelsUnchanged(t)
	})
}
