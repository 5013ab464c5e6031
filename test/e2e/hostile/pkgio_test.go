package hostile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Hostile packages against package file I/O (issue 9 items 1, 2, 3, 7, 8):
// what a package from someone else's Git repository carries never makes
// kptr touch a file outside it, print a file from outside it, quote a
// file's contents in an error, brick it for the next command, or lose a
// concurrent writer's change.

const labelKptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: fx op=label key=rendered value=yes\n"

func configMap(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// stateEnv gives the identity a private state directory for its journal
// key (kptr's default is $HOME/.local/state/kptr; HOME is a sentinel here).
func stateEnv(t *testing.T, h *harness) []string {
	return []string{"KPTR_STATE_DIR=" + h.dir(t, "state", 0o700)}
}

// A journal kptr did not write (carried by the package, as Git carries it)
// naming ../ and absolute destinations is never acted upon: an in-place
// render and eval refuse the package and change nothing, a render to stdout
// warns and goes on without it.
func TestForeignJournalNeverApplied(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		env := stateEnv(t, h)
		victim := filepath.Join(h.home, ".bashrc")
		rel, _ := filepath.Rel(filepath.Join(h.base, "pkg"), victim)
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile":          labelKptfile,
			"a.yaml":           configMap("a"),
			".kptr-tx/data/0":  "pwned\n",
			".kptr-tx/data/1":  "pwned\n",
			".kptr-tx/journal": fmt.Sprintf(`[{"src":"data/0","dst":%q},{"src":"data/1","dst":%q},{"dst":%q}]`, rel, victim, filepath.Join(h.home, ".ssh/id_ed25519")),
		})
		before := tree(t, pkg)
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--allow-exec", "-o", "stdout"}, env: env}).
			exits(t, 0).says(t, "[WARN]", ".kptr-tx/journal", "not written by kptr for this package")
		for _, args := range [][]string{
			{"fn", "render", pkg, "--allow-exec"},
			{"fn", "eval", pkg, "--exec", "fx op=label key=evaled value=yes"},
		} {
			h.kptr(t, call{args: args, env: env}).exits(t, 1).
				says(t, ".kptr-tx/journal", "not written by kptr for this package", "remove "+filepath.Join(pkg, ".kptr-tx"))
			if d := diffSnapshots(before, tree(t, pkg)); d != "" {
				t.Errorf("%v changed the package:\n%s", args, d)
			}
		}
		h.sentinelsUnchanged(t)
	})
}

// A journal kptr wrote for one package (killed after its commit point),
// copied into another (cp -r, a commit of a half-written package), is
// foreign there; the package it was written for still rolls it forward.
func TestJournalClonedFromAnotherPackage(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		env := stateEnv(t, h)
		files := map[string]string{"Kptfile": labelKptfile, "a.yaml": configMap("a"), "b.yaml": configMap("b")}
		src := h.pkg(t, "src", files)
		cmd := h.start(t, call{args: []string{"fn", "render", src, "--allow-exec"}, env: append(env, "KPTR_TEST_PAUSE_AFTER_COMMIT=30s")})
		waitUntil(t, func() bool {
			_, j := os.Stat(filepath.Join(src, ".kptr-tx", "journal"))
			_, d := os.Stat(filepath.Join(src, ".kptr-tx", "data", "0"))
			return j == nil && os.IsNotExist(d)
		})
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		dst := h.pkg(t, "dst", files)
		if err := os.CopyFS(filepath.Join(dst, ".kptr-tx"), os.DirFS(filepath.Join(src, ".kptr-tx"))); err != nil {
			t.Fatal(err)
		}
		h.own(t, dst)
		before := tree(t, dst)
		h.kptr(t, call{args: []string{"fn", "render", dst, "--allow-exec"}, env: env}).exits(t, 1).
			says(t, "not written by kptr for this package")
		if d := diffSnapshots(before, tree(t, dst)); d != "" {
			t.Errorf("the cloned journal changed the package:\n%s", d)
		}
		h.kptr(t, call{args: []string{"fn", "render", src, "--allow-exec", "-o", "stdout"}, env: env}).exits(t, 0)
		if _, err := os.Stat(filepath.Join(src, ".kptr-tx")); !os.IsNotExist(err) {
			t.Error("the package's own journal was not rolled forward")
		}
		for _, f := range []string{"a.yaml", "b.yaml"} {
			if !strings.Contains(tree(t, src)[f], "rendered: 'yes'") {
				t.Errorf("%s not rolled forward", f)
			}
		}
		h.sentinelsUnchanged(t)
	})
}

// Symbolic links that leave the package are never followed: a function
// writing through a linked directory fails naming its output path, a
// linked file is neither read, printed nor written through (its mode
// kept), and a linked non-YAML file's contents never reach an error line
// or the Kptfile status.
func TestSymlinksLeavingThePackage(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		env := stateEnv(t, h)
		out := h.sentinel(t, filepath.Join(h.base, "outside"))
		move := strings.Replace(labelKptfile, "op=label key=rendered value=yes", "op=move name=a path=link/x.yaml", 1)
		cases := []struct {
			name, kptfile, link, target string
			args                        []string
			says                        string
			code                        int // 0: 1, a function or package read failing as kpt's render fails
		}{
			{"function writes through a linked directory", move, "link", "config", []string{"fn", "render", "PKG", "--allow-exec"}, "link/x.yaml: symbolic link link leads outside the package", 0},
			{"linked file, render in place", labelKptfile, "secret.yaml", "config/app.yaml", []string{"fn", "render", "PKG", "--allow-exec"}, "secret.yaml: symbolic link to a location outside the package", 2},                    // a package file kptr refuses to read is an input error
			{"linked file, eval in place", labelKptfile, "secret.yaml", "config/app.yaml", []string{"fn", "eval", "PKG", "--exec", "fx op=label key=e value=y"}, "secret.yaml: symbolic link to a location outside the package", 2}, // a package file kptr refuses to read is an input error
			{"linked file, generate", labelKptfile, "secret.yaml", "config/app.yaml", []string{"generate", "PKG"}, "secret.yaml: symbolic link to a location outside the package", 2},                                               // a package file kptr refuses to read is an input error
			{"linked non-YAML file", labelKptfile, "passwd.yaml", "config/notes.txt", []string{"fn", "render", "PKG", "--allow-exec", "-o", "stdout"}, "passwd.yaml: symbolic link to a location outside the package", 2},           // a package file kptr refuses to read is an input error
			{"linked Kptfile", "", "Kptfile", "config/notes.txt", []string{"fn", "render", "PKG", "--allow-exec"}, "Kptfile: symbolic link to a location outside the package", 2},                                                   // an unreadable Kptfile is an input error
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				files := map[string]string{"a.yaml": configMap("a"), c.link: "->" + filepath.Join(out, c.target)}
				if c.kptfile != "" {
					files["Kptfile"] = c.kptfile
				}
				pkg := h.pkg(t, fmt.Sprintf("pkg%d", i), files)
				args := append([]string{}, c.args...)
				for j := range args {
					if args[j] == "PKG" {
						args[j] = pkg
					}
				}
				r := h.kptr(t, call{args: args, env: append(env, "KPTR_ALLOW_EXEC=true")})
				code := 1
				if c.code != 0 {
					code = c.code
				}
				r.exits(t, code).says(t, c.says).rssBelow(t, 256<<20).within(t, 30*time.Second).
					never(t, "sentinel-secret").never(t, "sentinel-password").never(t, "root:x:0:0")
				if strings.Contains(tree(t, pkg)["Kptfile"], "sentinel") {
					t.Error("the Kptfile status quotes an outside file")
				}
				h.sentinelsUnchanged(t)
			})
		}
	})
}

// A NUL byte in a function's output path is refused before anything is
// staged, and the package stays usable: the next command succeeds (before,
// the rename after the commit point failed, and every later command with it).
func TestNULInOutputPath(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		env := stateEnv(t, h)
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: ./nul.sh\n",
			"a.yaml":  configMap("a"),
			"nul.sh": "#!/bin/sh\ncat >/dev/null\ncat <<'EOF'\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n" +
				"- apiVersion: kpt.dev/v1\n  kind: Kptfile\n  metadata:\n    name: app\n    annotations:\n      config.kubernetes.io/path: Kptfile\n" +
				"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    annotations:\n      config.kubernetes.io/path: \"a\\0b.yaml\"\nEOF\n",
		})
		if err := os.Chmod(filepath.Join(pkg, "nul.sh"), 0o755); err != nil {
			t.Fatal(err)
		}
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--allow-exec"}, env: env, dir: pkg}).exits(t, 1).
			says(t, `"a\x00b.yaml" contains a control character`)
		if _, err := os.Lstat(filepath.Join(pkg, ".kptr-tx")); !os.IsNotExist(err) {
			t.Error("a write was staged")
		}
		h.kptr(t, call{args: []string{"fn", "eval", pkg, "--exec", "fx op=label key=after value=yes"}, env: env}).exits(t, 0)
		if !strings.Contains(tree(t, pkg)["a.yaml"], "after: 'yes'") {
			t.Error("the next command did not write the package")
		}
		h.sentinelsUnchanged(t)
	})
}

// Two writers of one package never lose a change: fn eval and fn render
// race on the same package 50 times; every time both exit 0 and the
// package holds both changes (the second writer waits for the first's lock).
func TestTwoWritersNeverLoseAChange(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		env := stateEnv(t, h)
		// a random pause of 0-70 ms varies which writer reads first
		slow := "#!/bin/sh\nsleep 0.0$(( $$ % 8 ))\nexec fx \"$@\"\n"
		for i := range 50 {
			pkg := h.pkg(t, fmt.Sprintf("race%d", i), map[string]string{
				"Kptfile": strings.Replace(labelKptfile, "exec: fx", "exec: ./slow-fx", 1),
				"a.yaml":  configMap("a"),
				"b.yaml":  configMap("b"),
				"slow-fx": slow,
			})
			if err := os.Chmod(filepath.Join(pkg, "slow-fx"), 0o755); err != nil {
				t.Fatal(err)
			}
			calls := []call{
				{args: []string{"fn", "eval", pkg, "--exec", filepath.Join(pkg, "slow-fx") + " op=label key=evaled value=yes"}, env: env, dir: pkg},
				{args: []string{"fn", "render", pkg, "--allow-exec"}, env: env, dir: pkg},
			}
			results := make([]*result, len(calls))
			var wg sync.WaitGroup
			for w, c := range calls {
				wg.Go(func() { results[w] = h.kptr(t, c) })
			}
			wg.Wait()
			for _, r := range results {
				r.exits(t, 0)
			}
			for _, f := range []string{"a.yaml", "b.yaml"} {
				got := tree(t, pkg)[f]
				if !strings.Contains(got, "rendered: 'yes'") || !strings.Contains(got, "evaled: 'yes'") {
					t.Fatalf("iteration %d: a change was lost in %s:\n%s", i, f, got)
				}
			}
		}
		h.sentinelsUnchanged(t)
	})
}

// start starts kptr as the harness's identity in the background, as kptr
// runs it, and kills its process group when the test ends.
func (h *harness) start(t *testing.T, c call) *exec.Cmd {
	t.Helper()
	argv := append([]string{filepath.Join(binDir, "kptr")}, c.args...)
	if h.id.uid >= 0 {
		argv = append([]string{"setpriv", "--reuid", fmt.Sprint(h.id.uid), "--regid", fmt.Sprint(h.id.uid),
			"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Dir = h.base
	cmd.Env = append([]string{
		"PATH=" + binDir + ":/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + h.home, "TMPDIR=" + h.tmp, "KPTR_CACHE_DIR=" + h.cache,
	}, c.env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	return cmd
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("timed out waiting for kptr to reach the crash point")
}

// A package 2,000 directories deep is read in linear time (issue 30: 1,000
// levels took 10.8 s of CPU in generate, 2,000 took 43.5 s, every lookup
// resolving its path from the package's root one directory at a time):
// render and generate find its deepest resource, each under 2 s of CPU
// (about 0.5 s measured, the rest is room for a loaded machine).
func TestDeepPackageTree(t *testing.T) {
	const levels = 2000
	forEachIdentity(t, func(t *testing.T, h *harness) {
		pkg := h.pkg(t, "deep", map[string]string{"Kptfile": plainKptfile, "cm.yaml": configMap("cm")})
		r, err := os.OpenRoot(pkg)
		if err != nil {
			t.Fatal(err)
		}
		// made from each parent's handle: by path, making the tree would
		// cost the test what the issue is about
		for i := 0; i < levels; i++ {
			if err := r.Mkdir("d", 0o755); err != nil {
				t.Fatal(err)
			}
			next, err := r.OpenRoot("d")
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			r = next
		}
		if err := r.WriteFile("deep.yaml", []byte(configMap("deep")), 0o644); err != nil {
			t.Fatal(err)
		}
		r.Close()
		h.own(t, pkg)
		for _, c := range []call{
			{args: []string{"fn", "render", pkg, "-o", "stdout"}},
			{args: []string{"generate"}, dir: pkg},
		} {
			c.timeout = 3 * time.Minute
			out := h.kptr(t, c).exits(t, 0).cpuBelow(t, 2*time.Second).rssBelow(t, 512<<20)
			if !strings.Contains(out.stdout, "name: deep") {
				t.Errorf("%s: the deepest directory's resource is missing:\n%s", strings.Join(c.args, " "), tail(out.stdout))
			}
		}
	})
}
