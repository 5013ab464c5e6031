package namespace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// kpt exec functions: a host command with the host environment plus the
// invocation's, also when handed to the Sandbox.
func TestHostExecFunction(t *testing.T) {
	t.Setenv("KPTR_HOST_VAR", "host")
	b := bundle.Bundle{Config: v1.Config{Entrypoint: []string{"/bin/sh", "-c", `echo "$KPTR_HOST_VAR $INV"; cat`}}}
	for name, r := range map[string]runtime.Runner{"host": runtime.Host{}, "sandbox": sandbox(t)} {
		res, err := r.Run(context.Background(), b, runtime.Invocation{Env: []string{"INV=inv"}, Stdin: strings.NewReader("in\n")})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "host inv\nin\n" {
			t.Errorf("%s: %v %d %q %q", name, err, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
}

// --sandbox=none: the image's entrypoint runs directly, with only the
// image's Env plus the invocation's.
func TestHostRunsImageUnsandboxed(t *testing.T) {
	t.Setenv("KPTR_TEST_SECRET", "hunter2")
	res, err := runtime.Host{}.Run(context.Background(), testBundle(t, "env"), runtime.Invocation{Env: []string{"INV_VAR=1"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
	}
	env := string(res.Stdout)
	if strings.Contains(env, "hunter2") || !strings.Contains(env, "IMAGE_VAR=from-image") || !strings.Contains(env, "INV_VAR=1") {
		t.Fatalf("env:\n%s", env)
	}
	res, err = runtime.Host{}.Run(context.Background(), testBundle(t, "cat"), runtime.Invocation{Stdin: strings.NewReader("abc")})
	if err != nil || string(res.Stdout) != "abc" {
		t.Fatalf("cat: %v %q", err, res.Stdout)
	}
}

// The host runner's timeout kills the whole process group (a child that
// leaves it with setsid escapes: that is what the sandbox's pid namespace is for).
func TestHostTimeoutKillsGroup(t *testing.T) {
	marker := fmt.Sprintf("host-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	b := bundle.Bundle{Ref: "exec", Config: v1.Config{Entrypoint: []string{"/bin/sh", "-c", "trap '' TERM; /bin/sh -c 'sleep 100; :' " + marker + " & sleep 100 # " + marker}}}
	_, err := runtime.Host{Timeout: 500 * time.Millisecond}.Run(context.Background(), b, runtime.Invocation{})
	if !errors.Is(err, runtime.ErrTimeout) {
		t.Fatalf("want timeout, got %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if left := processesWith(marker); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
}

// A host function whose child leaves the process group and keeps stdout
// open does not hang kptr: the output is cut after a grace period.
func TestHostDaemonDoesNotHang(t *testing.T) {
	marker := fmt.Sprintf("daemon-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	b := bundle.Bundle{Ref: "exec", Config: v1.Config{Entrypoint: []string{"/bin/sh", "-c",
		"setsid /bin/sh -c 'sleep 5; : " + marker + "' & sleep 0.3; echo started"}}}
	start := time.Now()
	res, err := runtime.Host{}.Run(context.Background(), b, runtime.Invocation{})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "started\n" {
		t.Fatalf("%v %d %q", err, res.ExitCode, res.Stdout)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("waited %s for a daemonised child", d)
	}
	for _, p := range processesWith(marker) {
		pid, _, _ := strings.Cut(p, ":")
		if n, err := strconv.Atoi(pid); err == nil {
			syscall.Kill(n, syscall.SIGKILL)
		}
	}
}

// A kptr that reuses the pid of one that was SIGKILLed (Argo CD's deadline)
// runs normally next to the state the dead one left behind, whatever run
// numbers it had reached.
func TestRunStateOfAReusedPidNeverCollides(t *testing.T) {
	dir, err := os.MkdirTemp(testTmp, "state-reused-pid-")
	must(t, err)
	must(t, runtime.EnsurePrivateDir(dir))
	for n := 1; n <= 3; n++ {
		for _, suffix := range []string{"", ".root", ".rw"} {
			must(t, os.MkdirAll(filepath.Join(dir, fmt.Sprintf("kptr-%d-%d%s", os.Getpid(), n, suffix), "x"), 0o700))
		}
	}
	s, err := New(runtime.WithStateDir(dir), WithFeatures(sandbox(t).Features()))
	must(t, err)
	t.Cleanup(func() { s.Close() })
	b := testBundle(t, "cat")
	for i := 0; i < 3; i++ {
		res, err := s.Run(context.Background(), b, runtime.Invocation{Stdin: strings.NewReader("same pid")})
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "same pid" {
			t.Fatalf("run %d next to a dead process's state: %v, exit %d, stdout %q, stderr %q", i, err, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
}

// Run state of a kptr that died (kill -9) is removed by the next New, once
// it is an hour old and its pid is gone; a live run's state never is.
func TestPruneStaleState(t *testing.T) {
	dir, err := os.MkdirTemp(testTmp, "state-prune-")
	must(t, err)
	must(t, runtime.EnsurePrivateDir(dir))
	dead := filepath.Join(dir, "kptr-999999999-0a1b2c3d-1.rw") // no such pid
	fresh := filepath.Join(dir, "kptr-999999999-0a1b2c3d-2")
	live := filepath.Join(dir, fmt.Sprintf("kptr-%d-1", os.Getppid()))
	for _, d := range []string{dead, fresh, live} {
		must(t, os.Mkdir(d, 0o700))
	}
	old := time.Now().Add(-2 * time.Hour)
	must(t, os.Chtimes(dead, old, old))
	must(t, os.Chtimes(live, old, old))
	if _, err := New(runtime.WithStateDir(dir), WithFeatures(sandbox(t).Features())); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Error("state of a dead kptr kept")
	}
	for _, d := range []string{fresh, live} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}
