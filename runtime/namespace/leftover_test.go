package namespace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"golang.org/x/sys/unix"
)

// Every run removes its own state when it ends, however it ends: success,
// a function that fails or crashes, a timeout, an output overflow, an
// entrypoint that cannot be executed, a start that libcontainer refuses,
// and a prepared sandbox nobody used. Only the process's lock remains.
func TestRunLeavesNoState(t *testing.T) {
	dir := filepath.Join(testTmp, "state-leftovers")
	s, err := New(runtime.WithStateDir(dir), WithFeatures(sandbox(t).Features()))
	must(t, err)
	garbage := filepath.Join(testTmp, "garbage-rootfs-leftovers")
	must(t, os.MkdirAll(filepath.Join(garbage, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(garbage, "bin/garbage"), []byte("\x7fELF garbage"), 0o755))
	for _, tc := range []struct {
		name string
		args []string
		inv  runtime.Invocation
		edit func(b *bundle.Bundle)
	}{
		{name: "success", args: []string{"cat"}},
		{name: "failure", args: []string{"exit", "3"}},
		{name: "crash", edit: func(b *bundle.Bundle) { b.Config.Entrypoint = []string{"/bin/sh", "-c", "kill -SEGV $$"} }},
		{name: "timeout", args: []string{"forksleep", "x"}, inv: runtime.Invocation{Timeout: 300 * time.Millisecond}},
		{name: "output limit", args: []string{"flood", "10000000"}, inv: runtime.Invocation{MaxOutput: 1000}},
		{name: "ptrace zombie", args: []string{"ptrace-zombie", "exit"}},
		{name: "exec failure", edit: func(b *bundle.Bundle) { b.Rootfs, b.Config.Entrypoint = garbage, []string{"/bin/garbage"} }},
		{name: "start refused", args: []string{"cat"}, inv: runtime.Invocation{Mounts: []runtime.Mount{{Source: filepath.Join(testTmp, "does-not-exist"), Target: "/work"}}}},
		{name: "no entrypoint", edit: func(b *bundle.Bundle) { b.Config.Entrypoint = []string{"/nope"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBundle(t, tc.args...)
			if tc.edit != nil {
				tc.edit(&b)
			}
			_, err := s.Run(context.Background(), b, tc.inv)
			t.Logf("run: %v", err)
			assertStateEmpty(t, dir)
			// The same through a prepared sandbox.
			s.Prepare(context.Background(), b, tc.inv)
			_, err = s.Run(context.Background(), b, tc.inv)
			t.Logf("prepared run: %v", err)
			assertStateEmpty(t, dir)
		})
	}
	t.Run("prepared, unused", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s.Prepare(ctx, testBundle(t, "cat"), runtime.Invocation{})
		s.Prepare(context.Background(), testBundle(t, "id"), runtime.Invocation{})
		time.Sleep(200 * time.Millisecond)
		cancel()
		must(t, s.Close())
		assertStateEmpty(t, dir)
		// Closed, the sandbox holds no lock: nothing at all is left.
		if des, _ := os.ReadDir(dir); len(des) != 0 {
			t.Errorf("left in the state dir after Close: %v", des)
		}
	})
}

// assertStateEmpty fails when dir holds anything but this process's lock.
func assertStateEmpty(t *testing.T, dir string) {
	t.Helper()
	var left []string
	// A run whose processes outlive its timeout plus grace leaves their
	// removal to the background reaper: on a loaded 2-core machine (load
	// 20 seen in CI) that took more than a second.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left = left[:0]
		des, err := os.ReadDir(dir)
		must(t, err)
		for _, de := range des {
			if de.Name() != runtime.OwnerName()+".lock" {
				left = append(left, de.Name())
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left in the state dir: %v", left)
	}
}

// A new Sandbox removes at once the state of kptr processes that are gone
// (their lock is free: killed mid-run), also directories the run's mapped
// uids made unreadable; the state of a live kptr (its lock held) and names
// that are no run's stay.
func TestPruneStaleByLock(t *testing.T) {
	dir := filepath.Join(testTmp, "state-prune")
	must(t, runtime.EnsurePrivateDir(dir))
	mk := func(owner string, locked bool) []string {
		names := []string{owner + "-1", owner + "-1.rw", owner + "-2.root", owner + ".lock"}
		for _, n := range names[:3] {
			must(t, os.MkdirAll(filepath.Join(dir, n, "u", "d"), 0o755))
		}
		must(t, os.Chmod(filepath.Join(dir, owner+"-1.rw", "u"), 0)) // as a function may leave it
		f, err := os.Create(filepath.Join(dir, owner+".lock"))
		must(t, err)
		if locked {
			// Another open file description: conflicts like another process's.
			must(t, unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
			t.Cleanup(func() { f.Close() })
		} else {
			f.Close()
		}
		return names
	}
	// pid 1 exists in every namespace: a dead owner is known by its lock,
	// never by its pid.
	dead := mk("kptr-1-deadbeef", false)
	live := mk("kptr-1-cafecafe", true)
	other := filepath.Join(dir, "not-a-run")
	must(t, os.Mkdir(other, 0o700))
	_, err := New(runtime.WithStateDir(dir), WithFeatures(sandbox(t).Features()))
	must(t, err)
	for _, n := range dead {
		if _, err := os.Lstat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s of a dead kptr left: %v", n, err)
		}
	}
	for _, n := range append(live, "not-a-run") {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s of a live kptr removed: %v", n, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, runtime.OwnerName()+".lock")); err != nil {
		t.Errorf("this process holds no lock in the state dir: %v", err)
	}
}
