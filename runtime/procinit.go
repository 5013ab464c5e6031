package runtime

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"

	"golang.org/x/sys/unix"
)

// ProcessInit is `kptr init -- CMD [ARGS...]`: a minimal init (as tini's
// default mode) for a container whose entrypoint would otherwise be a
// program that never reaps the orphans it inherits. Argo CD's
// argocd-cmp-server, the kptr sidecar's server, is such a program
// (argoproj/argo-cd#29349): as the container's pid 1 it inherits every
// process whose parent died (a `kptr cache fetch` that outlived the render
// Argo CD killed at its deadline), and each one stays a zombie when it
// ends, until the pids cgroup is full.
//
// Guarantees:
//   - CMD is started as the only child, with ProcessInit's stdio,
//     environment and working directory, in a process group of its own
//     (the terminal's foreground group when stdin is one).
//   - Every child, CMD and every orphan reparented to this process, is
//     reaped as it ends (wait4(-1, __WALL)): none stays a zombie.
//   - SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH sent to
//     this process are forwarded to CMD (not its group, as tini without -g),
//     through a pidfd: never to a recycled pid.
//   - When not pid 1 (a shared process namespace, a container runtime
//     without --init) it makes itself a child subreaper, so CMD's orphans
//     are reparented to it rather than to an init that may not reap them.
//   - It returns CMD's exit status as soon as CMD ends: its exit code, or
//     128+N when signal N killed it. (Pid 1 returning ends its pid
//     namespace: the kernel kills what is left in it.)
//
// The error, when CMD could not be started, is a *InitError.
func ProcessInit(argv []string) (int, error) {
	if len(argv) == 0 {
		return 0, &InitError{Usage: true, Err: errors.New("name the command to run, as in kptr init -- CMD [ARGS...]")}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, &InitError{Input: true, Err: err}
	}
	if os.Getpid() != 1 {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return 0, &InitError{Err: fmt.Errorf("become a child subreaper: %w", err)}
		}
	}
	// Registered before CMD starts: a signal that arrives in between is
	// queued and forwarded, not acted on by this process.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	defer signal.Stop(sigs)
	attr := &unix.SysProcAttr{Setpgid: true}
	if _, err := unix.IoctlGetTermios(0, unix.TCGETS); err == nil {
		attr.Foreground, attr.Ctty = true, 0
	}
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   attr,
	})
	if err != nil {
		ie := &InitError{Err: err}
		var pe *os.PathError
		ie.Input = errors.As(err, &pe) && (errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOEXEC))
		return 0, ie
	}
	status, _ := reapChildren(p.Pid)
	for {
		select {
		case s := <-sigs:
			_ = p.Signal(s) // ESRCH: CMD just ended, its status is on its way
		case ws := <-status:
			return exitCode(ws), nil
		}
	}
}

// InitError is why ProcessInit could not start its command.
type InitError struct {
	Usage bool // the command line names no command
	Input bool // the command named is not there or not executable
	Err   error
}

func (e *InitError) Error() string { return e.Err.Error() }
func (e *InitError) Unwrap() error { return e.Err }

// reapChildren reaps every child of this process as it ends, orphans
// reparented to a subreaper included, until it has none left (then ended
// is closed). The status of the child main is sent once on mainStatus
// (buffered: it is there, before ended closes, whether or not anyone
// waits). It must be called once main was started, and be the only one
// waiting for this process's children.
func reapChildren(main int) (mainStatus <-chan unix.WaitStatus, ended <-chan struct{}) {
	st := make(chan unix.WaitStatus, 1)
	end := make(chan struct{})
	go func() {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil { // ECHILD: no child is left
				close(end)
				return
			}
			if pid == main && (ws.Exited() || ws.Signaled()) {
				st <- ws
			}
		}
	}()
	return st, end
}

// exitCode is the exit status of a process as kptr reports it: its exit
// code, or 128+N when signal N killed it (as shells do).
func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
