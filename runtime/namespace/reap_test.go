package namespace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"golang.org/x/sys/unix"
)

// reapBound is how long after its timeout a run may take to return: the
// kill grace plus the output grace plus slack for a loaded machine.
const reapBound = runtime.KillGrace + runtime.OutputGrace + 3*time.Second

// Hostile process trees end within the run's timeout plus the grace, with
// the function's exit or ErrTimeout, and leave no process, no thread and no
// zombie behind: a thread that made kptr its tracer (PTRACE_TRACEME) and
// then exited with its process or hung, a child that stopped itself, a
// grandchild in its own session that ignores SIGTERM.
func TestRunsAlwaysEnd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		timeout bool // the function hangs: the run must end in ErrTimeout
	}{
		{"ptrace-zombie exit", []string{"ptrace-zombie", "exit"}, false},
		{"ptrace-zombie hang", []string{"ptrace-zombie", "hang"}, true},
		{"stopped child", []string{"stopped-child", "m"}, false},
		{"forked grandchild", []string{"forkexit", "m"}, false},
		{"forked grandchild hang", []string{"forksleep", "m"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := fmt.Sprintf("kptr-reap-%d-%d", os.Getpid(), time.Now().UnixNano())
			args := append([]string(nil), tc.args...)
			if args[len(args)-1] == "m" {
				args[len(args)-1] = marker
			}
			const timeout = 3 * time.Second
			res, err, d := runBounded(t, testBundle(t, args...), runtime.Invocation{Timeout: timeout}, timeout+reapBound)
			f := facts(string(res.Stdout))
			if tc.timeout {
				if !errors.Is(err, runtime.ErrTimeout) {
					t.Errorf("want ErrTimeout, got %v (exit %d, stderr %q)", err, res.ExitCode, res.Stderr)
				}
			} else if err != nil || res.ExitCode != 0 {
				t.Errorf("want the function's exit 0, got %v (exit %d, stderr %q)", err, res.ExitCode, res.Stderr)
			}
			if !tc.timeout && d > timeout {
				t.Errorf("a function that exited at once took %s (its timeout: %s)", d, timeout)
			}
			if tc.args[0] == "ptrace-zombie" && f["traceme"] == "<nil>" {
				// The filter refuses ptrace in every build and with either
				// launcher: a function cannot make kptr its tracer (the
				// reaper's __WALL still covers a tracer it cannot stop).
				t.Errorf("PTRACE_TRACEME from a thread succeeded under the seccomp filter")
			}
			assertNothingLeft(t, f["pidns"], marker)
		})
	}
}

// runBounded runs b and fails the test (rather than hanging the test binary)
// when the run does not return within bound.
func runBounded(t *testing.T, b bundle.Bundle, inv runtime.Invocation, bound time.Duration) (runtime.Result, error, time.Duration) {
	t.Helper()
	type out struct {
		res runtime.Result
		err error
	}
	ch := make(chan out, 1)
	start := time.Now()
	go func() {
		res, err := sandbox(t).Run(context.Background(), b, inv)
		ch <- out{res, err}
	}()
	select {
	case o := <-ch:
		return o.res, o.err, time.Since(start)
	case <-time.After(bound):
		t.Fatalf("the run did not return within %s (timeout %s)", bound, inv.Timeout)
		panic("unreachable")
	}
}

// assertNothingLeft fails when a process or thread of the pid namespace ns
// ("pid:[N]", as the fixture printed it), a process whose command line holds
// marker, or a zombie child or tracee of this process is left.
func assertNothingLeft(t *testing.T, ns, marker string) {
	t.Helper()
	if !strings.HasPrefix(ns, "pid:[") {
		t.Fatalf("the fixture did not report its pid namespace: %q", ns)
	}
	// The kernel tears a pid namespace down asynchronously after its
	// init is reaped: give it a moment.
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = append(inPidNamespace(ns), processesWith(marker)...)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left of the run: %v", left)
	}
	var si unix.Siginfo
	if err := unix.Waitid(unix.P_ALL, 0, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil); err == nil {
		if pid := siginfoPid(&si); pid != 0 {
			t.Errorf("an unreaped zombie child or tracee of kptr: pid %d", pid)
		}
	}
}

// inPidNamespace lists the threads of every process on the host that live
// in the pid namespace ns.
func inPidNamespace(ns string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	for _, p := range procs {
		if l, err := os.Readlink(filepath.Join(p, "ns/pid")); err == nil && l == ns {
			out = append(out, p)
		}
	}
	return out
}

// siginfoPid is si_pid of a waitid result (after si_signo, si_errno, si_code
// and padding on 64-bit Linux).
func siginfoPid(si *unix.Siginfo) int {
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(si), 16)))
}

// Host runs (kpt exec functions, --sandbox=none) end alike: a traced zombie
// thread of the function is reaped, and the run returns at once.
func TestHostRunsAlwaysEnd(t *testing.T) {
	for _, how := range []string{"exit", "hang"} {
		t.Run(how, func(t *testing.T) {
			b := testBundle(t, "ptrace-zombie", how)
			b.Rootfs = directRootfs(t)
			const timeout = 2 * time.Second
			type out struct {
				res runtime.Result
				err error
			}
			ch := make(chan out, 1)
			go func() {
				res, err := runtime.Host{}.Run(context.Background(), b, runtime.Invocation{Timeout: timeout})
				ch <- out{res, err}
			}()
			var o out
			select {
			case o = <-ch:
			case <-time.After(timeout + reapBound):
				t.Fatalf("the host run did not return within %s", timeout+reapBound)
			}
			if f := facts(string(o.res.Stdout)); f["traceme"] != "<nil>" {
				t.Fatalf("PTRACE_TRACEME from a thread failed, the test proves nothing: %q", f["traceme"])
			}
			if how == "hang" && !errors.Is(o.err, runtime.ErrTimeout) || how == "exit" && (o.err != nil || o.res.ExitCode != 0) {
				t.Errorf("%s: %v (exit %d)", how, o.err, o.res.ExitCode)
			}
			var si unix.Siginfo
			if err := unix.Waitid(unix.P_ALL, 0, &si, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil); err == nil && siginfoPid(&si) != 0 {
				t.Errorf("an unreaped zombie child or tracee of kptr: pid %d", siginfoPid(&si))
			}
		})
	}
}

// wait never blocks past the timeout plus the grace, even when the run's
// processes cannot be reaped at all (a process stuck in the kernel): it
// returns ErrTimeout saying so, and the reaper finishes in the background.
func TestWaitBounded(t *testing.T) {
	sio, err := runtime.NewStdio(nil, 1<<20)
	must(t, err)
	defer sio.Close()
	sio.CloseChild()
	sio.Start()
	release := make(chan struct{})
	killed := make(chan struct{}, 1)
	r := runtime.NewReaper(os.Getpid(), func() (*os.ProcessState, error) { <-release; return nil, errors.New("released") },
		func() { killed <- struct{}{} })
	cleaned := make(chan struct{})
	start := time.Now()
	res, err := runtime.Wait(context.Background(), 200*time.Millisecond, sio, r)
	r.AfterEnd(func() { close(cleaned) })
	if d := time.Since(start); d > 200*time.Millisecond+runtime.KillGrace+time.Second {
		t.Errorf("wait took %s", d)
	}
	if !errors.Is(err, runtime.ErrTimeout) || !strings.Contains(err.Error(), "background reaper") || res.ExitCode != -1 {
		t.Fatalf("want ErrTimeout naming the background reaper, got %v (exit %d)", err, res.ExitCode)
	}
	select {
	case <-killed:
	default:
		t.Error("the run was never killed")
	}
	select {
	case <-cleaned:
		t.Fatal("the run's state was removed while its processes lived")
	default:
	}
	close(release)
	select {
	case <-cleaned:
	case <-time.After(5 * time.Second):
		t.Fatal("the background reaper never removed the run's state")
	}
}
