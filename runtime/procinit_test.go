package runtime

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// procInitChild marks the test binary started as ProcessInit's process
// (never set by anything else: the guard of this test's re-exec).
const procInitChild = "KPTR_TEST_PROCINIT_CHILD"

// orphanScript is CMD: it leaves an orphan (a sleep whose parent exits at
// once) that ends after a while, says "ready" with its pid, and waits for
// SIGTERM, on which it exits 42.
const orphanScript = `sh -c 'sleep 1 & exit 0'; trap 'exit 42' TERM; echo ready $$; while :; do sleep 0.05; done`

// startProcessInit starts ProcessInit (this test binary) running argv, as
// pid 1 of a new pid namespace (in a user namespace mapping only the
// current uid, so it works as uid 999 without capabilities) when newPID is
// set, else as a plain child. stdout is CMD's.
func startProcessInit(t *testing.T, newPID bool, argv ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	// /proc/self/exe: under ReexecSealed, os.Executable names a memfd.
	cmd := exec.Command("/proc/self/exe", append([]string{"-test.run=^TestProcessInit$", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), procInitChild+"=1", "KPTR_NO_REEXEC=1")
	cmd.Stderr = os.Stderr
	if newPID {
		uid, gid := os.Getuid(), os.Getgid()
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWPID | syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

// children lists pid's children with their state letters (Z: zombie).
func children(pid int) map[int]byte {
	out := map[int]byte{}
	for _, c := range childrenOf(pid) {
		fd, err := unix.Open("/proc/"+strconv.Itoa(c), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		out[c] = threadState(fd, strconv.Itoa(c))
		unix.Close(fd)
	}
	return out
}

// kptr init (ProcessInit), as pid 1 of a pid namespace and as a child
// subreaper: the orphan CMD leaves is reparented to it and reaped when it
// ends (no zombie stays), SIGTERM to init reaches CMD, CMD's exit code is
// init's, and a CMD killed by a signal makes init exit 128+N. Runs as root
// and (make test-unpriv) as uid 999 without capabilities.
func TestProcessInit(t *testing.T) {
	if os.Getenv(procInitChild) == "1" {
		os.Unsetenv(procInitChild)
		i := slices.Index(os.Args, "--")
		code, err := ProcessInit(os.Args[i+1:])
		if err != nil {
			os.Stderr.WriteString("ProcessInit: " + err.Error() + "\n")
			os.Exit(99)
		}
		os.Exit(code)
	}
	for _, newPID := range []bool{true, false} {
		name := "subreaper"
		if newPID {
			name = "pid1"
		}
		t.Run(name, func(t *testing.T) {
			cmd, out := startProcessInit(t, newPID, "/bin/sh", "-c", orphanScript)
			line, err := out.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "ready ") {
				t.Fatalf("CMD said %q: %v", line, err)
			}
			init := cmd.Process.Pid
			if ns := nsPid(t, init); newPID && ns != "1" {
				t.Fatalf("init is pid %s of its namespace, want 1", ns)
			}
			// The orphan is reparented to init, ends after a second and
			// must be reaped: init is left with CMD alone, not a zombie.
			deadline := time.Now().Add(15 * time.Second)
			sawOrphan := false
			var kids map[int]byte
			for {
				kids = children(init)
				sawOrphan = sawOrphan || len(kids) > 1
				if sawOrphan && len(kids) == 1 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !sawOrphan {
				t.Fatalf("the orphan was never reparented to init: children %v", kids)
			}
			if len(kids) != 1 {
				t.Fatalf("init's children after the orphan ended: %v (state Z: a zombie nobody reaps)", kids)
			}
			for pid, st := range kids {
				if st == 'Z' {
					t.Fatalf("CMD (pid %d) is a zombie", pid)
				}
			}
			// SIGTERM to init reaches CMD, whose exit code is init's.
			if err := cmd.Process.Signal(unix.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := waitCode(t, cmd); code != 42 {
				t.Errorf("init exited %d after SIGTERM, want CMD's 42", code)
			}
		})
	}
	t.Run("killed", func(t *testing.T) {
		cmd, _ := startProcessInit(t, true, "/bin/sh", "-c", "kill -KILL $$")
		if code := waitCode(t, cmd); code != 128+int(unix.SIGKILL) {
			t.Errorf("init exited %d, want 137 for a CMD killed by SIGKILL", code)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := ProcessInit([]string{"/nonexistent/cmd"})
		var ie *InitError
		if !errors.As(err, &ie) || !ie.Input {
			t.Errorf("ProcessInit of a missing command: %#v", err)
		}
	})
}

// nsPid is pid's pid in its innermost pid namespace (/proc/PID/status NSpid).
func nsPid(t *testing.T, pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "NSpid:" {
			return f[len(f)-1]
		}
	}
	t.Fatal("no NSpid in /proc/PID/status")
	return ""
}

// waitCode waits (at most 15 s) for cmd and returns its exit code.
func waitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode()
	case <-time.After(15 * time.Second):
		t.Fatal("init did not exit")
		return -1
	}
}

// childrenOf lists the children of process pid: from the children files of
// its threads (/proc/PID/task/*/children: children and reparented orphans
// attach to one of its threads), else by the parent field of every
// /proc/*/stat (kernels without CONFIG_PROC_CHILDREN).
func childrenOf(pid int) []int {
	self := "/proc/" + strconv.Itoa(pid)
	if tasks, err := os.ReadDir(self + "/task"); err == nil {
		var out []int
		ok := true
		for _, t := range tasks {
			b, err := os.ReadFile(self + "/task/" + t.Name() + "/children")
			if err != nil {
				ok = false
				break
			}
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					out = append(out, n)
				}
			}
		}
		if ok {
			return out
		}
	}
	des, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	want := strconv.Itoa(pid)
	for _, de := range des {
		n, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + de.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == want {
			out = append(out, n)
		}
	}
	return out
}
