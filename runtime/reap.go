package runtime

import (
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// KillGrace bounds how long a run may take to end once it has been killed
// (timeout, context, output cap): SIGKILL ends a process within
// milliseconds unless it sleeps uninterruptibly in the kernel (a hung
// FUSE or NFS mount). After it, Run returns and the reaper carries on in
// the background.
const KillGrace = 2 * time.Second

// reaper owns the end of one run's process tree: it waits for the run's
// first process (a child of kptr), reaps the threads of that process that
// made kptr their tracer, and kills the whole tree on request. It is the one
// place that knows how a run ends, so every runner (the namespace sandbox,
// Host, a future tier without a pid namespace) ends its runs alike.
//
// Guarantees:
//   - kill ends every process of the run, stopped and traced ones included:
//     the kill function the runner gives it reaches the whole tree (SIGKILL
//     to the init of the run's pid namespace, which the kernel turns into
//     SIGKILL for every process in it; a process group on the host; a tier
//     without a pid namespace passes what tracks its processes).
//   - A thread of the first process may make kptr its tracer with
//     PTRACE_TRACEME (kptr is that process's parent). Such a thread, once
//     dead, stays a zombie until its tracer waits for it with __WALL; while
//     it does, the kernel reports neither the exit of the process nor (its
//     pid is still allocated) the end of the pid namespace, so a plain wait
//     never returns. The reaper finds those zombies in /proc/<pid>/task and
//     reaps them with __WALL, from the start of the run to its end.
//   - wait and end never block longer than they are told: what is not reaped
//     when end's grace has passed is left to the background, where the
//     reaper keeps reaping and then runs the hooks given to afterEnd.
//
// The first process is identified by a pidfd and a /proc directory opened
// while it was certainly kptr's unreaped child, so a recycled pid is never
// signalled or scanned.
type Reaper struct {
	pid  int
	kill func()
	done chan struct{} // closed once the first process is reaped
	ps   *os.ProcessState
	err  error

	mu     sync.Mutex
	pidfd  int // -1: none (pidfd_open unavailable or closed)
	procfd int // /proc/<pid>; -1 when closed
	after  []func()
}

// Polling for traced zombies starts fast (a function that exits at once is
// noticed at once) and slows down for long runs.
const (
	reapPollMin = 5 * time.Millisecond
	reapPollMax = 200 * time.Millisecond
)

// NewReaper starts reaping the process pid, which must be an unreaped child
// of kptr: waitFn reaps it (os.Process.Wait or libcontainer's Process.Wait)
// and kill ends every process of the run. When kill is nil the first
// process is killed through its pidfd (a sandbox init: its pid namespace
// goes with it).
func NewReaper(pid int, waitFn func() (*os.ProcessState, error), kill func()) *Reaper {
	r := &Reaper{pid: pid, done: make(chan struct{}), pidfd: -1, procfd: -1}
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		r.pidfd = fd
	}
	if fd, err := unix.Open("/proc/"+strconv.Itoa(pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		r.procfd = fd
	}
	r.kill = kill
	if r.kill == nil {
		r.kill = func() { r.signal(unix.SIGKILL) }
	}
	go func() {
		r.ps, r.err = waitFn()
		r.mu.Lock()
		for _, fd := range []*int{&r.pidfd, &r.procfd} {
			if *fd >= 0 {
				unix.Close(*fd)
				*fd = -1
			}
		}
		after := r.after
		r.after = nil
		close(r.done)
		r.mu.Unlock()
		for _, f := range after {
			f()
		}
	}()
	go r.reapTracedLoop()
	return r
}

// signal sends sig to the first process (never to a recycled pid).
func (r *Reaper) signal(sig unix.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.pidfd >= 0:
		_ = unix.PidfdSendSignal(r.pidfd, sig, nil, 0)
	case r.finished():
	default:
		_ = unix.Kill(r.pid, sig) // unreaped (done is closed under mu): still ours
	}
}

// finished says whether the first process has been reaped.
func (r *Reaper) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// end kills every process of the run and waits up to grace for the first
// one to be reaped (by then the kernel has ended the rest: its pid
// namespace, or its process group, was killed). false: it was not, and is
// left to the background.
func (r *Reaper) End(grace time.Duration) bool {
	r.kill()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
		return false
	}
}

// afterEnd runs f once the first process is reaped: now if it already is,
// else in the background.
func (r *Reaper) AfterEnd(f func()) {
	r.mu.Lock()
	if !r.finished() {
		r.after = append(r.after, f)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	f()
}

// reapTracedLoop reaps traced zombie threads until the first process is
// reaped.
func (r *Reaper) reapTracedLoop() {
	d := reapPollMin
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-t.C:
		}
		r.reapTraced()
		d = min(2*d, reapPollMax)
		t.Reset(d)
	}
}

// reapTraced reaps the zombie threads of the first process that kptr
// traces; others (untraced threads reap themselves) get ECHILD.
func (r *Reaper) reapTraced() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procfd < 0 {
		return
	}
	// "task" is looked up afresh, so it fails once the process is gone.
	fd, err := unix.Openat(r.procfd, "task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	dir := os.NewFile(uintptr(fd), "task")
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil || tid == r.pid || threadState(r.procfd, name) != 'Z' {
			continue
		}
		var si unix.Siginfo
		_ = unix.Waitid(unix.P_PID, tid, &si, unix.WEXITED|unix.WNOHANG|unix.WALL, nil)
	}
}

// threadState is the state letter of /proc/<pid>/task/<tid>/stat (0 when
// unreadable).
func threadState(procfd int, tid string) byte {
	fd, err := unix.Openat(procfd, "task/"+tid+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	var buf [512]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return 0
	}
	s := buf[:n]
	// "tid (comm) S ...": comm may hold anything, the last ')' ends it.
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			if i+2 < len(s) {
				return s[i+2]
			}
			return 0
		}
	}
	return 0
}
