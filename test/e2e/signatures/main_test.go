// Package signatures is the end-to-end suite of kptr's signature policy
// (--signature-policy, containers-policy.json(5)): function images built,
// pushed to Debian's docker-registry and signed in cosign's formats with keys,
// a certificate authority and a transparency-log key the tests make
// (test/cosigner); then kptr renders, generates, pulls, exports and imports
// them, online and offline from the cache, as root and as uid 999 (the Argo
// CD sidecar: no capabilities, no_new_privs).
package signatures

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sidecarUID is the uid Argo CD's sidecar (and kptr's image) runs as.
const sidecarUID = 999

var binDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "kptr-signatures-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = d
	os.Chmod(d, 0o755)
	_, file, _, _ := runtime.Caller(0)
	// kptr and, beside it where kptr looks, its signature verifier
	for _, c := range []string{"kptr", "kptr-sigverify"} {
		b := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(d, c), "./cmd/"+c)
		b.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..")
		b.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := b.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", c, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// identity is who runs kptr.
type identity struct {
	name string
	uid  int // -1: the test's own user
}

// identities are root and the sidecar's uid when the suite runs as root,
// else the current user alone.
func identities() []identity {
	if os.Geteuid() == 0 {
		return []identity{{"root", -1}, {"uid999", sidecarUID}}
	}
	return []identity{{"user", -1}}
}

// world is one identity's directories: HOME, TMPDIR, a cache, and a base
// for packages and policy files, all owned by the identity.
type world struct {
	id                     identity
	base, home, tmp, cache string
}

func newWorld(t *testing.T, id identity) *world {
	t.Helper()
	base, err := os.MkdirTemp("", "kptr-signatures-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	w := &world{id: id, base: base}
	w.home, w.tmp, w.cache = w.dir(t, "home"), w.dir(t, "tmp"), w.dir(t, "cache")
	return w
}

// dir makes base/rel (0700) owned by the identity.
func (w *world) dir(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(w.base, rel)
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	w.own(t, p)
	return p
}

func (w *world) own(t *testing.T, p string) {
	t.Helper()
	if w.id.uid < 0 {
		return
	}
	err := filepath.Walk(p, func(q string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(q, w.id.uid, w.id.uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// write writes files under base/rel, owned by the identity, and returns the directory.
func (w *world) write(t *testing.T, rel string, files map[string]string) string {
	t.Helper()
	d := filepath.Join(w.base, rel)
	for name, content := range files {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.own(t, d)
	return d
}

type result struct {
	args           []string
	stdout, stderr string
	code           int
}

// kptr runs kptr as the identity with a minimal environment plus env.
func (w *world) kptr(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return w.kptrFrom(t, binDir, dir, env, args...)
}

// kptrFrom is kptr for the kptr installed in bin.
func (w *world) kptrFrom(t *testing.T, bin, dir string, env []string, args ...string) result {
	t.Helper()
	argv := append([]string{filepath.Join(bin, "kptr")}, args...)
	if w.id.uid >= 0 {
		argv = append([]string{"setpriv", "--reuid", fmt.Sprint(w.id.uid), "--regid", fmt.Sprint(w.id.uid),
			"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}, argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = w.base
	}
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + w.home, "TMPDIR=" + w.tmp,
		"KPTR_CACHE_DIR=" + w.cache, "KPTR_PROGRESS=none"}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{args: args, stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kptr %v: %v", args, err)
	}
	return r
}

func (r result) exits(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Errorf("kptr %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, code, r.stdout, r.stderr)
	}
	return r
}

func (r result) says(t *testing.T, parts ...string) result {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) && !strings.Contains(r.stdout, p) {
			t.Errorf("kptr %s: output lacks %q\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), p, r.stdout, r.stderr)
		}
	}
	return r
}
