package kpt

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Hostile packages (issue 9 items 1, 2, 3, 7, 8): what a package from
// someone else's Git repository carries never makes kptr touch a file
// outside it, print a file from outside it, quote a file's contents in an
// error, brick it for the next command, or lose a concurrent writer's change.

const hostileKptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: fx op=label key=rendered value=yes\n"

func hostileCM(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// kptr runs the built binary in dir with args; it returns stdout, stderr
// and the exit code.
func kptr(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(shared.binDir, "kptr"), args...)
	cmd.Env = shared.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// sentinel is a directory outside the package whose tree must not change.
func sentinel(t *testing.T, files map[string]string) (string, func(*testing.T)) {
	t.Helper()
	dir := newPkg(t, files)
	return dir, unchanged(t, dir)
}

// unchanged returns a check that dir's tree (modes and links included) is
// what it is now.
func unchanged(t *testing.T, dir string) func(*testing.T) {
	before := ltree(t, dir)
	return func(t *testing.T) {
		t.Helper()
		if after := ltree(t, dir); !same(after, before) {
			t.Fatalf("files outside the package changed:\nbefore %v\nafter  %v", before, after)
		}
	}
}

// ltree is tree with modes, symbolic links recorded, not followed.
func ltree(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			out[rel] = "-> " + target
			return nil
		}
		b, _ := os.ReadFile(p)
		out[rel] = fmt.Sprintf("%v %s", info.Mode(), b)
		return nil
	})
	return out
}

// A journal kptr did not write (here: carried by the package, as Git
// carries it, naming ../ and absolute destinations) is never acted upon:
// an in-place render and eval refuse the package and change nothing, a
// render to stdout goes on without it.
func TestHostileJournalIgnored(t *testing.T) {
	out, check := sentinel(t, map[string]string{"victim": "precious\n"})
	pkg := newPkg(t, map[string]string{
		"Kptfile":              hostileKptfile,
		"a.yaml":               hostileCM("a"),
		".kptr-tx/data/0":      "pwned\n",
		".kptr-tx/data/1":      "pwned\n",
		".kptr-tx/journal":     `[{"src":"data/0","dst":"../../` + filepath.Base(filepath.Dir(out)) + `/` + filepath.Base(out) + `/victim"},{"src":"data/1","dst":"` + filepath.Join(out, "victim") + `"},{"dst":"` + filepath.Join(out, "victim") + `"}]`,
		".kptr-tx/journal.tmp": "",
	})
	before := ltree(t, pkg)

	stdout, stderr, code := kptr(t, "fn", "render", "--allow-exec", pkg, "-o", "stdout")
	check(t)
	if code != 0 || !strings.Contains(stdout, "rendered: 'yes'") || !strings.Contains(stderr, "not written by kptr for this package") {
		t.Fatalf("render -o stdout: exit %d\n%s", code, stderr)
	}
	for _, args := range [][]string{
		{"fn", "render", "--allow-exec", pkg},
		{"fn", "eval", pkg, "--exec", "fx op=label key=evaled value=yes"},
	} {
		_, stderr, code = kptr(t, args...)
		check(t)
		if code == 0 || !strings.Contains(stderr, "not written by kptr for this package") || !strings.Contains(stderr, "remove "+filepath.Join(pkg, ".kptr-tx")) {
			t.Fatalf("%v: exit %d, want a refusal\n%s", args, code, stderr)
		}
		if !same(ltree(t, pkg), before) {
			t.Fatalf("%v changed the package", args)
		}
	}
}

// A journal kptr wrote for one package, copied into another (cp -r, a
// commit of a half-written package), is foreign there.
func TestJournalClonedFromAnotherPackage(t *testing.T) {
	files := map[string]string{"Kptfile": hostileKptfile, "a.yaml": hostileCM("a"), "b.yaml": hostileCM("b")}
	src := newPkg(t, files)
	cmd := start(t, src, "KPTR_TEST_PAUSE_AFTER_COMMIT=30s")
	waitFor(t, func() bool {
		_, j := os.Stat(filepath.Join(src, ".kptr-tx", "journal"))
		_, d := os.Stat(filepath.Join(src, ".kptr-tx", "data", "0"))
		return j == nil && os.IsNotExist(d)
	})
	kill9(t, cmd)
	dst := newPkg(t, files)
	if err := os.CopyFS(filepath.Join(dst, ".kptr-tx"), os.DirFS(filepath.Join(src, ".kptr-tx"))); err != nil {
		t.Fatal(err)
	}
	before := ltree(t, dst)
	_, stderr, code := kptr(t, "fn", "render", "--allow-exec", dst)
	if code == 0 || !strings.Contains(stderr, "not written by kptr for this package") || !same(ltree(t, dst), before) {
		t.Fatalf("cloned journal: exit %d\n%s", code, stderr)
	}
	// the package it was written for still rolls it forward
	if _, stderr, code := kptr(t, "fn", "render", "--allow-exec", src); code != 0 {
		t.Fatalf("own journal: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(src, ".kptr-tx")); !os.IsNotExist(err) {
		t.Fatal("own journal not rolled forward")
	}
}

// Symbolic links that leave the package are never followed: a function
// writing through a linked directory fails naming its path, a linked file
// is neither read, printed nor written through (mode kept), and a linked
// non-YAML file's contents never reach an error line.
func TestSymlinksOutOfPackage(t *testing.T) {
	const secret = "root:x:0:0:SECRET-LINE:/root:/bin/bash"
	out := newPkg(t, map[string]string{
		"dir/keep":    "keep\n",
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: outside-secret\n",
		"passwd":      secret + "\n",
	})
	if err := os.Chmod(filepath.Join(out, "secret.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := unchanged(t, out)

	cases := []struct {
		name    string
		kptfile string
		link    string // link name -> target under out
		target  string
		args    []string
		errLine string
	}{
		{"function writes through a linked directory", strings.Replace(hostileKptfile, "op=label key=rendered value=yes", "op=move name=a path=link/x.yaml", 1),
			"link", "dir", []string{"fn", "render", "--allow-exec"}, `"link/x.yaml"`},
		{"linked file in render", hostileKptfile, "secret.yaml", "secret.yaml", []string{"fn", "render", "--allow-exec"}, "secret.yaml: symbolic link to a location outside the package"},
		{"linked file in eval", hostileKptfile, "secret.yaml", "secret.yaml", []string{"fn", "eval", "--exec", "fx op=label key=e value=y"}, "secret.yaml: symbolic link to a location outside the package"},
		{"linked file in generate", hostileKptfile, "secret.yaml", "secret.yaml", []string{"generate"}, "secret.yaml: symbolic link to a location outside the package"},
		{"linked non-YAML file", hostileKptfile, "passwd.yaml", "passwd", []string{"fn", "render", "--allow-exec", "-o", "stdout"}, "passwd.yaml: symbolic link to a location outside the package"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pkg := newPkg(t, map[string]string{"Kptfile": c.kptfile, "a.yaml": hostileCM("a")})
			if err := os.Symlink(filepath.Join(out, c.target), filepath.Join(pkg, c.link)); err != nil {
				t.Fatal(err)
			}
			args := append([]string{}, c.args...)
			if args[0] == "generate" {
				args = append(args, pkg)
			} else {
				args = append(args[:2], append([]string{pkg}, args[2:]...)...)
			}
			env := shared.env
			if args[0] == "generate" {
				shared.env = append(append([]string{}, env...), "KPTR_ALLOW_EXEC=true")
			}
			stdout, stderr, code := kptr(t, args...)
			shared.env = env
			check(t)
			if code == 0 || !strings.Contains(stderr, c.errLine) {
				t.Fatalf("exit %d, want an error naming %s\n%s", code, c.errLine, stderr)
			}
			if strings.Contains(stdout+stderr, "outside-secret") || strings.Contains(stdout+stderr, "SECRET-LINE") {
				t.Fatalf("an outside file's contents were printed:\n%s\n%s", stdout, stderr)
			}
			if b, _ := os.ReadFile(filepath.Join(pkg, "Kptfile")); strings.Contains(string(b), "SECRET-LINE") {
				t.Fatalf("the Kptfile status quotes an outside file:\n%s", b)
			}
		})
	}
}

// A NUL byte in a function's output path is refused before anything is
// staged; the package stays usable (today's failure: the rename after the
// commit point failed, and every later command with it).
func TestNULPathLeavesPackageUsable(t *testing.T) {
	pkg := newPkg(t, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: ./nul.sh\n",
		"a.yaml":  hostileCM("a"),
		"nul.sh": "#!/bin/sh\ncat >/dev/null\ncat <<'EOF'\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n" +
			"- apiVersion: kpt.dev/v1\n  kind: Kptfile\n  metadata:\n    name: app\n    annotations:\n      config.kubernetes.io/path: Kptfile\n" +
			"- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    annotations:\n      config.kubernetes.io/path: \"a\\0b.yaml\"\nEOF\n",
	})
	if err := os.Chmod(filepath.Join(pkg, "nul.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(shared.binDir, "kptr"), "fn", "render", "--allow-exec", pkg)
	cmd.Env, cmd.Dir = shared.env, pkg
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), `"a\x00b.yaml" contains a control character`) {
		t.Fatalf("render: %v, want the path refused\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(pkg, ".kptr-tx")); !os.IsNotExist(err) {
		t.Fatal("a write was committed")
	}
	if _, stderr, code := kptr(t, "fn", "eval", pkg, "--exec", "fx op=label key=after value=yes"); code != 0 {
		t.Fatalf("the next command on the package failed: exit %d\n%s", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(pkg, "a.yaml")); !strings.Contains(string(b), "after: 'yes'") {
		t.Fatalf("the next command did not write:\n%s", b)
	}
}

// Two writers of one package never lose a change: fn eval and fn render
// race on the same package many times; every time both exit 0 and the
// package holds both changes.
func TestTwoWritersRace(t *testing.T) {
	const iterations = 50
	slowFx := "#!/bin/sh\nsleep 0.0$(( $$ % 8 ))\nexec fx \"$@\"\n"
	for i := range iterations {
		pkg := newPkg(t, map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: ./slow-fx op=label key=rendered value=yes\n",
			"a.yaml":  hostileCM("a"),
			"b.yaml":  hostileCM("b"),
			"slow-fx": slowFx,
		})
		if err := os.Chmod(filepath.Join(pkg, "slow-fx"), 0o755); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make([]string, 2)
		codes := make([]int, 2)
		for w, args := range [][]string{
			{"fn", "eval", pkg, "--exec", filepath.Join(pkg, "slow-fx") + " op=label key=evaled value=yes"},
			{"fn", "render", "--allow-exec", pkg},
		} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(filepath.Join(shared.binDir, "kptr"), args...)
				cmd.Env, cmd.Dir = shared.env, pkg
				b, err := cmd.CombinedOutput()
				results[w] = string(b)
				if ee, ok := err.(*exec.ExitError); ok {
					codes[w] = ee.ExitCode()
				} else if err != nil {
					codes[w] = -1
				}
			}()
		}
		wg.Wait()
		if codes[0] != 0 || codes[1] != 0 {
			t.Fatalf("iteration %d: exit codes eval %d render %d\n%s\n%s", i, codes[0], codes[1], results[0], results[1])
		}
		for _, f := range []string{"a.yaml", "b.yaml"} {
			b, _ := os.ReadFile(filepath.Join(pkg, f))
			if !strings.Contains(string(b), "rendered: 'yes'") || !strings.Contains(string(b), "evaled: 'yes'") {
				t.Fatalf("iteration %d: a change was lost in %s:\n%s", i, f, b)
			}
		}
	}
}
