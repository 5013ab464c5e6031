package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/landlock"
	"github.com/kptr-dev/kptr/runtime/namespace"
)

// kptr doctor lists every probe and passes where the sandbox works (here).
func TestDoctor(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"kptr", "doctor"}, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"userns", "mount", "hostname", "proc", "netns", "cgroups", "seccomp", "landlock", "ll-net", "ll-unix", "ll-scope", "confine", "paths", "sandbox: usable", "tier: namespace"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.String())
		}
	}
}

// newRunner opens the sandbox the global flags describe, as a command's
// function chain does, printing auto's fallback line.
func (g *globals) newRunner() (runtime.Runner, error) {
	r, notice, closeSandbox, err := fnenv.OpenSandbox(g.fnConfig(false, false, nil).SandboxConfig())
	if closeSandbox != nil {
		g.onExit(closeSandbox)
	}
	fmt.Fprint(g.stderr, notice)
	return r, err
}

func TestNewRunnerModes(t *testing.T) {
	g := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" })
	g.sandbox = "none"
	if r, err := g.newRunner(); err != nil {
		t.Fatal(err)
	} else if _, ok := r.(runtime.Host); !ok {
		t.Fatalf("--sandbox=none gave %T", r)
	}
	g.sandbox = "auto"
	if r, err := g.newRunner(); err != nil {
		t.Fatal(err)
	} else if _, ok := r.(*namespace.Sandbox); !ok {
		t.Fatalf("--sandbox=auto gave %T", r)
	}
	for mode, want := range map[string]string{"namespace": "*namespace.Sandbox", "landlock": "*landlock.Sandbox"} {
		g.sandbox = mode
		if r, err := g.newRunner(); err != nil {
			t.Fatalf("--sandbox=%s: %v", mode, err)
		} else if got := fmt.Sprintf("%T", r); got != want {
			t.Fatalf("--sandbox=%s gave %s", mode, got)
		}
	}
	g.sandbox = "bogus"
	if _, err := g.newRunner(); exitCodeOf(err) != exitUsage {
		t.Fatalf("--sandbox=bogus: %v", err)
	}
	// KPTR_OVERLAY=0 keeps runs on the read-only view; unset, they get the
	// overlay exactly where the probe says it works.
	_, feat := namespace.Probe()
	for _, env := range []string{"", "0"} {
		g := newGlobals(nil, &bytes.Buffer{}, &bytes.Buffer{}, func(k string) string {
			if k == "KPTR_OVERLAY" {
				return env
			}
			return ""
		})
		g.sandbox = "auto"
		r, err := g.newRunner()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.(*namespace.Sandbox).Overlay(), feat.Overlay && env == ""; got != want {
			t.Errorf("KPTR_OVERLAY=%q: overlay %v, want %v", env, got, want)
		}
	}
}

// Without user namespaces the namespace tier refuses: --sandbox=namespace
// exits 3 naming the failed probe and pointing at kptr doctor, while auto
// falls back to the landlock tier (saying so on stderr) and doctor says
// which tier runs and why not the namespace tier. The test makes user
// namespaces unavailable in a user namespace of its own
// (max_user_namespaces=0 there) and runs itself inside it.
func TestRefusesWithoutUserNamespaces(t *testing.T) {
	if os.Getenv("KPTR_REFUSAL_CHILD") == "1" {
		var stderr bytes.Buffer
		g := newGlobals(nil, &bytes.Buffer{}, &stderr, func(string) string { return "" })
		g.sandbox = "namespace"
		_, err := g.newRunner()
		if exitCodeOf(err) != exitEnv || !strings.Contains(err.Error(), `probe "userns" failed`) || !strings.Contains(err.Error(), "kptr doctor") {
			t.Fatalf("newRunner: exit %d: %v", exitCodeOf(err), err)
		}
		g.sandbox = "auto"
		r, err := g.newRunner()
		if _, ok := r.(*landlock.Sandbox); err != nil || !ok {
			t.Fatalf("auto without user namespaces: %T %v", r, err)
		}
		if !strings.Contains(stderr.String(), "landlock tier") || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("auto's fallback not said once on stderr: %q", stderr.String())
		}
		var out bytes.Buffer
		if code := run([]string{"kptr", "doctor"}, strings.NewReader(""), &out, &out); code != 0 || !strings.Contains(out.String(), "[failed]    userns") ||
			!strings.Contains(out.String(), "max_user_namespaces") || !strings.Contains(out.String(), "tier: landlock, because the namespace tier is unavailable") {
			t.Fatalf("doctor: exit %d\n%s", code, out.String())
		}
		out.Reset()
		if code := run([]string{"kptr", "doctor", "--sandbox=namespace"}, strings.NewReader(""), &out, &out); code != exitEnv || !strings.Contains(out.String(), "sandbox: UNAVAILABLE") {
			t.Fatalf("doctor --sandbox=namespace: exit %d\n%s", code, out.String())
		}
		g.sandbox = "none" // the operator's explicit choice still works
		if _, err := g.newRunner(); err != nil {
			t.Fatal(err)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--user", "--map-root-user", "/bin/sh", "-c",
		`echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" -test.run '^TestRefusesWithoutUserNamespaces$' -test.v`, self)
	cmd.Env = append(os.Environ(), "KPTR_REFUSAL_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRefusesWithoutUserNamespaces") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// Only commands that may start more than one sandbox pay for the sealed
// re-exec.
func TestMayStartManySandboxes(t *testing.T) {
	for args, want := range map[string]bool{
		"kptr":                false,
		"kptr version":        false,
		"kptr --version":      false,
		"kptr completion zsh": false,
		"kptr __complete fn ": false,
		"kptr cache ls":       false,
		"kptr doctor":         false,
		"kptr init --help":    false,
		"kptr prewarm .":      false,
		"kptr fn source .":    false,
		"kptr fn sink out":    false,
		"kptr fn render .":    true,
		"kptr fn eval . -i x": false, // one function: one start either way
		"kptr render .":       true,
		"kptr generate":       true,
	} {
		if got := mayStartManySandboxes(strings.Fields(args)); got != want {
			t.Errorf("%s: %v, want %v", args, got, want)
		}
	}
}

// As root with a private $TMPDIR (Debian's libpam-tmpdir) or
// $XDG_RUNTIME_DIR (systemd), doctor used to pass while every
// namespace-tier run failed: the run state lay below a directory the uids
// functions run as cannot traverse. Doctor now names a state directory they
// can reach, outside the private one, which stays private.
func TestDoctorPrivateTmpdirAsRoot(t *testing.T) {
	if _, feat := namespace.Probe(); !feat.Root {
		t.Skip("needs root with the whole id range mapped: only then do functions run as other host uids than kptr's")
	}
	for _, env := range []string{"TMPDIR", "XDG_RUNTIME_DIR"} {
		t.Run(env, func(t *testing.T) {
			priv := filepath.Join(t.TempDir(), "private")
			if err := os.Mkdir(priv, 0o700); err != nil {
				t.Fatal(err)
			}
			t.Setenv("XDG_RUNTIME_DIR", "")
			t.Setenv(env, priv)
			var out, errb bytes.Buffer
			code := run([]string{"kptr", "doctor"}, strings.NewReader(""), &out, &errb)
			_, dir, ok := strings.Cut(out.String(), "[ok]        statedir  run state in ")
			dir, _, _ = strings.Cut(dir, "\n")
			if code != 0 || !ok || strings.HasPrefix(dir, priv) {
				t.Fatalf("exit %d, state dir %q (want one outside %s)\n%s%s", code, dir, priv, out.String(), errb.String())
			}
			for d := dir; d != "/"; d = filepath.Dir(d) {
				if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
					t.Errorf("%s on the state dir's path is not traversable by other uids: %v %v", d, fi.Mode(), err)
				}
			}
			if fi, err := os.Stat(priv); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s widened: %v %v", priv, fi.Mode(), err)
			}
		})
	}
}

// As root with the image cache below a directory other users cannot
// traverse (root's default cache in a 0700 home), doctor used to report the
// landlock tier usable while every function then failed with exit code 125
// ("rootfs … is not reachable by other users"). Doctor now checks the cache
// the runs use (--cache-dir, KPTR_CACHE_DIR) and says the fix, and a run in
// the landlock tier refuses at once with the same fix (exit 3), before any
// pull.
func TestDoctorLandlockCacheAsRoot(t *testing.T) {
	if !runtime.CanMapRange() {
		t.Skip("needs root with the whole id range mapped: only then do functions run as other host uids than kptr's")
	}
	if r, _ := landlock.ProbeCached(runtime.DefaultStateDir(), false); runtime.Required(r) != nil {
		t.Skip("the landlock tier cannot run here")
	}
	// t.TempDir's parent is private: a directory of its own in $TMPDIR
	base, err := os.MkdirTemp("", "kptr-cache-reach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := base; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not traversable by other users", d)
		}
	}
	priv := filepath.Join(base, "home")
	if err := os.Mkdir(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "shared", "kptr") // not created yet: judged by its parents
	for _, tc := range []struct {
		cache, want string
	}{
		{filepath.Join(priv, ".cache", "kptr"), "[failed]    cache     the landlock tier cannot run images from the cache " + filepath.Join(priv, ".cache", "kptr") + ": " + priv + " is not traversable by other users"},
		{open, "[ok]        cache     images run from " + open},
	} {
		t.Setenv("KPTR_CACHE_DIR", tc.cache)
		var out, errb bytes.Buffer
		run([]string{"kptr", "doctor"}, strings.NewReader(""), &out, &errb)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("doctor with the cache in %s: want %q\n%s%s", tc.cache, tc.want, out.String(), errb.String())
		}
		if strings.Contains(tc.want, "[failed]") && !strings.Contains(out.String(), "fix: use a cache directory whose whole path every user may traverse (--cache-dir / KPTR_CACHE_DIR") {
			t.Errorf("doctor does not say the fix:\n%s", out.String())
		}
	}
	pkg := filepath.Join(base, "pkg")
	writeTree(t, pkg, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: 127.0.0.1:1/fn/set-labels:v1\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"})
	t.Setenv("KPTR_CACHE_DIR", filepath.Join(priv, ".cache", "kptr"))
	code, _, errs := runIn(t, "kptr", "fn", "render", pkg, "--sandbox", "landlock", "-o", "unwrap")
	if code != exitEnv || !strings.Contains(errs, "is not traversable by other users") || !strings.Contains(errs, "--cache-dir / KPTR_CACHE_DIR") {
		t.Errorf("render in the landlock tier: exit %d, want 3 naming the fix\n%s", code, errs)
	}
}
