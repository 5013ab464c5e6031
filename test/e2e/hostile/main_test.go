// Package hostile is kptr's hostile-input suite: packages, function output,
// function processes and registries written by an attacker, each run
// through the real kptr binary as root and as the Argo CD sidecar runs it
// (uid 999, no capabilities, no_new_privs). Every case asserts that nothing
// outside its lane changed (sentinel trees beside the package and the
// cache), the error line, the exit code, the peak RSS of the kptr process
// and that it ended in bounded time.
//
//	forEachIdentity(t, func(t *testing.T, h *harness) {
//		pkg := h.pkg(t, map[string]string{"Kptfile": ..., "a.yaml": ...})
//		r := h.kptr(t, call{args: []string{"fn", "render", pkg}})
//		r.exits(t, 1).says(t, "cannot write outside the package").rssBelow(t, 1<<30)
//		h.sentinelsUnchanged(t)
//	})
//
// Cases of one boundary live in one file (packages_test.go, output_test.go,
// process_test.go, registry_test.go); helpers every case needs live here.
package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sidecarUID is the uid Argo CD's sidecar (and kptr's image) runs as.
const sidecarUID = 999

// binDir holds kptr, its `kpt` link and the fixture functions, readable by
// every identity; it is on PATH for exec functions.
var binDir string

// fixtures are the function binaries built for exec: functions, by name on PATH.
var fixtures = map[string]string{
	"fx":      "kptr-fx",
	"hostile": "hostile",
}

func TestMain(m *testing.M) {
	code, err := setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile suite setup:", err)
		os.Exit(1)
	}
	code = m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

func setup() (int, error) {
	d, err := os.MkdirTemp("", "kptr-hostile-bin-")
	if err != nil {
		return 0, err
	}
	binDir = d
	if err := os.Chmod(d, 0o755); err != nil {
		return 0, err
	}
	repo := repoRoot()
	if err := goBuild(repo, filepath.Join(d, "kptr"), "./cmd/kptr", "CGO_ENABLED=1"); err != nil {
		return 0, err
	}
	for name, pkg := range fixtures {
		if err := goBuild(repo, filepath.Join(d, name), "./test/fixtures/"+pkg, "CGO_ENABLED=0"); err != nil {
			return 0, err
		}
	}
	if err := goBuild(repo, filepath.Join(d, "seccompexec"), "./test/e2e/argocd/seccompexec", "CGO_ENABLED=1"); err != nil {
		return 0, err
	}
	return 0, os.Symlink(filepath.Join(d, "kptr"), filepath.Join(d, "kpt"))
}

func goBuild(repo, out, pkg, cgo string) error {
	b := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	b.Dir = repo
	b.Env = append(os.Environ(), cgo)
	if o, err := b.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, o)
	}
	return nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// identity is who runs kptr in a case.
type identity struct {
	name string
	uid  int // -1: the test's own user
}

// profiles maps an identity's name to the seccomp profile (JSON, as a
// kubelet reads it) kptr runs under as that identity, loaded by
// test/e2e/argocd/seccompexec.
var profiles = map[string]string{"uid999-runtimedefault": runtimeDefault}

// runtimeDefault is containerd's (and Docker's) default seccomp profile:
// what a pod with seccompProfile RuntimeDefault gets on containerd, Argo
// CD's own setting for the repo server (sources in its directory's
// SOURCES.md).
var runtimeDefault = filepath.Join(repoRoot(), "test/e2e/argocd/testdata/runtime-default/containerd-docker-default.json")

// sidecarIdentities are identities() and, as root, the Argo CD sidecar as
// it runs under RuntimeDefault on containerd: uid 999, no capabilities,
// no_new_privs and containerd's default seccomp profile (kptr runs its
// landlock tier there).
func sidecarIdentities() []identity {
	ids := identities()
	if os.Geteuid() == 0 {
		ids = append(ids, identity{"uid999-runtimedefault", sidecarUID})
	}
	return ids
}

// identities are root and the sidecar's uid when the suite runs as root,
// else the current user alone (the uid-999 half then runs in CI, as root).
func identities() []identity {
	if os.Geteuid() == 0 {
		return []identity{{"root", -1}, {"uid999", sidecarUID}}
	}
	return []identity{{"user", -1}}
}

// harness is one identity's world for one case: a base directory readable
// by that identity with its own HOME, TMPDIR, cache, the packages the case
// makes, and sentinel trees that must stay unchanged.
type harness struct {
	id        identity
	base      string
	home      string
	tmp       string
	cache     string
	state     string
	sentinels map[string]map[string]string // dir → snapshot taken when made
}

// forEachIdentity runs body once per identity, each with a fresh harness.
func forEachIdentity(t *testing.T, body func(t *testing.T, h *harness)) {
	t.Helper()
	forIdentities(t, identities(), body)
}

// forIdentities is forEachIdentity for the given identities.
func forIdentities(t *testing.T, ids []identity, body func(t *testing.T, h *harness)) {
	t.Helper()
	for _, id := range ids {
		t.Run(id.name, func(t *testing.T) {
			body(t, newHarness(t, id))
		})
	}
}

func newHarness(t *testing.T, id identity) *harness {
	t.Helper()
	base, err := os.MkdirTemp("", "kptr-hostile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &harness{id: id, base: base, sentinels: map[string]map[string]string{}}
	h.home = h.dir(t, "home", 0o700)
	h.tmp = h.dir(t, "tmp", 0o700)
	h.cache = h.dir(t, "cache", 0o700)
	h.state = h.dir(t, "state", 0o700)
	// The home directory is the classic target (.bashrc, .ssh): guard it.
	h.sentinel(t, h.home)
	return h
}

// dir makes base/rel owned by the identity, with mode.
func (h *harness) dir(t *testing.T, rel string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(h.base, rel)
	if err := os.MkdirAll(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	h.own(t, p)
	return p
}

// own gives p (a tree) to the identity, so that a broken kptr running as
// that identity could change it: a sentinel nobody can write proves nothing.
func (h *harness) own(t *testing.T, p string) {
	t.Helper()
	if h.id.uid < 0 {
		return
	}
	err := filepath.Walk(p, func(q string, _ fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(q, h.id.uid, h.id.uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// write creates files (relative path → content) under dir, owned by the
// identity. A content "->target" makes a symlink to target instead.
func (h *harness) write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.own(t, dir)
}

// pkg makes a package directory named name under base with files.
func (h *harness) pkg(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	p := h.dir(t, name, 0o755)
	h.write(t, p, files)
	return p
}

// sentinel fills dir (made if missing) with a few files an attacker would
// want (a shell rc, a key, a nested config) unless it has some already, and
// records its snapshot; sentinelsUnchanged compares every sentinel with it.
func (h *harness) sentinel(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) == 0 {
		h.write(t, dir, map[string]string{
			".bashrc":          "# sentinel: must never change\n",
			".ssh/id_ed25519":  "sentinel private key\n",
			"config/app.yaml":  "apiVersion: v1\nkind: Secret\nmetadata:\n  name: sentinel-secret\nstringData:\n  password: sentinel-password\n",
			"config/notes.txt": "root:x:0:0:sentinel:/root:/bin/sh\n",
		})
	}
	h.own(t, dir)
	h.sentinels[dir] = snapshot(t, dir)
	return dir
}

// sentinelsUnchanged fails the test if any sentinel tree changed: a file
// added, removed, rewritten, re-moded or re-linked.
func (h *harness) sentinelsUnchanged(t *testing.T) {
	t.Helper()
	for dir, want := range h.sentinels {
		got := snapshot(t, dir)
		if d := diffSnapshots(want, got); d != "" {
			t.Errorf("sentinel tree %s changed:\n%s", dir, d)
		}
	}
}

// snapshot maps each path under dir to its type, mode and content hash (a
// symlink: its target).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	s := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			s[rel] = "link " + target
		case fi.IsDir():
			s[rel] = fmt.Sprintf("dir %v", fi.Mode())
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			s[rel] = fmt.Sprintf("file %v %s", fi.Mode(), hex.EncodeToString(sum[:8]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func diffSnapshots(want, got map[string]string) string {
	var lines []string
	for k, w := range want {
		if g, ok := got[k]; !ok {
			lines = append(lines, "  removed "+k)
		} else if g != w {
			lines = append(lines, fmt.Sprintf("  changed %s: %s -> %s", k, w, g))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, "  added "+k)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// tree reads every regular file under dir (relative path → content), to
// compare a package before and after a command.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for rel, v := range snapshot(t, dir) {
		if strings.HasPrefix(v, "file ") {
			b, _ := os.ReadFile(filepath.Join(dir, rel))
			m[rel] = string(b)
		} else if rel != "." {
			m[rel] = v
		}
	}
	return m
}

// call is one kptr invocation.
type call struct {
	args    []string
	env     []string      // added to the minimal environment
	stdin   string        // piped to kptr
	dir     string        // working directory (default: base)
	timeout time.Duration // the case's time bound (default 60s)
	asKpt   bool          // invoke through the `kpt` link
	// killWhen, if set, is polled while kptr runs: once true, kptr (its
	// process alone, as Argo CD does at its deadline) is SIGKILLed.
	killWhen func() bool
	// killWith is the signal killWhen sends (default SIGKILL; SIGINT is
	// the user's Ctrl-C)
	killWith syscall.Signal
	// discard drops stdout instead of keeping it: a large output kept here
	// grows the test process, and a child started by vfork inherits the
	// parent's peak RSS as its own at exec (so every later rssBelow would
	// measure the test, not kptr)
	discard bool
}

// result is what one kptr run did.
type result struct {
	argv           []string
	stdout, stderr string
	code           int
	maxRSS         int64         // peak resident set of the kptr process (and its waited children), bytes
	cpu            time.Duration // user and system CPU time of the kptr process (and its waited children)
	elapsed        time.Duration
}

// kptr runs kptr as the harness's identity with a minimal environment (PATH
// with the fixtures, HOME, TMPDIR, KPTR_CACHE_DIR), and fails the case if it
// does not end within the call's time bound.
func (h *harness) kptr(t *testing.T, c call) *result {
	t.Helper()
	bin := filepath.Join(binDir, "kptr")
	if c.asKpt {
		bin = filepath.Join(binDir, "kpt")
	}
	argv := append([]string{bin}, c.args...)
	if p := profiles[h.id.name]; p != "" {
		argv = append([]string{filepath.Join(binDir, "seccompexec"), p}, argv...)
	}
	if h.id.uid >= 0 {
		argv = append([]string{"setpriv", "--reuid", fmt.Sprint(h.id.uid), "--regid", fmt.Sprint(h.id.uid),
			"--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}, argv...)
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Dir = c.dir
	if cmd.Dir == "" {
		cmd.Dir = h.base
	}
	cmd.Env = append([]string{
		"PATH=" + binDir + ":/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + h.home, "TMPDIR=" + h.tmp, "KPTR_CACHE_DIR=" + h.cache,
		// kptr's own state (the journal key) is not an attack on HOME
		"XDG_STATE_HOME=" + h.state,
	}, c.env...)
	cmd.Stdin = strings.NewReader(c.stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if c.discard {
		cmd.Stdout = io.Discard
	}
	start := time.Now()
	err := cmd.Start()
	if err == nil && c.killWhen != nil {
		killed := make(chan struct{})
		defer close(killed)
		go func() {
			for !c.killWhen() {
				select {
				case <-killed:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			sig := c.killWith
			if sig == 0 {
				sig = syscall.SIGKILL
			}
			_ = cmd.Process.Signal(sig)
		}()
	}
	if err == nil {
		err = cmd.Wait()
	}
	r := &result{argv: argv, stdout: o.String(), stderr: e.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("%s did not end within %s (killed)\nstderr:\n%s", strings.Join(c.args, " "), timeout, tail(r.stderr))
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	t.Logf("%s: exit %d in %s (CPU %s), peak RSS %d MiB", strings.Join(c.args, " "), r.code, r.elapsed.Round(time.Millisecond), r.cpu.Round(time.Millisecond), r.maxRSS>>20)
	return r
}

// exits asserts the exit code.
func (r *result) exits(t *testing.T, code int) *result {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, tail(r.stdout), tail(r.stderr))
	}
	return r
}

// says asserts that one line of stderr contains every part (the one-line
// error a user or Argo CD's UI sees).
func (r *result) says(t *testing.T, parts ...string) *result {
	t.Helper()
	for _, line := range strings.Split(r.stderr, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return r
		}
	}
	t.Errorf("no stderr line contains all of %q\nstderr:\n%s", parts, tail(r.stderr))
	return r
}

// never asserts that neither stdout nor stderr contains s (a secret, a
// file's contents, an escape sequence).
func (r *result) never(t *testing.T, s string) *result {
	t.Helper()
	if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
		t.Errorf("output contains %q\nstdout:\n%s\nstderr:\n%s", s, tail(r.stdout), tail(r.stderr))
	}
	return r
}

// rssBelow asserts the peak RSS of the kptr process.
func (r *result) rssBelow(t *testing.T, limit int64) *result {
	t.Helper()
	if r.maxRSS >= limit {
		t.Errorf("peak RSS %d MiB, want below %d MiB", r.maxRSS>>20, limit>>20)
	}
	return r
}

// cpuBelow asserts the CPU time kptr spent (user and system): unlike the
// wall time, what other processes on the machine do barely changes it.
func (r *result) cpuBelow(t *testing.T, d time.Duration) *result {
	t.Helper()
	if r.cpu >= d {
		t.Errorf("%s of CPU, want below %s", r.cpu.Round(time.Millisecond), d)
	}
	return r
}

// within asserts the wall time (the hard bound is the call's timeout).
func (r *result) within(t *testing.T, d time.Duration) *result {
	t.Helper()
	if r.elapsed > d {
		t.Errorf("took %s, want at most %s", r.elapsed.Round(time.Millisecond), d)
	}
	return r
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
