package landlock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
)

// The landlock tier: a failed confinement with a cached verdict probes
// again once and says when the tier can no longer run.
func TestLandlockVerdictReplacedWhenConfinementFails(t *testing.T) {
	dir, llCalls := fakeProbes(t, llOK)
	ProbeCached(dir, false)
	l := &Sandbox{stateDir: dir, cached: true}
	failed := []runtime.ProbeResult{{Name: "landlock", Status: runtime.StatusFailed, Detail: "Landlock unavailable"}}
	probeLandlock = func(string) []runtime.ProbeResult { *llCalls++; return failed }
	err := l.recheck(&confineError{"landlock_restrict_self: operation not permitted"})
	var pe *runtime.ProbeError
	if !errors.As(err, &pe) || *llCalls != 2 || !strings.Contains(err.Error(), "landlock_restrict_self") {
		t.Fatalf("err %v, probes %d", err, *llCalls)
	}
	if r, cached := ProbeCached(dir, false); cached || r[0].Status != runtime.StatusFailed || *llCalls != 3 {
		t.Fatalf("a failed verdict was reused or the good one kept: cached %v, %v", cached, r)
	}
}

var llOK = []runtime.ProbeResult{{Name: "landlock", Status: runtime.StatusOK, Detail: "fake"}}

// fakeProbes replaces the tier's probes for the test with ones that count
// their calls and answer ll, and points the run-state directory at a fresh
// directory; it returns that directory and the call counter.
func fakeProbes(t *testing.T, ll []runtime.ProbeResult) (dir string, llCalls *int) {
	t.Helper()
	// below testTmp, which the uids functions run as may traverse (as
	// root, kptr neither chooses nor accepts a state directory they cannot
	// reach; t.TempDir's parent is 0700)
	base, err := os.MkdirTemp(testTmp, "state-")
	must(t, err)
	must(t, os.Chmod(base, 0o755))
	t.Cleanup(func() { runtime.RemoveTree(base) })
	t.Setenv("XDG_RUNTIME_DIR", base)
	llCalls = new(int)
	old := probeLandlock
	t.Cleanup(func() { probeLandlock = old })
	probeLandlock = func(string) []runtime.ProbeResult {
		*llCalls++
		return ll
	}
	dir = runtime.DefaultStateDir()
	if dir != filepath.Join(base, "kptr") {
		t.Fatalf("state dir %s not below XDG_RUNTIME_DIR %s", dir, base)
	}
	must(t, runtime.EnsurePrivateDir(dir))
	return dir, llCalls
}

// The tier's verdict is cached as the namespace tier's is: a second probe
// answers from it.
func TestLandlockVerdictCacheHitSkipsProbe(t *testing.T) {
	dir, llCalls := fakeProbes(t, llOK)
	if _, cached := ProbeCached(dir, false); cached || *llCalls != 1 {
		t.Fatalf("landlock first: cached %v, probes %d", cached, *llCalls)
	}
	if r, cached := ProbeCached(dir, false); !cached || *llCalls != 1 || r[0].Detail != "fake" {
		t.Fatalf("landlock second: cached %v, probes %d, %v", cached, *llCalls, r)
	}
	if _, cached := ProbeCached(dir, true); cached || *llCalls != 2 {
		t.Fatalf("fresh: cached %v, probes %d", cached, *llCalls)
	}
}
