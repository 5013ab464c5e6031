package namespace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/internal/runtimetest"
)

// the shared state-directory checks (runtime/internal/runtimetest)
func privateDir(t *testing.T, name string) string { return runtimetest.PrivateDir(t, testTmp, name) }

var (
	needsMappedRoot    = runtimetest.NeedsMappedRoot
	assertStateDirSafe = runtimetest.AssertStateDirSafe
)

// As root, a private $TMPDIR (or $XDG_RUNTIME_DIR) used to break every
// namespace-tier run: the function's mapped uid could not traverse it to the
// run's overlay and root, while the probe (as root) passed. Runs must work.
func TestPrivateStateParentNamespaceTier(t *testing.T) {
	needsMappedRoot(t)
	for _, c := range []struct{ name, env string }{{"TMPDIR", "TMPDIR"}, {"XDG_RUNTIME_DIR", "XDG_RUNTIME_DIR"}} {
		t.Run(c.name, func(t *testing.T) {
			priv := privateDir(t, "private-"+c.name)
			t.Setenv("XDG_RUNTIME_DIR", "")
			t.Setenv(c.env, priv)
			s, err := New(runtime.WithProbeCache(false))
			if err != nil {
				t.Fatalf("New with a private %s: %v", c.env, err)
			}
			defer s.Close()
			assertStateDirSafe(t, s.stateDir, priv)
			bothRootfs(t, func(t *testing.T, rootfs string) {
				b := testBundle(t, "write", "/tmp/x", "/newfile")
				b.Rootfs = rootfs
				res, err := s.Run(context.Background(), b, runtime.Invocation{})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("run with a private %s: %v exit %d stderr %q", c.env, err, res.ExitCode, res.Stderr)
				}
			})
		})
	}
}

// Where no directory the uids functions run as can reach is available, the
// namespace tier's probes fail (the landlock tier's test is its own) on the state directory and name the fix, New
// refuses, and a verdict cached while the directory was
// reachable is not reused once it is not: a run never fails where the probe
// passed.
func TestUnreachableStateDirFailsAtProbe(t *testing.T) {
	needsMappedRoot(t)
	priv := privateDir(t, "unreachable-TMPDIR")
	saved := runtime.RootStateDirs
	runtime.RootStateDirs = []string{filepath.Join(privateDir(t, "unreachable-run"), "kptr"), filepath.Join(privateDir(t, "unreachable-tmp"), "kptr-run-")}
	t.Cleanup(func() { runtime.RootStateDirs = saved })
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", priv)

	// Reachable first: the verdict is cached in $TMPDIR/kptr-run-0.
	must(t, os.Chmod(priv, 0o755))
	ProbeCached(true)
	if !fileExists(runtime.VerdictPath(verdictNamespace, runtime.DefaultStateDir())) {
		t.Fatalf("no verdict cached in %s", runtime.DefaultStateDir())
	}
	must(t, os.Chmod(priv, 0o700))
	if dir := runtime.DefaultStateDir(); filepath.Dir(dir) != priv {
		t.Fatalf("state dir %s, want the usual one below %s when nothing is reachable", dir, priv)
	}

	results, _, cached := ProbeCached(false)
	if cached {
		t.Error("the verdict cached while the state dir was reachable was reused")
	}
	assertStateDirFailed(t, "namespace", results, priv)
	_, err := New()
	var pe *runtime.ProbeError
	if !errors.As(err, &pe) || pe.Result.Name != "statedir" {
		t.Errorf("New: %v, want the statedir probe's failure", err)
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

func assertStateDirFailed(t *testing.T, tier string, results []runtime.ProbeResult, gate string) {
	t.Helper()
	for _, r := range results {
		if r.Name == "statedir" {
			if r.Status != runtime.StatusFailed || !strings.Contains(r.Detail, gate+" is not traversable") || !strings.Contains(r.Fix, "TMPDIR") {
				t.Errorf("%s tier: statedir probe %+v, want failed, naming %s, with the fix", tier, r, gate)
			}
			return
		}
	}
	t.Errorf("%s tier: no statedir probe in %+v", tier, results)
}

// EnsurePrivateDir makes a directory only kptr's uid may list or write, and
// refuses a link or a directory of another uid in its place (a shared /tmp
// lets anyone create either first).
func TestEnsurePrivateDir(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	must(t, os.Mkdir(target, 0o755))
	must(t, os.Symlink(target, filepath.Join(base, "link")))
	type dirCase struct {
		name string
		ok   bool
	}
	cases := []dirCase{{"new", true}, {"target", true}, {"link", false}}
	foreign := filepath.Join(base, "foreign")
	must(t, os.Mkdir(foreign, 0o700))
	must(t, os.Chmod(foreign, 0o777))
	if os.Chown(foreign, os.Geteuid()+1, -1) == nil { // root only
		cases = append(cases, dirCase{"foreign", false})
	}
	for _, c := range cases {
		err := runtime.EnsurePrivateDir(filepath.Join(base, c.name))
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
	for _, d := range []string{"new", "target"} {
		fi, err := os.Lstat(filepath.Join(base, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o711 {
			t.Errorf("%s: %v %v, want a 0711 directory", d, fi.Mode(), err)
		}
	}
	if fi, _ := os.Stat(foreign); fi.Mode().Perm() != 0o777 {
		t.Errorf("foreign directory changed to %v", fi.Mode())
	}
}

// As root, StateDirFor passes over private parents and a name another user
// took first (a link or a directory of theirs in a shared /tmp).
func TestStateDirForSkipsTaken(t *testing.T) {
	needsMappedRoot(t)
	priv := privateDir(t, "choice-TMPDIR")
	shared := filepath.Join(testTmp, "choice-shared")
	must(t, os.Mkdir(shared, 0o755))
	t.Cleanup(func() { runtime.RemoveTree(shared) })
	own := filepath.Join(testTmp, "choice-own")
	must(t, os.Mkdir(own, 0o755))
	t.Cleanup(func() { runtime.RemoveTree(own) })
	saved := runtime.RootStateDirs
	runtime.RootStateDirs = []string{filepath.Join(shared, "kptr-run-"), filepath.Join(own, "kptr")}
	t.Cleanup(func() { runtime.RootStateDirs = saved })

	taken := filepath.Join(shared, "kptr-run-0")
	if got := runtime.StateDirFor("", priv, true); got != taken {
		t.Errorf("free: state dir %s, want %s", got, taken)
	}
	must(t, os.Symlink(own, taken))
	if got := runtime.StateDirFor(priv, priv, true); got != filepath.Join(own, "kptr") {
		t.Errorf("link in the way: state dir %s, want %s", got, filepath.Join(own, "kptr"))
	}
	must(t, os.Remove(taken))
	must(t, os.Mkdir(taken, 0o700))
	must(t, os.Chown(taken, 1234, 1234))
	if got := runtime.StateDirFor("", priv, true); got != filepath.Join(own, "kptr") {
		t.Errorf("another user's directory in the way: state dir %s, want %s", got, filepath.Join(own, "kptr"))
	}
	if got := runtime.StateDirFor("", priv, false); got != filepath.Join(priv, "kptr-run-0") {
		t.Errorf("functions as kptr's own uid: state dir %s, want the usual one", got)
	}
}
