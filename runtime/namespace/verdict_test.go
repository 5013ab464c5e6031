package namespace

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
)

// fakeProbes replaces the tier's probes for the test with ones that count
// their calls and answer ns, and points the run-state directory at a
// fresh directory; it returns that directory and the call counter.
func fakeProbes(t *testing.T, ns []runtime.ProbeResult, f Features) (dir string, nsCalls *int) {
	t.Helper()
	base := reachableDir(t)
	t.Setenv("XDG_RUNTIME_DIR", base)
	nsCalls = new(int)
	oldNS := probeNamespace
	t.Cleanup(func() { probeNamespace = oldNS })
	probeNamespace = func() ([]runtime.ProbeResult, Features) {
		*nsCalls++
		return ns, f
	}
	dir = runtime.DefaultStateDir()
	if dir != filepath.Join(base, "kptr") {
		t.Fatalf("state dir %s not below XDG_RUNTIME_DIR %s", dir, base)
	}
	return dir, nsCalls
}

var (
	okResults = []runtime.ProbeResult{{Name: "userns", Status: runtime.StatusOK, Detail: "fake"}}
	okFeat    = Features{UID: os.Geteuid(), GID: os.Getegid(), FreshProc: true, Hostname: true}
)

func TestProbeVerdictCacheHitSkipsProbe(t *testing.T) {
	dir, nsCalls := fakeProbes(t, okResults, okFeat)
	res, f, cached := ProbeCached(false)
	if cached || *nsCalls != 1 {
		t.Fatalf("first call: cached %v, probes %d; want a probe", cached, *nsCalls)
	}
	fi, err := os.Lstat(runtime.VerdictPath(verdictNamespace, dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("verdict file: %v %v; want mode 0600", fi, err)
	}
	res2, f2, cached := ProbeCached(false)
	if !cached || *nsCalls != 1 {
		t.Fatalf("second call: cached %v, probes %d; want the cached verdict, no probe", cached, *nsCalls)
	}
	if !sameVerdict(res, res2, f, f2) || f2.HardLimits == nil {
		t.Fatalf("cached verdict %v %+v differs from the probe's %v %+v (or lacks the live hard limits)", res2, f2, res, f)
	}
	// fresh: always probes, and the result replaces the verdict.
	if _, _, cached := ProbeCached(true); cached || *nsCalls != 2 {
		t.Fatalf("fresh: cached %v, probes %d", cached, *nsCalls)
	}
	// A Sandbox made with the cached verdict starts no probe.
	sb, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if !sb.cached || *nsCalls != 2 {
		t.Fatalf("New: cached %v, probes %d", sb.cached, *nsCalls)
	}
}

func TestProbeVerdictChangedKeyReprobes(t *testing.T) {
	dir, nsCalls := fakeProbes(t, okResults, okFeat)
	ProbeCached(false)
	for _, change := range []struct {
		name string
		do   func(t *testing.T)
	}{
		{"another kptr build", func(t *testing.T) {
			old := runtime.GoBuildID
			runtime.GoBuildID = func() string { return "another-build" }
			t.Cleanup(func() { runtime.GoBuildID = old })
		}},
		{"state directory recreated", func(t *testing.T) {
			b, err := os.ReadFile(runtime.VerdictPath(verdictNamespace, dir))
			must(t, err)
			before, err := os.Stat(dir)
			must(t, err)
			must(t, os.RemoveAll(dir))
			// a file system may give the new directory the old one's inode:
			// hold that one with another directory meanwhile
			hold := dir + ".hold"
			must(t, os.Mkdir(hold, 0o700))
			defer os.Remove(hold)
			must(t, runtime.EnsurePrivateDir(dir))
			if after, err := os.Stat(dir); err != nil || os.SameFile(before, after) {
				t.Fatalf("the recreated directory is the same file: %v", err)
			}
			must(t, os.WriteFile(runtime.VerdictPath(verdictNamespace, dir), b, 0o600))
		}},
		{"another key field", func(t *testing.T) {
			// What a kernel, a boot, or a new confinement would change.
			v := readVerdict(t, dir)
			v.Key.BootID = "another-boot"
			writeVerdict(t, dir, v)
		}},
	} {
		t.Run(change.name, func(t *testing.T) {
			before := *nsCalls
			change.do(t)
			if _, _, cached := ProbeCached(false); cached || *nsCalls != before+1 {
				t.Fatalf("cached %v, probes %d → %d; want a new probe", cached, before, *nsCalls)
			}
			if _, _, cached := ProbeCached(false); !cached {
				t.Fatal("the new verdict was not stored")
			}
		})
	}
}

// Two kptr builds run by one user keep a verdict each: run alternately,
// neither probes again (they replaced each other's single file before).
// Storing a verdict removes other builds' verdicts unused for an hour and
// the file earlier versions kept for every build.
func TestProbeVerdictPerBuild(t *testing.T) {
	dir, nsCalls := fakeProbes(t, okResults, okFeat)
	real := runtime.GoBuildID
	t.Cleanup(func() { runtime.GoBuildID = real })
	builds := []func() string{real, func() string { return "another-build" }}
	for _, b := range builds {
		runtime.GoBuildID = b
		if _, _, cached := ProbeCached(false); cached {
			t.Fatal("a first run of a build found a verdict")
		}
	}
	probes := *nsCalls
	for round := 0; round < 3; round++ {
		for _, b := range builds {
			runtime.GoBuildID = b
			if _, _, cached := ProbeCached(false); !cached {
				t.Fatalf("round %d: a build lost its verdict to the other's", round)
			}
		}
	}
	if *nsCalls != probes {
		t.Fatalf("probes %d → %d while two builds alternated", probes, *nsCalls)
	}
	runtime.GoBuildID = builds[1]
	other := runtime.VerdictPath(verdictNamespace, dir)
	legacy := filepath.Join(dir, "probe-verdict-"+verdictNamespace+".json")
	must(t, os.WriteFile(legacy, []byte("{}"), 0o600))
	old := time.Now().Add(-2 * time.Hour)
	must(t, os.Chtimes(other, old, old))
	runtime.GoBuildID = func() string { return "a third build" }
	ProbeCached(false) // probes and stores
	for _, p := range []string{other, legacy} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s survived a store", filepath.Base(p))
		}
	}
	runtime.GoBuildID = real
	if _, err := os.Lstat(runtime.VerdictPath(verdictNamespace, dir)); err != nil {
		t.Errorf("a build's verdict stored within the hour was removed: %v", err)
	}
}

func TestProbeVerdictUntrustedFileIgnored(t *testing.T) {
	dir, nsCalls := fakeProbes(t, okResults, okFeat)
	ProbeCached(false)
	good := readVerdict(t, dir)
	path := runtime.VerdictPath(verdictNamespace, dir)
	forged := good
	forged.Results = []runtime.ProbeResult{{Name: "forged", Status: runtime.StatusOK}}
	forgedJSON, _ := json.Marshal(forged)
	cases := []struct {
		name string
		do   func(t *testing.T)
		root bool
	}{
		{"corrupt", func(t *testing.T) { must(t, os.WriteFile(path, []byte(`{"Key": {"Format": 1`), 0o600)) }, false},
		{"empty results", func(t *testing.T) { writeVerdict(t, dir, runtime.Verdict{Key: good.Key}) }, false},
		{"readable by others", func(t *testing.T) {
			must(t, os.WriteFile(path, forgedJSON, 0o600))
			must(t, os.Chmod(path, 0o644))
		}, false},
		{"symlink", func(t *testing.T) {
			other := filepath.Join(t.TempDir(), "v.json")
			must(t, os.WriteFile(other, forgedJSON, 0o600))
			must(t, os.Remove(path))
			must(t, os.Symlink(other, path))
		}, false},
		{"a failed verdict (never reused)", func(t *testing.T) {
			failed := good
			failed.Results = []runtime.ProbeResult{{Name: "userns", Status: runtime.StatusFailed}}
			writeVerdict(t, dir, failed)
		}, false},
		{"too large", func(t *testing.T) {
			must(t, os.WriteFile(path, append(forgedJSON, make([]byte, runtime.MaxVerdictSize)...), 0o600))
		}, false},
		{"owned by another uid", func(t *testing.T) {
			must(t, os.WriteFile(path, forgedJSON, 0o600))
			must(t, os.Lchown(path, 12345, 12345))
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root to give a file away")
			}
			c.do(t)
			before := *nsCalls
			res, _, cached := ProbeCached(false)
			if cached || *nsCalls != before+1 || res[0].Name != "userns" {
				t.Fatalf("cached %v, probes %d → %d, results %v; want the file ignored and a probe", cached, before, *nsCalls, res)
			}
			if v := readVerdict(t, dir); v.Results[0].Name != "userns" {
				t.Fatalf("the probe's verdict did not replace the file: %v", v.Results)
			}
		})
	}
}

// A run that fails to start with a cached verdict probes again, once,
// replaces the verdict and, when the new verdict differs and still allows
// runs, adopts it and runs again.
func TestProbeVerdictReplacedWhenStartFails(t *testing.T) {
	dir, nsCalls := fakeProbes(t, okResults, okFeat)
	ProbeCached(false)
	sb, err := New(runtime.WithStateDir(reachableDir(t)))
	must(t, err)
	defer sb.Close()
	if !sb.cached {
		t.Fatal("New did not use the cached verdict")
	}
	startErr := errors.New("start: mount proc: operation not permitted")

	// The environment did not change: the verdict stays, no retry.
	if retry, err := sb.recheck(startErr); retry || err != startErr || *nsCalls != 2 {
		t.Fatalf("unchanged: retry %v, err %v, probes %d", retry, err, *nsCalls)
	}
	// Once per Sandbox only.
	if retry, _ := sb.recheck(startErr); retry || *nsCalls != 2 {
		t.Fatalf("second recheck probed again (%d)", *nsCalls)
	}

	// The environment changed (fresh procfs now refused): the new verdict
	// replaces the cached one and the Sandbox adopts it.
	sb2, err := New(runtime.WithStateDir(reachableDir(t)))
	must(t, err)
	defer sb2.Close()
	changed := okFeat
	changed.FreshProc = false
	probeNamespace = func() ([]runtime.ProbeResult, Features) { *nsCalls++; return okResults, changed }
	if retry, err := sb2.recheck(startErr); !retry || err != nil {
		t.Fatalf("changed: retry %v, err %v", retry, err)
	}
	if sb2.Features().FreshProc || tierOf(t, readVerdict(t, dir)).Features.FreshProc {
		t.Fatal("the new verdict was not adopted or not stored")
	}

	// The environment no longer allows runs: the error says why.
	sb3, err := New(runtime.WithStateDir(reachableDir(t)))
	must(t, err)
	defer sb3.Close()
	failed := []runtime.ProbeResult{{Name: "userns", Status: runtime.StatusFailed, Detail: "cannot create a user namespace"}}
	probeNamespace = func() ([]runtime.ProbeResult, Features) { *nsCalls++; return failed, okFeat }
	retry, err := sb3.recheck(startErr)
	var pe *runtime.ProbeError
	if retry || !errors.Is(err, startErr) || !errors.As(err, &pe) {
		t.Fatalf("failed: retry %v, err %v; want the start error and the probe error", retry, err)
	}
	// A failed verdict is never kept (its cause may pass): the next
	// process probes again.
	if _, err := os.Lstat(runtime.VerdictPath(verdictNamespace, dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the replaced verdict is still cached: %v", err)
	}
	before := *nsCalls
	if _, _, cached := ProbeCached(false); cached || *nsCalls != before+1 {
		t.Fatal("a failed verdict was reused")
	}

	// A Sandbox that probed itself never rechecks.
	sb4 := &Sandbox{}
	before = *nsCalls
	if retry, err := sb4.recheck(startErr); retry || err != startErr || *nsCalls != before {
		t.Fatal("a Sandbox without a cached verdict re-probed")
	}
}

// End to end, unprivileged: a cached verdict that no longer describes the
// process (it claims kptr may map a uid range, as root may) makes the
// run's set-up fail; the run probes again, replaces the verdict and
// succeeds.
func TestProbeVerdictStaleRunRecovers(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("the stale claim (root's uid range) holds for root; make test-unpriv runs this")
	}
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	dir := runtime.DefaultStateDir()
	if _, _, err := probeAndStore(); err != nil {
		t.Skip("sandbox unavailable:", err)
	}
	v := readVerdict(t, dir)
	tv := tierOf(t, v)
	tv.Features.Root = true
	b, err := json.Marshal(tv)
	must(t, err)
	v.Tier = b
	writeVerdict(t, dir, v)
	sb, err := New()
	must(t, err)
	defer sb.Close()
	if !sb.cached || !sb.Features().Root {
		t.Fatal("New did not take the (stale) cached verdict")
	}
	res, err := sb.Run(context.Background(), testBundle(t, "id"), runtime.Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run after a stale verdict: %v (exit %d, %s)", err, res.ExitCode, res.Stderr)
	}
	if tierOf(t, readVerdict(t, dir)).Features.Root || sb.Features().Root {
		t.Fatal("the stale verdict was not replaced")
	}
}

func probeAndStore() ([]runtime.ProbeResult, Features, error) {
	res, f, _ := ProbeCached(true)
	return res, f, runtime.Required(res)
}

func readVerdict(t *testing.T, dir string) runtime.Verdict {
	t.Helper()
	b, err := os.ReadFile(runtime.VerdictPath(verdictNamespace, dir))
	must(t, err)
	var v runtime.Verdict
	must(t, json.Unmarshal(b, &v))
	return v
}

// tierOf is what the namespace tier keeps in v.
func tierOf(t *testing.T, v runtime.Verdict) tierVerdict {
	t.Helper()
	var tv tierVerdict
	must(t, json.Unmarshal(v.Tier, &tv))
	return tv
}

func writeVerdict(t *testing.T, dir string, v runtime.Verdict) {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	path := runtime.VerdictPath(verdictNamespace, dir)
	_ = os.Remove(path)
	must(t, os.WriteFile(path, b, 0o600))
}

// reachableDir is a fresh directory below testTmp, which the uids functions
// run as may traverse: as root, kptr neither chooses nor accepts a state
// directory they cannot reach (t.TempDir's parent is 0700).
func reachableDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp(testTmp, "state-")
	must(t, err)
	must(t, os.Chmod(d, 0o755))
	t.Cleanup(func() { runtime.RemoveTree(d) })
	return d
}
