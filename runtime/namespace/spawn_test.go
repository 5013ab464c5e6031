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
	"golang.org/x/sys/unix"
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

// TestMain ran ReexecSealed, as kptr does at start-up. Where a run could
// write this binary (sealNeeded), either libcontainer can seal it through
// a read-only overlayfs (root), or this binary was re-executed from a
// sealed memfd (the marker variable is gone and the arguments are kept);
// either way a sandbox start never copies the binary. Where no run can
// write it (the test binary is root's, 0755, as an installed kptr is),
// nothing is sealed or copied at all, and nsinit starts from the binary:
// then the test runs itself again with sealing forced, so that the sealing
// ways stay tested.
func TestSealedReexec(t *testing.T) {
	if os.Getenv("KPTR_NO_REEXEC") != "" {
		t.Skip("KPTR_NO_REEXEC set")
	}
	if !selfSealNeeded() {
		if SealMode() != SealNotNeeded {
			t.Fatalf("no run can write the binary, yet ReexecSealed chose %q", SealMode())
		}
		if exe, err := sealedExe(t.TempDir()); err != nil || exe != "/proc/self/exe" {
			t.Fatalf("nsinit starts from %q (%v), want the binary itself", exe, err)
		}
		if exeseal.IsSelfExeCloned() {
			t.Fatal("re-executed from a copy although no run can write the binary")
		}
		cmd := exec.Command("/proc/self/exe", "-test.run", "^TestSealedReexec$", "-test.count", "1")
		cmd.Env = append(os.Environ(), sealAlwaysEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("with sealing forced: %v\n%s", err, out)
		}
		return
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
	if exe, err := sealedExe(t.TempDir()); err != nil || exe == "/proc/self/exe" && !exeseal.IsSelfExeCloned() {
		t.Errorf("a run could write the binary, yet nsinit starts from it (%q, %v)", exe, err)
	}
	if os.Geteuid() != 0 && SealMode() != SealReexec {
		t.Errorf("unprivileged: want the sealed re-exec, got %q", SealMode())
	}
}

// sealNeeded spares the copy only for a binary of root's that no group,
// other or ACL lets anyone else write.
func TestSealNeeded(t *testing.T) {
	for _, c := range []struct {
		uid  uint32
		mode uint32
		acl  bool
		want bool
	}{
		{0, 0o100755, false, false},  // installed: /usr/local/bin/kptr
		{0, 0o100555, false, false},  // read-only
		{0, 0o100700, false, false},  // root's alone
		{999, 0o100755, false, true}, // built or installed by its user: runs map that uid
		{0, 0o100775, false, true},   // a group may write
		{0, 0o100757, false, true},   // anyone may write
		{0, 0o100755, true, true},    // an ACL may grant a write
	} {
		if got := sealNeeded(unix.Stat_t{Uid: c.uid, Mode: c.mode}, c.acl); got != c.want {
			t.Errorf("uid %d mode %o acl %v: sealNeeded %v, want %v", c.uid, c.mode, c.acl, got, c.want)
		}
	}
}

// The premise of sealNeeded: a run's root, in a user namespace whose root
// is an unprivileged host uid (kptr's own when kptr is not root,
// RootHostIDBase when it is), cannot open a file of root's without a
// group or other write bit for writing, although it holds every capability
// in its namespace. (/etc/passwd is such a file on any host; the child only
// opens it, and writes nothing.)
func TestRunRootCannotWriteRootsFiles(t *testing.T) {
	const target = "/etc/passwd"
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil || sealNeeded(st, false) {
		t.Skipf("%s is not a file of root's without group or other write here", target)
	}
	host := os.Geteuid()
	if host == 0 {
		host = runtime.RootHostIDBase
	}
	cmd := exec.Command("/bin/sh", "-c", "exec 3>>"+target)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: host, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
		// container root, as nsinit's setresuid(0) after the maps makes
		// the init: until then a clone of host root keeps host uid 0
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.GidMappings[0].HostID = runtime.RootHostIDBase
	}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a user namespace's root mapped to host uid %d opened %s for writing", host, target)
	}
	if !strings.Contains(string(out), "ermission denied") {
		t.Fatalf("want permission denied, got %v: %s", err, out)
	}
}
