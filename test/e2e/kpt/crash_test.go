package kpt

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A kill -9 during the in-place write never leaves a half-rewritten package:
// killed before the commit point, the package is untouched; killed after it
// (with the first file already renamed into place), the next kptr command on
// the package rolls the write forward to exactly the complete render.
func TestKillDuringWrite(t *testing.T) {
	files := map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: fx op=label key=rendered value=yes\n",
		"a.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"b.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
		"c.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
	}
	reference := newPkg(t, files)
	render(t, reference, nil)
	want := tree(t, reference)
	if !strings.Contains(want["a.yaml"], "rendered: 'yes'") {
		t.Fatalf("reference render did not render:\n%s", want["a.yaml"])
	}

	t.Run("before commit", func(t *testing.T) {
		pkg := newPkg(t, files)
		orig := tree(t, pkg)
		cmd := start(t, pkg, "KPTR_TEST_PAUSE_BEFORE_COMMIT=30s")
		waitFor(t, func() bool { n, _ := os.ReadDir(filepath.Join(pkg, ".kptr-tx", "data")); return len(n) == 4 })
		kill9(t, cmd)
		got := tree(t, pkg)
		for k := range got {
			if strings.HasPrefix(k, ".kptr-tx/") {
				delete(got, k)
			}
		}
		if !same(got, orig) {
			t.Fatalf("package changed although the process died before the commit point")
		}
		render(t, pkg, nil) // recovers (discards staging), then renders normally
		if !same(tree(t, pkg), want) {
			t.Fatal("render after recovery differs from the reference")
		}
	})

	t.Run("after commit", func(t *testing.T) {
		pkg := newPkg(t, files)
		cmd := start(t, pkg, "KPTR_TEST_PAUSE_AFTER_COMMIT=30s")
		waitFor(t, func() bool {
			_, j := os.Stat(filepath.Join(pkg, ".kptr-tx", "journal"))
			_, d := os.Stat(filepath.Join(pkg, ".kptr-tx", "data", "0"))
			return j == nil && os.IsNotExist(d)
		})
		kill9(t, cmd)
		got := tree(t, pkg)
		changed := 0
		for _, f := range []string{"Kptfile", "a.yaml", "b.yaml", "c.yaml"} {
			if got[f] == want[f] {
				changed++
			}
		}
		if changed != 1 {
			t.Fatalf("expected exactly one file renamed before the kill, got %d", changed)
		}
		// the next render finishes the interrupted write before reading the
		// package (-o stdout: it writes nothing itself)
		render(t, pkg, []string{"-o", "stdout"})
		if !same(tree(t, pkg), want) {
			t.Fatalf("after recovery the package differs from the complete render")
		}
	})
}

func newPkg(t *testing.T, files map[string]string) string {
	dir := filepath.Join(t.TempDir(), "pkg")
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func render(t *testing.T, pkg string, extra []string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(shared.binDir, "kptr"), append([]string{"fn", "render", "--allow-exec", pkg}, extra...)...)
	cmd.Env = shared.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render: %v\n%s", err, out)
	}
}

func start(t *testing.T, pkg, env string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(shared.binDir, "kptr"), "fn", "render", "--allow-exec", pkg)
	cmd.Env = append(append([]string{}, shared.env...), env)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func kill9(t *testing.T, cmd *exec.Cmd) {
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out waiting for the write to reach the crash point")
}

func tree(t *testing.T, dir string) map[string]string {
	out := map[string]string{}
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	return out
}

func same(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
