package kpt

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// Ctrl-C (SIGINT) or SIGTERM during fn render (or fn eval), while a function runs or while
// an image is being pulled, ends the render at once: the function's
// processes and the download end, the package is left exactly as it was (no
// Rendered status, the Kptfile's comments intact), nothing is staged, and
// the one line "interrupted" is printed with the shell's exit code for the
// signal (130, 143), as kptr and as kpt.
func TestInterruptLeavesPackage(t *testing.T) {
	// a function that records its pid and sleeps far longer than the test
	slow := "#!/bin/sh\necho $$ > \"$PIDFILE\"\nexec sleep 120\n"
	kptfileExec := "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app # the package's name\npipeline:\n  mutators:\n    # runs for two minutes\n    - exec: ./slow.sh\n"
	kptfileImage := "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app # the package's name\npipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/never-served:v1\n"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a # kept\ndata:\n  k: v\n"

	// a registry that accepts connections and never answers: the pull
	// hangs until the render is interrupted
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var connected atomic.Int32
	go func() {
		var held []net.Conn // kept open: the client waits for an answer
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
			connected.Add(1)
		}
	}()

	for _, tc := range []struct {
		name  string
		kpt   bool
		sig   syscall.Signal
		code  int
		image bool
		eval  bool
	}{
		{name: "SIGINT during a function", sig: syscall.SIGINT, code: 130},
		{name: "SIGTERM during a function", sig: syscall.SIGTERM, code: 143},
		{name: "SIGINT during a function, as kpt", kpt: true, sig: syscall.SIGINT, code: 130},
		{name: "SIGINT during fn eval's function", eval: true, sig: syscall.SIGINT, code: 130},
		{name: "SIGINT during a pull", image: true, sig: syscall.SIGINT, code: 130},
		{name: "SIGTERM during a pull", image: true, sig: syscall.SIGTERM, code: 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"Kptfile": kptfileExec, "cm.yaml": cm, "slow.sh": slow}
			if tc.image {
				files["Kptfile"] = kptfileImage
			}
			pkg := newPkg(t, files)
			if err := os.Chmod(filepath.Join(pkg, "slow.sh"), 0o755); err != nil {
				t.Fatal(err)
			}
			orig := tree(t, pkg)
			pidFile := filepath.Join(t.TempDir(), "pid")
			bin := "kptr"
			if tc.kpt {
				bin = "kpt"
			}
			args := []string{"fn", "render", "--allow-exec", "."}
			if tc.eval {
				args = []string{"fn", "eval", ".", "--exec", "./slow.sh"}
			}
			cmd := exec.Command(filepath.Join(shared.binDir, bin), args...)
			cmd.Dir = pkg
			cmd.Env = append(append([]string{}, shared.env...), "PIDFILE="+pidFile,
				"KPTR_MIRRORS=gcr.io="+ln.Addr().String(), "KPTR_CACHE_DIR="+filepath.Join(t.TempDir(), "cache"))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			if tc.image {
				// under way: the pull has connected to the registry (and hangs)
				before := connected.Load()
				waitUntil(t, func() bool { return connected.Load() > before })
			} else {
				waitUntil(t, func() bool { _, err := os.Stat(pidFile); return err == nil })
			}
			t0 := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			took := time.Since(t0)
			code := cmd.ProcessState.ExitCode()
			if code != tc.code {
				t.Fatalf("exit code %d, want %d (%v)\nstderr:\n%s", code, tc.code, err, stderr.String())
			}
			if took > 20*time.Second {
				t.Errorf("took %v to end after the signal", took)
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			if last := lines[len(lines)-1]; last != "interrupted" {
				t.Errorf("last stderr line %q, want \"interrupted\"\nstderr:\n%s", last, stderr.String())
			}
			for _, l := range lines[:len(lines)-1] {
				if strings.Contains(l, "[FAIL]") || strings.Contains(l, "Exit code") || strings.Contains(strings.ToLower(l), "error") {
					t.Errorf("stderr reports a failure: %q\nstderr:\n%s", l, stderr.String())
				}
			}
			got := tree(t, pkg)
			if !same(got, orig) {
				t.Errorf("package changed:\nKptfile now:\n%s\nfiles: %v", got["Kptfile"], keys(got))
			}
			if _, err := os.Stat(filepath.Join(pkg, ".kptr-tx")); !os.IsNotExist(err) {
				t.Errorf("staging left behind: %v", err)
			}
			if !tc.image {
				b, err := os.ReadFile(pidFile)
				if err != nil {
					t.Fatal(err)
				}
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				// the function's process must be gone (reaped or at least dead)
				waitUntil(t, func() bool { return !alive(pid) })
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("timed out waiting")
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Ctrl-C while an image function runs in the sandbox (one that ignores
// SIGTERM and sleeps forever) ends it and the render: exit 130 within
// seconds, "interrupted", the package as it was.
func TestInterruptImageFunction(t *testing.T) {
	reg := registry.Start(t)
	img := fnimage.Build(t, "hostile", fnimage.WithCmd("sleep-ignore", "interrupt-test"))
	fnimage.Push(t, img, reg.Addr+"/kpt-fn/sleeper:v1")
	pkg := newPkg(t, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app # kept\npipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/sleeper:v1\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
	})
	orig := tree(t, pkg)
	cmd := exec.Command(filepath.Join(shared.binDir, "kptr"), "fn", "render", pkg)
	cmd.Env = append(append([]string{}, shared.env...), "KPTR_MIRRORS=gcr.io="+reg.Addr,
		"KPTR_CACHE_DIR="+filepath.Join(t.TempDir(), "cache"), "KPTR_PROGRESS=none")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitUntil(t, func() bool { return strings.Contains(stderr.String(), "[RUNNING]") })
	time.Sleep(time.Second) // the function has started and sleeps
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.HasSuffix(stderr.String(), "\ninterrupted\n") {
		t.Fatalf("exit %d, want 130 and a last line \"interrupted\"\n%s", code, stderr.String())
	}
	if took := time.Since(t0); took > 20*time.Second {
		t.Errorf("took %v after the signal", took)
	}
	if strings.Contains(stderr.String(), "[FAIL]") {
		t.Errorf("the interruption was reported as a failure:\n%s", stderr.String())
	}
	if !same(tree(t, pkg), orig) {
		t.Errorf("package changed:\n%s", tree(t, pkg)["Kptfile"])
	}
}

// lockedBuffer is a bytes.Buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
