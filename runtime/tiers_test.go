package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/landlock"
	"github.com/kptr-dev/kptr/runtime/wasm"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// The promises every tier keeps, asserted against each registered tier
// (runtime.Tiers: importing runtime/tiers registers them all) through the
// shared interface, with the hostile fixture. A new tier gets the whole
// suite by registering; where a tier promises less, the exception below
// names it, and the README's sandbox table says why. Promises only one tier
// makes (its own pid, uts and ipc namespaces, a minimal /dev, invocation
// mounts) are in that tier's package.

// tier is one registered tier, opened, with the hostile fixture as that
// tier runs functions: test/fixtures/hostile in the test image, or for the
// wasm tier test/fixtures/wasm-hostile compiled GOOS=js GOARCH=wasm (the
// same modes and facts where wasm has the thing at all).
type tier struct {
	name   string
	r      runtime.Sandbox
	bundle func(t testing.TB, cmd ...string) bundle.Bundle
}

func forEachTier(t *testing.T, f func(t *testing.T, tr tier)) {
	for _, rt := range runtime.Tiers() {
		name := rt.Info().Name
		t.Run(name, func(t *testing.T) {
			b := testBundle
			if name == wasm.Name {
				b = wasmBundle
			}
			f(t, tier{name, open(t, rt), b})
		})
	}
}

// wasmBundle is the hostile fixture as a wasm image: the module, the image
// config of the test image's bundle.
func wasmBundle(t testing.TB, cmd ...string) bundle.Bundle {
	b := testBundle(t, cmd...)
	b.Rootfs, b.Wasm = "", fnimage.WasmModule(t, "wasm-hostile", "js")
	return b
}

// The wasm tier's exceptions: a module is not a process. It has no
// capabilities, no_new_privs or seccomp filter to report (it makes no
// system calls; the host functions are the whole of what it can ask for),
// no namespace calls and no children; its file system is empty and
// read-only, so there is no writable scratch space; it has no sockets, so
// Invocation.Network gives it none either.
func isWasm(tr tier) bool { return tr.name == wasm.Name }

// degraded says whether the tier's probe named probe reported a weaker
// promise here (the landlock tier's ll-scope before Landlock ABI 6).
func degraded(tr tier, probe string) bool {
	for _, r := range tr.r.Probes() {
		if r.Name == probe {
			return r.Status != runtime.StatusOK
		}
	}
	return false
}

// writableImage says whether the tier gives functions a writable overlay
// of their image (the namespace tier, where the kernel allows it) as an
// unprivileged kptr: writes to the image's own paths then land in the
// run's upper layer.
func writableImage(tr tier) bool {
	o, ok := tr.r.(interface{ Overlay() bool })
	return ok && o.Overlay() && os.Geteuid() != 0
}

// runTier runs the hostile fixture with args on tr and returns its facts.
func runTier(t *testing.T, tr tier, inv runtime.Invocation, args ...string) (runtime.Result, map[string]string) {
	t.Helper()
	res, err := tr.r.Run(context.Background(), tr.bundle(t, args...), inv)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: run %v: %v exit %d (stderr %q)", tr.name, args, err, res.ExitCode, res.Stderr)
	}
	return res, facts(string(res.Stdout))
}

// No host file outside the image is readable: sentinels in the temp
// directories, a package directory, the cache directory beside the rootfs,
// $HOME, and kptr's own environment through /proc.
func TestTiersHostFilesUnreadable(t *testing.T) {
	var paths []string
	for _, dir := range []string{os.TempDir(), "/tmp", filepath.Join(testTmp, "pkg"), filepath.Dir(testRootfs(t))} {
		must(t, os.MkdirAll(dir, 0o755))
		p := filepath.Join(dir, "kptr-tier-sentinel-"+strconv.Itoa(os.Getpid()))
		must(t, os.WriteFile(p, []byte("secret"), 0o644))
		t.Cleanup(func() { os.Remove(p) })
		paths = append(paths, p)
	}
	paths = append(paths, fmt.Sprintf("/proc/%d/environ", os.Getpid()), "/etc/shadow", fmt.Sprintf("/proc/%d/cmdline", os.Getppid()))
	forEachTier(t, func(t *testing.T, tr tier) {
		for _, inv := range []runtime.Invocation{{}, {AsCurrentUser: true}} {
			_, f := runTier(t, tr, inv, append([]string{"read"}, paths...)...)
			for _, p := range paths {
				if strings.HasPrefix(f[p], "readable") {
					t.Errorf("host file %s readable (as current user: %v): %q", p, inv.AsCurrentUser, f[p])
				}
			}
		}
	})
}

// Nothing outside the run's own scratch space is written: neither the
// cached rootfs (by its in-image or its host path), nor a host directory;
// $HOME and $TMPDIR (the namespace tier: /tmp) are writable.
func TestTiersNoWritesOutsideTheRun(t *testing.T) {
	root := testRootfs(t)
	outside := filepath.Join(testTmp, "outside")
	must(t, os.MkdirAll(outside, 0o777))
	must(t, os.Chmod(outside, 0o777))
	before := snapshot(t, root)
	forEachTier(t, func(t *testing.T, tr tier) {
		targets := []string{"/etc/passwd", "/newfile", "/usr/local/bin/function",
			filepath.Join(root, "etc/passwd"), filepath.Join(root, "newfile"), filepath.Join(outside, "x")}
		res, f := runTier(t, tr, runtime.Invocation{}, append([]string{"write"}, targets...)...)
		for _, p := range targets {
			if f[p] == "written" && !(writableImage(tr) && p == "/etc/passwd") {
				t.Errorf("%s written (%s)", p, res.Stdout)
			}
		}
		if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
			t.Errorf("a host directory was written")
		}
		// Metadata too: mode and times of the image, by its host path
		// (the landlock tier) or its own path (the namespace tier).
		chmods := []string{"/usr/local/bin/function", filepath.Join(root, "usr/local/bin/function"), filepath.Join(root, "etc")}
		_, f = runTier(t, tr, runtime.Invocation{AsCurrentUser: true}, append([]string{"chmod"}, chmods...)...)
		for _, p := range chmods {
			if f[p] == "<nil>" && !(p == chmods[0] && writableImage(tr)) {
				t.Errorf("chmod %s: %q", p, f[p])
			}
		}
		_, f = runTier(t, tr, runtime.Invocation{}, "token", "mine")
		for k, v := range f {
			if isWasm(tr) {
				if strings.HasSuffix(k, "/token") && strings.HasPrefix(v, "mine") {
					t.Errorf("wasm: a file was created at %s", k)
				}
				continue
			}
			if strings.HasSuffix(k, "/token") && v != "mine <nil>" {
				t.Errorf("scratch space %s: %q", k, v)
			}
		}
		if after := snapshot(t, root); after != before {
			t.Fatal("cached rootfs changed by a run")
		}
	})
}

// A run's temporary directory is its own, writable whatever the image's
// /tmp is (the cache extracts every image's /tmp 0755, with nothing another
// user could write: cache.treeMode) and holding nothing of the image's
// /tmp: /tmp itself, 1777 as programs expect it, in a tier that gives the
// run its own mount namespace; elsewhere (the landlock tier) $TMPDIR, a
// directory private to the function's uid. The wasm tier has no file system.
func TestTiersTmpIsTheRunsOwn(t *testing.T) {
	if fi, err := os.Stat(filepath.Join(testRootfs(t), "tmp")); err != nil || fi.Mode() != os.ModeDir|0o755 {
		t.Fatalf("the test image's /tmp: %v %v, want 0755 as the cache extracts it", fi, err)
	}
	forEachTier(t, func(t *testing.T, tr tier) {
		if isWasm(tr) {
			return
		}
		for _, inv := range []runtime.Invocation{{}, {AsCurrentUser: true}} {
			res, _ := runTier(t, tr, inv, "tmpdir")
			out := string(res.Stdout)
			want := "tmpdir: /tmp dtrwxrwxrwx\n"
			if tr.name == landlock.Name {
				want = "drwx------\n"
			}
			if !strings.HasPrefix(out, "tmpdir: ") || !strings.Contains(out, want) || strings.Count(out, "\n") != 1 {
				t.Errorf("as current user %v: the run's tmp: %q, want %q and nothing in it", inv.AsCurrentUser, out, want)
			}
			if _, f := runTier(t, tr, inv, "token", "mine"); len(f) == 0 {
				t.Error("token: no facts")
			} else {
				for k, v := range f {
					if strings.HasSuffix(k, "/token") && v != "mine <nil>" {
						t.Errorf("as current user %v: scratch space %s: %q", inv.AsCurrentUser, k, v)
					}
				}
			}
		}
	})
}

// No TCP to the host: a listener on the host's loopback is unreachable
// (unless the invocation allows the network).
func TestTiersNoTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	forEachTier(t, func(t *testing.T, tr tier) {
		_, f := runTier(t, tr, runtime.Invocation{}, "connect", l.Addr().String())
		if f["connect"] == "ok" {
			t.Errorf("host listener reached: %q", f["connect"])
		}
		_, f = runTier(t, tr, runtime.Invocation{Network: true}, "connect", l.Addr().String())
		if isWasm(tr) {
			if f["connect"] == "ok" {
				t.Errorf("wasm: host listener reached with Network: %q", f["connect"])
			}
			return
		}
		if f["connect"] != "ok" {
			t.Errorf("with Network the host listener must be reachable: %q", f["connect"])
		}
	})
}

// No ptrace of kptr, no signals to it, no new namespaces.
func TestTiersNoPtraceSignalsNamespaces(t *testing.T) {
	forEachTier(t, func(t *testing.T, tr tier) {
		pid := strconv.Itoa(os.Getpid())
		_, f := runTier(t, tr, runtime.Invocation{}, "ptrace", pid)
		if f["ptrace"] == "<nil>" {
			t.Errorf("ptrace of kptr (pid %s) succeeded", pid)
		}
		_, f = runTier(t, tr, runtime.Invocation{}, "signal", pid)
		if f["signal"] == "<nil>" && !degraded(tr, "ll-scope") {
			t.Errorf("signal to kptr (pid %s) delivered", pid)
		}
		_, f = runTier(t, tr, runtime.Invocation{}, "unshare")
		if isWasm(tr) {
			if f["unshare"] != "no such call in wasm" {
				t.Errorf("wasm unshare: %q", f["unshare"])
			}
			return
		}
		if !strings.Contains(f["unshare"], "operation not permitted") {
			t.Errorf("a new user namespace: %q", f["unshare"])
		}
	})
}

// No privilege: no capabilities, no_new_privs, a seccomp filter (every
// tier, every build), never host root.
func TestTiersNoPrivilege(t *testing.T) {
	forEachTier(t, func(t *testing.T, tr tier) {
		_, f := runTier(t, tr, runtime.Invocation{AsCurrentUser: true}, "id")
		if isWasm(tr) {
			if f["uid"] == "" || f["uid"] == "0" {
				t.Errorf("wasm: uid %q", f["uid"])
			}
			return
		}
		if f["CapEff"] != "0000000000000000" || f["CapPrm"] != "0000000000000000" || f["nnp"] != "1" {
			t.Errorf("privileges: %v", f)
		}
		if f["seccomp"] != "2" {
			t.Errorf("no seccomp filter: %v", f)
		}
		// (the namespace tier's uid 0 is its own user namespace's root, a
		// host uid that is never root: TestUserNamespaceNeverHostRoot)
		if tr.name != "namespace" && f["uid"] == "0" {
			t.Errorf("function runs as host root: %v", f)
		}
	})
}

// Only the image's Env and the invocation's (plus, in the landlock tier,
// HOME and TMPDIR pointing at the run directory).
func TestTiersEnvironment(t *testing.T) {
	t.Setenv("KPTR_TEST_SECRET", "hunter2")
	forEachTier(t, func(t *testing.T, tr tier) {
		res, _ := runTier(t, tr, runtime.Invocation{Env: []string{"INV_VAR=x", "IMAGE_VAR=overridden"}}, "env")
		for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			k, v, _ := strings.Cut(l, "=")
			switch {
			case k == "PATH" && l == imagePath, k == "INV_VAR" && v == "x", k == "IMAGE_VAR" && v == "overridden", k == "HOME":
			case k == "TMPDIR" && tr.name == "landlock":
			default:
				t.Errorf("unexpected variable %q", l)
			}
		}
	})
}

// The timeout ends every process of the run, also a child in its own
// session that ignores SIGTERM; so does the main process exiting.
func TestTiersEveryProcessEnds(t *testing.T) {
	forEachTier(t, func(t *testing.T, tr tier) {
		marker := fmt.Sprintf("kptr-tier-%s-%d-%d", tr.name, os.Getpid(), time.Now().UnixNano())
		start := time.Now()
		res, err := tr.r.Run(context.Background(), tr.bundle(t, "forksleep", marker), runtime.Invocation{Timeout: time.Second})
		if !errors.Is(err, runtime.ErrTimeout) || !strings.Contains(err.Error(), "example.test/hostile:v1") {
			t.Fatalf("want a timeout naming the image, got %v (exit %d)", err, res.ExitCode)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %s", d)
		}
		if !strings.Contains(string(res.Stdout), "child: ") {
			t.Errorf("the child was never started: %q %q", res.Stdout, res.Stderr)
		}
		if left := processesWith(marker); len(left) > 0 {
			t.Fatalf("processes left after the timeout: %v", left)
		}
		res, err = tr.r.Run(context.Background(), tr.bundle(t, "bgexit", marker), runtime.Invocation{})
		if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "child: ") {
			t.Fatalf("bgexit: %v exit %d %q %q", err, res.ExitCode, res.Stdout, res.Stderr)
		}
		if left := processesWith(marker); len(left) > 0 {
			t.Fatalf("processes left after the function exited: %v", left)
		}
	})
}

// Output caps, exit codes, a function that does not read stdin, garbage,
// cancellation: the same results in both tiers.
func TestTiersLimitsAndResults(t *testing.T) {
	forEachTier(t, func(t *testing.T, tr tier) {
		res, err := tr.r.Run(context.Background(), tr.bundle(t, "flood", strconv.Itoa(64<<20)), runtime.Invocation{MaxOutput: 1 << 20})
		if !errors.Is(err, runtime.ErrOutputLimit) || !strings.Contains(err.Error(), "stdout") || len(res.Stdout) != 1<<20 {
			t.Fatalf("flood: %v, %d bytes kept", err, len(res.Stdout))
		}
		big := strings.NewReader(strings.Repeat("x", 32<<20))
		res, err = tr.r.Run(context.Background(), tr.bundle(t, "noread"), runtime.Invocation{Stdin: big, Timeout: 20 * time.Second})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("noread: %v exit %d", err, res.ExitCode)
		}
		res, err = tr.r.Run(context.Background(), tr.bundle(t, "exit", "3"), runtime.Invocation{})
		if err != nil || res.ExitCode != 3 || !strings.Contains(string(res.Stderr), "failing on purpose") {
			t.Fatalf("exit 3: %v exit %d %q", err, res.ExitCode, res.Stderr)
		}
		res, err = tr.r.Run(context.Background(), tr.bundle(t, "garbage"), runtime.Invocation{})
		if err != nil || len(res.Stdout) != 4096 || len(res.Stderr) != 4096 {
			t.Fatalf("garbage: %v %d/%d", err, len(res.Stdout), len(res.Stderr))
		}
		res, err = tr.r.Run(context.Background(), tr.bundle(t, "cat"), runtime.Invocation{Stdin: strings.NewReader("kind: ResourceList\n")})
		if err != nil || string(res.Stdout) != "kind: ResourceList\n" {
			t.Fatalf("cat: %v %q", err, res.Stdout)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(300 * time.Millisecond); cancel() }()
		if _, err = tr.r.Run(ctx, tr.bundle(t, "sleep-ignore", "x"), runtime.Invocation{Stdin: blockingReader{}}); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancel: %v", err)
		}
	})
}
