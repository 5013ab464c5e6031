package namespace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/seccomp"
	"golang.org/x/sys/unix"
)

// Probe checks, in the current process's environment, every prerequisite of
// the sandbox and returns one result per prerequisite together with the
// Features buildConfig adapts to. It starts short-lived child processes in new
// namespaces; outside them it only creates the run-state directory (if
// missing) and, for the overlay probe, a scratch directory in it that it
// removes again.
func Probe() ([]runtime.ProbeResult, Features) {
	f := Features{
		Root:       runtime.CanMapRange(),
		UID:        os.Geteuid(),
		GID:        os.Getegid(),
		HardLimits: hardLimits(),
	}
	var out []runtime.ProbeResult
	add := func(r runtime.ProbeResult) { out = append(out, r) }

	// One child in every namespace the sandbox uses normally answers
	// everything; only when it cannot be created do we look for the culprit.
	all := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	// The overlay step mounts in the run-state directory, where runs keep
	// their upper layers, with the options runs use.
	stateErr := runtime.EnsurePrivateDir(runtime.DefaultStateDir())
	ovStep := "overlay=" + overlayProbeDir(runtime.DefaultStateDir())
	// overlay first: "mount" covers /tmp; then pivot (it changes the root),
	// and the seccomp filter last (it refuses mounts).
	steps, err := probeClone(all, ovStep, "mount", "proc", "procbind", "hostname", "pivot", "seccomp")
	runtime.RemoveTree(overlayProbeDir(runtime.DefaultStateDir()))
	if err == nil && stateErr != nil {
		steps[ovStep] = fmt.Errorf("state dir: %w", stateErr)
	}
	if err == nil {
		overlayVerified.Store(runtime.DefaultStateDir(), steps[ovStep])
	}
	if err != nil {
		if _, uerr := probeClone(unix.CLONE_NEWUSER); uerr != nil {
			add(usernsFailure(uerr))
			return out, f
		}
		add(runtime.ProbeResult{Name: "userns", Status: runtime.StatusOK, Detail: "user namespace created"})
		for _, ns := range []struct {
			name string
			flag uintptr
			fix  string
		}{
			{"mount", unix.CLONE_NEWNS, fixSeccomp},
			{"pid", unix.CLONE_NEWPID, fixSeccomp},
			{"netns", unix.CLONE_NEWNET, fixSeccomp},
			{"ipc-uts", unix.CLONE_NEWIPC | unix.CLONE_NEWUTS, fixSeccomp},
		} {
			if _, err := probeClone(unix.CLONE_NEWUSER | ns.flag); err != nil {
				add(runtime.ProbeResult{Name: ns.name, Status: runtime.StatusFailed, Detail: "cannot create namespace: " + err.Error(), Fix: ns.fix})
				return out, f
			}
		}
		add(runtime.ProbeResult{Name: "namespaces", Status: runtime.StatusFailed, Detail: "cannot create all namespaces together: " + err.Error(), Fix: fixSeccomp})
		return out, f
	}
	add(runtime.ProbeResult{Name: "userns", Status: runtime.StatusOK, Detail: "user namespace created; container root maps to " + idMapDetail(f)})
	add(runtime.ProbeResult{Name: "netns", Status: runtime.StatusOK, Detail: "network, ipc, uts and pid namespaces created"})
	if e := steps["mount"]; e != nil {
		add(runtime.ProbeResult{Name: "mount", Status: runtime.StatusFailed, Detail: "mount in a new mount namespace refused: " + e.Error(), Fix: fixMount})
		return out, f
	}
	if e := steps["pivot"]; e != nil {
		add(runtime.ProbeResult{Name: "mount", Status: runtime.StatusFailed, Detail: "pivot_root in a new mount namespace refused: " + e.Error(), Fix: fixSeccomp + " and pivot_root"})
		return out, f
	}
	add(runtime.ProbeResult{Name: "mount", Status: runtime.StatusOK, Detail: "tmpfs mounted and root pivoted in a private mount namespace"})
	if e := steps["hostname"]; e == nil {
		f.Hostname = true
		add(runtime.ProbeResult{Name: "hostname", Status: runtime.StatusOK, Detail: "functions get their own hostname (kptr)"})
	} else {
		// CRI-O's default profile grants sethostname only with
		// CAP_SYS_ADMIN: runs then keep the uts namespace's inherited name.
		add(runtime.ProbeResult{Name: "hostname", Status: runtime.StatusDegraded, Detail: "sethostname refused in the uts namespace (" + e.Error() + "): functions see the pod's hostname; runs do not set one",
			Fix: "a seccomp profile allowing sethostname (CRI-O's default grants it only with CAP_SYS_ADMIN); harmless otherwise"})
	}
	if e := steps["seccomp"]; e != nil {
		add(runtime.ProbeResult{Name: "seccomp-load", Status: runtime.StatusFailed, Detail: "loading a seccomp filter refused: " + e.Error(), Fix: "a seccomp profile allowing seccomp(2) and prctl(2)"})
		return out, f
	}
	switch {
	case steps["proc"] == nil:
		f.FreshProc = true
		add(runtime.ProbeResult{Name: "proc", Status: runtime.StatusOK, Detail: "fresh procfs mounted"})
	case steps["procbind"] == nil:
		add(runtime.ProbeResult{Name: "proc", Status: runtime.StatusDegraded,
			Detail: "fresh procfs refused (" + steps["proc"].Error() + "); binding the existing /proc instead: functions then see the sidecar's process list and command lines (not its environments or memory)",
			Fix:    fixProc})
	default:
		add(runtime.ProbeResult{Name: "proc", Status: runtime.StatusFailed,
			Detail: "neither a fresh procfs (" + steps["proc"].Error() + ") nor a bind of /proc (" + steps["procbind"].Error() + ") works",
			Fix:    fixProc})
		return out, f
	}
	if _, err := os.Stat("/proc/self/ns/cgroup"); err == nil {
		f.CgroupNS = true
		add(runtime.ProbeResult{Name: "cgroupns", Status: runtime.StatusOK, Detail: "cgroup namespaces available"})
	} else {
		add(runtime.ProbeResult{Name: "cgroupns", Status: runtime.StatusDegraded, Detail: "kernel without cgroup namespaces: functions see the host's cgroup paths", Fix: "a kernel ≥ 4.6"})
	}
	if e := steps[ovStep]; e == nil {
		f.Overlay = true
		add(runtime.ProbeResult{Name: "overlay", Status: runtime.StatusOK, Detail: "overlayfs (userxattr) mountable in a user namespace: runs see a writable throw-away overlay of the image (its upper layer a tmpfs of the run's own; with the libcontainer launcher a directory in the run-state directory, removed after each run), tmpfs /tmp and $HOME"})
	} else {
		add(runtime.ProbeResult{Name: "overlay", Status: runtime.StatusDegraded, Detail: "overlayfs refused (" + e.Error() + "); runs see a read-only image with tmpfs /tmp and $HOME (writes elsewhere fail with EROFS)",
			Fix: "a kernel ≥ 5.11 (unprivileged overlayfs with userxattr) and a run-state directory ($XDG_RUNTIME_DIR or $TMPDIR) on a file system with user xattrs (ext4, xfs, tmpfs ≥ 6.6; not overlayfs)"})
	}
	f.Cgroups, out = probeCgroups(f, out)
	// The probe child maps kptr's own uid, so as root it reached the state
	// directory whatever its parents' modes; runs map other uids.
	sd := runtime.StateDirResult(runtime.DefaultStateDir(), f.Root)
	add(sd)
	if sd.Status == runtime.StatusFailed {
		return out, f
	}
	if !seccomp.Supported {
		add(runtime.ProbeResult{Name: "seccomp", Status: runtime.StatusFailed, Detail: seccomp.ErrUnsupported.Error(), Fix: "kptr for amd64 or arm64"})
	} else {
		add(runtime.ProbeResult{Name: "seccomp", Status: runtime.StatusOK, Detail: "kptr's seccomp allow-list loaded into every function, by either launcher (refused: namespaces, mounts, keyrings, bpf, io_uring, ptrace and the rest of Docker's default's list; unknown calls ENOSYS; foreign-architecture calls kill)"})
	}
	return out, f
}

const (
	fixUserns = "pod: securityContext.seccompProfile {type: Localhost} allowing unshare/clone with CLONE_NEWUSER " +
		"(RuntimeDefault refuses it; Unconfined is the blunt fix); node: sysctl user.max_user_namespaces > 0, " +
		"on Ubuntu ≥ 24.04 kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile allowing userns"
	fixSeccomp = "pod: securityContext.seccompProfile {type: Localhost} allowing unshare/clone with namespace flags (or Unconfined)"
	fixMount   = "pod: securityContext.appArmorProfile {type: Localhost} allowing mount (containerd's default profile denies it; Unconfined is the blunt fix)"
	fixProc    = "pod: securityContext.procMount: Unmasked (with hostUsers: false) lets a fresh /proc mount; otherwise an unmasked /proc must be visible to bind"
)

func usernsFailure(err error) runtime.ProbeResult {
	d := "cannot create a user namespace: " + err.Error()
	if b, e := os.ReadFile("/proc/sys/user/max_user_namespaces"); e == nil && strings.TrimSpace(string(b)) == "0" {
		d += " (user.max_user_namespaces is 0)"
	}
	if b, e := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); e == nil && strings.TrimSpace(string(b)) == "0" {
		d += " (kernel.unprivileged_userns_clone is 0)"
	}
	if b, e := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); e == nil && strings.TrimSpace(string(b)) == "1" {
		d += " (kernel.apparmor_restrict_unprivileged_userns is 1)"
	}
	return runtime.ProbeResult{Name: "userns", Status: runtime.StatusFailed, Detail: d, Fix: fixUserns}
}

func idMapDetail(f Features) string {
	if f.Root {
		return fmt.Sprintf("host uids %d-%d (functions run as nobody)", runtime.RootHostIDBase, runtime.RootHostIDBase+runtime.RootHostIDSize-1)
	}
	return fmt.Sprintf("uid %d only (functions run as container root = uid %d, never host root)", f.UID, f.UID)
}

// probeCgroups decides whether kptr itself can create cgroups with limits.
func probeCgroups(f Features, out []runtime.ProbeResult) (bool, []runtime.ProbeResult) {
	v2 := false
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		v2 = true
	}
	probeDir := "/sys/fs/cgroup/memory"
	if v2 {
		probeDir = "/sys/fs/cgroup"
	}
	if f.Root && unix.Access(probeDir, unix.W_OK) == nil {
		if _, err := os.Stat(filepath.Join(probeDir, "memory.max")); v2 && err != nil {
			// v2 without the memory controller at the root: treat as unusable.
		} else {
			return true, append(out, runtime.ProbeResult{Name: "cgroups", Status: runtime.StatusOK, Detail: "memory and pids limits enforced through cgroups"})
		}
	}
	detail := "cgroups not delegated to kptr: memory limit not enforced (the OOM killer picks functions first, oom_score_adj 1000); processes bounded by RLIMIT_NPROC inside each run's user namespace"
	return false, append(out, runtime.ProbeResult{Name: "cgroups", Status: runtime.StatusDegraded, Detail: detail,
		Fix: "pod: resources.limits.memory bounds the whole sidecar; per-function cgroup limits need kptr to run as root or a delegated cgroup v2 subtree"})
}

func hardLimits() map[int]uint64 {
	m := map[int]uint64{}
	for _, r := range []int{unix.RLIMIT_NPROC, unix.RLIMIT_NOFILE, unix.RLIMIT_AS, unix.RLIMIT_CORE} {
		var l unix.Rlimit
		if unix.Getrlimit(r, &l) == nil {
			m[r] = l.Max
		}
	}
	return m
}

// probeClone starts this binary as a probe child in new namespaces (flags)
// and asks it to try steps; it returns each step's error.
func probeClone(flags uintptr, steps ...string) (map[string]error, error) {
	cmd := exec.Command("/proc/self/exe", append([]string{probeArg}, steps...)...)
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Pdeathsig: syscall.SIGKILL}
	if flags&unix.CLONE_NEWUSER != 0 {
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	err := runtime.OnStableThread(cmd.Start)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%w: %s", err, msg)
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	res := map[string]error{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		name, msg, _ := strings.Cut(sc.Text(), " ")
		if msg == "ok" {
			res[name] = nil
		} else {
			res[name] = errors.New(strings.TrimPrefix(msg, "fail "))
		}
	}
	for _, s := range steps {
		if _, ok := res[s]; !ok {
			res[s] = errors.New("probe child did not answer")
		}
	}
	return res, nil
}

// probeChild runs inside the new namespaces; it prints "step ok" or
// "step fail <error>" per step.
func probeChild(steps []string) int {
	report := func(step string, err error) {
		if err != nil {
			fmt.Printf("%s fail %v\n", step, err)
		} else {
			fmt.Printf("%s ok\n", step)
		}
	}
	if len(steps) == 0 {
		return 0
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		for _, s := range steps {
			report(s, fmt.Errorf("make / private: %w", err))
		}
		return 0
	}
	tmp := "/tmp"
	mounted := false // tmp is the probe's own tmpfs
	for _, s := range steps {
		var err error
		switch s {
		case "mount":
			err = unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m")
			mounted = err == nil
		case "proc":
			err = unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		case "procbind":
			err = unix.Mount("/proc", "/proc", "", unix.MS_BIND|unix.MS_REC, "")
		case "hostname":
			err = unix.Sethostname([]byte("kptr"))
		case "seccomp":
			// The filter a run's init loads needs no_new_privs and seccomp(2).
			if err = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err == nil {
				err = seccomp.Load(namespacePolicy)
			}
		case "pivot":
			if mounted {
				err = pivotTry(tmp)
			} else {
				err = errors.New("no private tmpfs to pivot onto (mount refused)")
			}
		default:
			dir, ok := strings.CutPrefix(s, "overlay=")
			if !ok {
				err = errors.New("unknown probe")
				break
			}
			err = overlayTry(dir)
		}
		report(s, err)
	}
	return 0
}

// pivotTry (in the probe child, near the end) pivots the root onto a fresh tmpfs
// below tmp (the probe's private tmpfs),
// as libcontainer does for every run.
func pivotTry(tmp string) error {
	dir := filepath.Join(tmp, "pivot")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "old"), 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(dir, filepath.Join(dir, "old")); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	return unix.Chdir("/")
}

// overlayVerified caches, per run-state directory, whether an overlay with
// its upper layer there works (nil) or why not: probed once per process.
var overlayVerified sync.Map // dir → error

func overlayProbeDir(stateDir string) string {
	return filepath.Join(stateDir, fmt.Sprintf("kptr-%d-overlay-probe", os.Getpid()))
}

// overlayCheck says whether runs with their state in stateDir can use an
// overlay, probing in a user and mount namespace once per directory.
func overlayCheck(stateDir string) error {
	if v, ok := overlayVerified.Load(stateDir); ok {
		err, _ := v.(error)
		return err
	}
	step := "overlay=" + overlayProbeDir(stateDir)
	steps, err := probeClone(unix.CLONE_NEWUSER|unix.CLONE_NEWNS, step)
	runtime.RemoveTree(overlayProbeDir(stateDir))
	if err == nil {
		err = steps[step]
	}
	v, _ := overlayVerified.LoadOrStore(stateDir, err)
	err, _ = v.(error)
	return err
}

// overlayTry (in the probe child) mounts an overlay the way runs do, with
// its layers in dir, and checks that writing a new file, changing a lower
// file (copy-up) and removing one (whiteout) work and leave the lower layer
// alone.
func overlayTry(dir string) error {
	if !overlaySafePath(dir) {
		return fmt.Errorf("state dir %s cannot be spelled in overlay options", dir)
	}
	for _, d := range []string{"", "l", "l/d", "rw", "rw/u", "rw/w", "m"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "l/f"), []byte("lower"), 0o644); err != nil {
		return err
	}
	m := filepath.Join(dir, "m")
	if err := unix.Mount("overlay", m, "overlay", unix.MS_NOSUID|unix.MS_NODEV, overlayData(filepath.Join(dir, "l"), filepath.Join(dir, "rw"))); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	defer unix.Unmount(m, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(m, "new"), []byte("x"), 0o644); err != nil {
		return fmt.Errorf("write a new file: %w", err)
	}
	if err := os.WriteFile(filepath.Join(m, "f"), []byte("upper"), 0o644); err != nil {
		return fmt.Errorf("copy-up: %w", err)
	}
	if err := os.Remove(filepath.Join(m, "d")); err != nil {
		return fmt.Errorf("whiteout: %w", err)
	}
	if err := os.Mkdir(filepath.Join(m, "d"), 0o755); err != nil {
		return fmt.Errorf("opaque directory: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "l/f")); err != nil || string(b) != "lower" {
		return errors.New("the lower layer changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "l/d")); err != nil {
		return errors.New("the lower layer changed")
	}
	return nil
}
