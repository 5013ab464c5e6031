package namespace

import (
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/opencontainers/runc/libcontainer/exeseal"
)

// The kernel sends a child's parent-death signal when the thread that
// forked it ends, and Go ends a thread whenever a goroutine exits while
// locked to it (libcontainer's mount-source helper does, on every start).
// Children forked through OnStableThread (every sandbox init, host function
// and probe) survive the forking goroutine's thread ending.
func TestForkOnStableThread(t *testing.T) {
	for _, stable := range []bool{true, false} {
		done := make(chan *exec.Cmd)
		go func() {
			goruntime.LockOSThread() // never unlocked: this thread ends with the goroutine
			cmd := exec.Command("/bin/sleep", "0.5")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var err error
			if stable {
				err = runtime.OnStableThread(cmd.Start)
			} else {
				err = cmd.Start()
			}
			if err != nil {
				t.Error(err)
			}
			done <- cmd
		}()
		cmd := <-done
		time.Sleep(100 * time.Millisecond) // the goroutine and its thread are gone
		err := cmd.Wait()
		if stable && err != nil {
			t.Fatalf("child forked on a stable thread died with the caller's thread: %v", err)
		}
		if !stable && err == nil {
			t.Log("control: the kernel did not kill the child of an ended thread (then this test proves less)")
		}
		if !stable && err != nil {
			t.Logf("control: forked from the ending thread, the child got %v", err)
		}
	}
}

// TestMain ran ReexecSealed, as kptr does at start-up: either libcontainer
// can seal the binary through a read-only overlayfs (root), or this binary
// was re-executed from a sealed memfd (the marker variable is gone and the
// arguments are kept); either way a sandbox start never copies the binary.
func TestSealedReexec(t *testing.T) {
	if os.Getenv("KPTR_NO_REEXEC") != "" {
		t.Skip("KPTR_NO_REEXEC set")
	}
	switch SealMode() {
	case SealReexec:
		if !exeseal.IsSelfExeCloned() {
			t.Fatal("/proc/self/exe is not a sealed copy after ReexecSealed")
		}
	case SealOverlay:
		if exeseal.IsSelfExeCloned() {
			t.Fatal("overlay mode, yet re-executed")
		}
		f, err := exeseal.CloneSelfExe(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if exeseal.IsCloned(f) {
			t.Fatal("libcontainer's clone is a memfd copy, not the overlay")
		}
	default:
		t.Fatalf("ReexecSealed left libcontainer copying the binary on every start (mode %q)", SealMode())
	}
	if os.Getenv(reexecEnv) != "" {
		t.Errorf("%s leaked into the environment", reexecEnv)
	}
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[1], "-test.") {
		t.Errorf("arguments not kept: %q", os.Args)
	}
	if os.Geteuid() != 0 && SealMode() != SealReexec {
		t.Errorf("unprivileged: want the sealed re-exec, got %q", SealMode())
	}
}
