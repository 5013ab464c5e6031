package runtime

import (
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/exeseal"
)

// The kernel sends a child's parent-death signal when the thread that
// forked it ends, and Go ends a thread whenever a goroutine exits while
// locked to it (libcontainer's mount-source helper does, on every start).
// Children forked through onStableThread (every sandbox init, host function
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
				err = onStableThread(cmd.Start)
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

// TestMain re-executed this binary from a sealed memfd (ReexecSealed), as
// kptr does at start-up: libcontainer then skips its per-run copy of the
// binary. The marker variable is gone and the arguments are kept.
func TestSealedReexec(t *testing.T) {
	if os.Getenv("KPTR_NO_REEXEC") != "" {
		t.Skip("KPTR_NO_REEXEC set")
	}
	if !exeseal.IsSelfExeCloned() {
		t.Fatal("/proc/self/exe is not a sealed copy after ReexecSealed")
	}
	if os.Getenv(reexecEnv) != "" {
		t.Errorf("%s leaked into the environment", reexecEnv)
	}
	if len(os.Args) < 2 || !strings.HasPrefix(os.Args[1], "-test.") {
		t.Errorf("arguments not kept: %q", os.Args)
	}
}
