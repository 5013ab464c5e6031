package landlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/kptr-dev/kptr/runtime/seccomp"
	"golang.org/x/sys/unix"
)

// The landlock tier runs a function through kptr's C launcher and confiner
// (runtime/launcher's landlock.c describes both), from what Landlock.plan and
// Landlock.launch compute; this file keeps the run's plan (confineSpec) and
// the probe, which confines a Go child of kptr the same way (applyConfinement)
// and checks that the confinement holds.
const landlockProbeArg = "__kptr_landlock_probe"

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
	// NoFile, FSize and Data are RLIMIT_NOFILE, RLIMIT_FSIZE and
	// RLIMIT_DATA (0: unchanged).
	NoFile, FSize, Data uint64
	// NoMetadata refuses MetadataCalls: the function's uid owns the image.
	NoMetadata bool
	// Pids bounds the processes the function may add to those its uid
	// already has (RLIMIT_NPROC counts per uid, not per run).
	Pids uint64
}

// applyConfinement confines the calling thread as spec says, in this order:
// what needs privilege or /proc first (rlimits, oom_score_adj, the working
// directory, the uid switch), then no_new_privs, Landlock and seccomp.
func applyConfinement(spec confineSpec) error {
	for _, l := range []struct {
		res int
		val uint64
	}{{unix.RLIMIT_NOFILE, spec.NoFile}, {unix.RLIMIT_FSIZE, spec.FSize}, {unix.RLIMIT_DATA, spec.Data}, {unix.RLIMIT_CORE, 0}} {
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
	return seccomp.Load(spec.seccompPolicy())
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
