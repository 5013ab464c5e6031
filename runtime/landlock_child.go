package runtime

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The landlock tier runs a function as three generations of processes:
//
//	kptr ── launcher (kptr re-executed: landlockLaunchArg) ── confiner (kptr: landlockExecArg) ─execve→ function
//
// The launcher is a child subreaper: every process the function starts,
// also one that double-forks or calls setsid, stays its descendant or is
// reparented to it, so when the function's main process exits, or kptr asks
// (SIGTERM: timeout, output cap, cancellation) or dies (parent-death
// signal), the launcher SIGKILLs its children until it has none left, and
// exits as the function did. The confiner applies the confinement to itself
// (rlimits, oom_score_adj, the function's uid when kptr is root,
// no_new_privs, Landlock, the seccomp filter), in a new session, on the
// thread that then executes the entrypoint.
//
// fd 3 of both carries the confineSpec (JSON); fd 4 is the status pipe, on
// which either writes why the function could not be started (EOF without a
// word: it started).
const (
	landlockLaunchArg = "__kptr_landlock_launch"
	landlockExecArg   = "__kptr_landlock_exec"
	landlockProbeArg  = "__kptr_landlock_probe"
)

// confineSpec is everything the confiner needs; a pure function of the run.
type confineSpec struct {
	Exec   hostExec
	Env    []string
	Dir    string // host path of the working directory
	Policy landlockPolicy
	ABI    int
	// UID and GID the function runs as when kptr is root (never 0); -1
	// keeps kptr's own.
	UID, GID int
	// NoFile and FSize are RLIMIT_NOFILE and RLIMIT_FSIZE (0: unchanged).
	NoFile, FSize uint64
	// NoMetadata refuses metadataCalls: the function's uid owns the image.
	NoMetadata bool
	// Pids bounds the processes the function may add to those its uid
	// already has (RLIMIT_NPROC counts per uid, not per run).
	Pids uint64
}

const statusFD, specFD = 4, 3

// launcherMain is the launcher's whole life (see above); it never returns.
func launcherMain() {
	goruntime.LockOSThread()
	status := os.NewFile(statusFD, "status")
	fail := func(err error) {
		fmt.Fprintf(status, "launcher: %v", err)
		os.Exit(125)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail(fmt.Errorf("subreaper: %w", err))
	}
	// kptr gone (SIGKILL at Argo CD's deadline): end the run as if timed out.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0)
	// kptr passes its pid: it may be pid 1 (a container's entrypoint), so
	// "reparented to init" is not the test of its death.
	if len(os.Args) < 3 || os.Args[2] != strconv.Itoa(os.Getppid()) {
		fail(errors.New("kptr exited before the launcher started"))
	}
	cmd := exec.Command("/proc/self/exe", landlockExecArg)
	cmd.Env = []string{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{os.NewFile(specFD, "spec"), status}
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true, Pdeathsig: unix.SIGKILL}
	if err := cmd.Start(); err != nil {
		fail(fmt.Errorf("start: %w", err))
	}
	main := cmd.Process.Pid
	// The launcher holds none of the function's pipes: a function that does
	// not read stdin must give kptr EPIPE, and output ends with the run.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		for fd := range 3 {
			_ = unix.Dup3(int(null.Fd()), fd, 0)
		}
		null.Close()
	}
	unix.Close(specFD)

	mainCh, ended := reapChildren(main)
	var (
		mainStatus unix.WaitStatus
		seenMain   bool
	)
	select {
	case mainStatus = <-mainCh:
		seenMain = true
	case <-term:
	}
	killDescendants(ended)
	status.Close()
	if !seenMain {
		// main's status, if it was reaped, was sent before ended closed
		select {
		case mainStatus = <-mainCh:
			seenMain = true
		default:
		}
	}
	if !seenMain {
		os.Exit(128 + int(unix.SIGKILL))
	}
	// kptr reports 128+signal for a function killed by a signal, as for
	// the namespace tier.
	os.Exit(exitCode(mainStatus))
}

// killDescendants SIGKILLs the launcher's children until the reaper has
// seen the last one go (ended). A child that forks before it dies leaves
// its children to the launcher (the subreaper), which kills them in the
// next round; a fork bomb is bounded by RLIMIT_NPROC.
func killDescendants(ended <-chan struct{}) {
	// Usually the function left nothing: the reaper sees ECHILD at once.
	select {
	case <-ended:
		return
	case <-time.After(200 * time.Microsecond):
	}
	for {
		for _, pid := range childrenOf(os.Getpid()) {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		select {
		case <-ended:
			return
		case <-time.After(2 * time.Millisecond):
		}
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

// confinerMain applies the confinement and executes the function; it
// returns only to exit with 127 after reporting why on the status pipe.
func confinerMain() {
	goruntime.LockOSThread() // Landlock, seccomp and creds below are this thread's; execve runs on it
	status := os.NewFile(statusFD, "status")
	unix.CloseOnExec(statusFD)
	err := confine()
	fmt.Fprintf(status, "%v", err)
	os.Exit(127)
}

func confine() error {
	var spec confineSpec
	f := os.NewFile(specFD, "spec")
	err := json.NewDecoder(io.LimitReader(f, 4<<20)).Decode(&spec)
	f.Close()
	if err != nil {
		return fmt.Errorf("read run spec: %w", err)
	}
	if err := applyConfinement(spec); err != nil {
		return err
	}
	err = unix.Exec(spec.Exec.Path, spec.Exec.Argv, spec.Env)
	return fmt.Errorf("exec %s: %w", spec.Exec.Argv[0], err)
}

// applyConfinement confines the calling thread as spec says, in this order:
// what needs privilege or /proc first (rlimits, oom_score_adj, the working
// directory, the uid switch), then no_new_privs, Landlock and seccomp.
func applyConfinement(spec confineSpec) error {
	for _, l := range []struct {
		res int
		val uint64
	}{{unix.RLIMIT_NOFILE, spec.NoFile}, {unix.RLIMIT_FSIZE, spec.FSize}, {unix.RLIMIT_CORE, 0}} {
		if l.val == 0 && l.res != unix.RLIMIT_CORE {
			continue
		}
		if err := lowerRlimit(l.res, l.val); err != nil {
			return err
		}
	}
	if spec.Pids > 0 {
		uid := os.Getuid()
		if spec.UID >= 0 {
			uid = spec.UID
		}
		if err := lowerRlimit(unix.RLIMIT_NPROC, uint64(tasksOf(uid))+spec.Pids); err != nil {
			return err
		}
	}
	// The kernel's OOM killer picks the function before the sidecar.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	unix.Umask(0o022)
	if err := unix.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if spec.UID >= 0 {
		// kptr is root: empty the bounding set, then become the function's
		// uid (which clears every other capability set).
		for c := 0; c <= unix.CAP_LAST_CAP; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
		// This thread only (raw calls): it is the one that executes.
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			return fmt.Errorf("setgroups: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(spec.GID), uintptr(spec.GID), uintptr(spec.GID)); e != 0 {
			return fmt.Errorf("setresgid: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(spec.UID), uintptr(spec.UID), uintptr(spec.UID)); e != 0 {
			return fmt.Errorf("setresuid: %w", e)
		}
	}
	// A credential change clears the parent-death signal: set it (again).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := spec.Policy.restrictSelf(spec.ABI); err != nil {
		return err
	}
	return loadSeccomp(spec.Policy.Network, spec.NoMetadata)
}

// lowerRlimit sets both limits of res to v unless they are lower already (an
// unprivileged process can only lower them).
func lowerRlimit(res int, v uint64) error {
	var l unix.Rlimit
	if err := unix.Getrlimit(res, &l); err != nil {
		return fmt.Errorf("getrlimit %d: %w", res, err)
	}
	l.Cur, l.Max = min(l.Cur, v), min(l.Max, v)
	if err := unix.Setrlimit(res, &l); err != nil {
		return fmt.Errorf("setrlimit %d: %w", res, err)
	}
	return nil
}

// tasksOf counts the tasks (threads) of real uid uid: what RLIMIT_NPROC
// compares against.
func tasksOf(uid int) int {
	des, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	want := strconv.Itoa(uid)
	for _, de := range des {
		if _, err := strconv.Atoi(de.Name()); err != nil {
			continue
		}
		f, err := os.Open("/proc/" + de.Name() + "/status")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		mine := false
		for sc.Scan() {
			l := sc.Text()
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				if fs := strings.Fields(v); len(fs) == 0 || fs[0] != want {
					break
				}
				mine = true
			}
			if v, ok := strings.CutPrefix(l, "Threads:"); ok && mine {
				t, _ := strconv.Atoi(strings.TrimSpace(v))
				n += t
				break
			}
		}
		f.Close()
	}
	return n
}

// landlockProbeMain confines itself as a run would (with the directory
// given as the run directory and no rootfs) and checks that the
// confinement holds: a host file is unreadable, an AF_INET socket refused.
// It prints "ok" or the first failure.
func landlockProbeMain(dir string) {
	goruntime.LockOSThread()
	abi := landlockABI()
	spec := confineSpec{ABI: abi, UID: -1, GID: -1, Dir: dir, Pids: 64,
		Policy: landlockPolicy{ReadWrite: []string{dir}, DevRW: []string{os.DevNull}}}
	if err := applyConfinement(spec); err != nil {
		fmt.Print(err)
		os.Exit(0)
	}
	if _, err := os.ReadFile("/etc/passwd"); err == nil || !errors.Is(err, unix.EACCES) {
		fmt.Printf("a host file is readable after landlock_restrict_self (%v)", err)
		os.Exit(0)
	}
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0); err == nil {
		unix.Close(fd)
		fmt.Print("an AF_INET socket was created under the seccomp filter")
		os.Exit(0)
	}
	if err := os.WriteFile(dir+"/probe", []byte("x"), 0o600); err != nil {
		fmt.Printf("the run directory is not writable: %v", err)
		os.Exit(0)
	}
	fmt.Print("ok")
	os.Exit(0)
}
