package landlock

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

// The landlock tier as root runs functions as an unprivileged uid too; its
// run directories must be reachable with a private $TMPDIR.
func TestPrivateStateParentLandlockTier(t *testing.T) {
	needsMappedRoot(t)
	if landlockABI() == 0 {
		t.Skip("no Landlock here")
	}
	priv := privateDir(t, "private-ll-TMPDIR")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", priv)
	l, err := New(runtime.WithProbeCache(false))
	if err != nil {
		t.Fatalf("NewLandlock with a private TMPDIR: %v", err)
	}
	assertStateDirSafe(t, l.stateDir, priv)
	res, err := l.Run(context.Background(), testBundle(t, "id"), runtime.Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("landlock run with a private TMPDIR: %v exit %d stderr %q", err, res.ExitCode, res.Stderr)
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

// Where no directory the uids functions run as can reach is available, the
// landlock tier's probes fail on the state directory and name the fix, and
// New refuses.
func TestUnreachableStateDirFailsAtProbe(t *testing.T) {
	needsMappedRoot(t)
	priv := privateDir(t, "unreachable-TMPDIR")
	saved := runtime.RootStateDirs
	runtime.RootStateDirs = []string{filepath.Join(privateDir(t, "unreachable-run"), "kptr"), filepath.Join(privateDir(t, "unreachable-tmp"), "kptr-run-")}
	t.Cleanup(func() { runtime.RootStateDirs = saved })
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", priv)
	must(t, os.Chmod(priv, 0o700))
	if dir := runtime.DefaultStateDir(); filepath.Dir(dir) != priv {
		t.Fatalf("state dir %s, want the usual one below %s when nothing is reachable", dir, priv)
	}
	var pe *runtime.ProbeError
	assertStateDirFailed(t, "landlock", Probe(runtime.DefaultStateDir()), priv)
	if _, err := New(); !errors.As(err, &pe) || pe.Result.Name != "statedir" {
		t.Errorf("New: %v, want the statedir probe's failure", err)
	}
}
