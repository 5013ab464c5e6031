package runtime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Status of one probe.
type Status string

const (
	StatusOK       Status = "ok"
	StatusDegraded Status = "degraded" // works through a fallback, or a limit is not enforced
	StatusFailed   Status = "failed"   // the sandbox cannot run
)

// ProbeResult is what one prerequisite probe found.
type ProbeResult struct {
	Name   string // userns, mount, proc, netns, ipc-uts, cgroupns, overlay, cgroups, seccomp
	Status Status
	Detail string
	// Fix says which pod securityContext field or node setting fixes a
	// failed or degraded probe.
	Fix string
}

// ProbeError is returned by New when a required probe failed.
type ProbeError struct{ Result ProbeResult }

func (e *ProbeError) Error() string {
	return fmt.Sprintf("sandbox unavailable: probe %q failed: %s", e.Result.Name, e.Result.Detail)
}

// Probe checks, in the current process's environment, every prerequisite of
// the sandbox and returns one result per prerequisite together with the
// Features buildConfig adapts to. It starts short-lived child processes in new
// namespaces; it changes nothing outside them.
func Probe() ([]ProbeResult, Features) {
	f := Features{
		Root:       canMapRange(),
		UID:        os.Geteuid(),
		GID:        os.Getegid(),
		Seccomp:    seccompBuilt,
		HardLimits: hardLimits(),
	}
	var out []ProbeResult
	add := func(r ProbeResult) { out = append(out, r) }

	// One child in every namespace the sandbox uses normally answers
	// everything; only when it cannot be created do we look for the culprit.
	all := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	steps, err := probeClone(all, "mount", "proc", "procbind", "overlay")
	if err != nil {
		if _, uerr := probeClone(unix.CLONE_NEWUSER); uerr != nil {
			add(usernsFailure(uerr))
			return out, f
		}
		add(ProbeResult{Name: "userns", Status: StatusOK, Detail: "user namespace created"})
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
				add(ProbeResult{Name: ns.name, Status: StatusFailed, Detail: "cannot create namespace: " + err.Error(), Fix: ns.fix})
				return out, f
			}
		}
		add(ProbeResult{Name: "namespaces", Status: StatusFailed, Detail: "cannot create all namespaces together: " + err.Error(), Fix: fixSeccomp})
		return out, f
	}
	add(ProbeResult{Name: "userns", Status: StatusOK, Detail: "user namespace created; container root maps to " + idMapDetail(f)})
	add(ProbeResult{Name: "netns", Status: StatusOK, Detail: "network, ipc, uts and pid namespaces created"})
	if e := steps["mount"]; e != nil {
		add(ProbeResult{Name: "mount", Status: StatusFailed, Detail: "mount in a new mount namespace refused: " + e.Error(), Fix: fixMount})
		return out, f
	}
	add(ProbeResult{Name: "mount", Status: StatusOK, Detail: "tmpfs mounted in a private mount namespace"})
	switch {
	case steps["proc"] == nil:
		f.FreshProc = true
		add(ProbeResult{Name: "proc", Status: StatusOK, Detail: "fresh procfs mounted"})
	case steps["procbind"] == nil:
		add(ProbeResult{Name: "proc", Status: StatusDegraded,
			Detail: "fresh procfs refused (" + steps["proc"].Error() + "); binding the existing /proc instead: functions then see the sidecar's process list and command lines (not its environments or memory)",
			Fix:    fixProc})
	default:
		add(ProbeResult{Name: "proc", Status: StatusFailed,
			Detail: "neither a fresh procfs (" + steps["proc"].Error() + ") nor a bind of /proc (" + steps["procbind"].Error() + ") works",
			Fix:    fixProc})
		return out, f
	}
	if _, err := os.Stat("/proc/self/ns/cgroup"); err == nil {
		f.CgroupNS = true
		add(ProbeResult{Name: "cgroupns", Status: StatusOK, Detail: "cgroup namespaces available"})
	} else {
		add(ProbeResult{Name: "cgroupns", Status: StatusDegraded, Detail: "kernel without cgroup namespaces: functions see the host's cgroup paths", Fix: "a kernel ≥ 4.6"})
	}
	if e := steps["overlay"]; e == nil {
		add(ProbeResult{Name: "overlay", Status: StatusOK, Detail: "overlayfs mountable in a user namespace (kptr's view is a read-only root with tmpfs /tmp and $HOME)"})
	} else {
		add(ProbeResult{Name: "overlay", Status: StatusDegraded, Detail: "overlayfs refused (" + e.Error() + "); read-only root with tmpfs /tmp and $HOME (what kptr uses anyway)", Fix: "a kernel ≥ 5.11 (unprivileged overlayfs)"})
	}
	f.Cgroups, out = probeCgroups(f, out)
	dir := defaultStateDir()
	if err := ensurePrivateDir(dir); err != nil {
		add(ProbeResult{Name: "statedir", Status: StatusFailed, Detail: "run state directory unusable: " + err.Error(),
			Fix: "a writable $TMPDIR (the sidecar's cmp-tmp emptyDir on /tmp) or $XDG_RUNTIME_DIR"})
		return out, f
	}
	add(ProbeResult{Name: "statedir", Status: StatusOK, Detail: "run state in " + dir})
	if seccompBuilt {
		add(ProbeResult{Name: "seccomp", Status: StatusOK, Detail: "seccomp filter loaded into every function"})
	} else {
		add(ProbeResult{Name: "seccomp", Status: StatusDegraded, Detail: "built without the seccomp tag: no syscall filter inside the sandbox",
			Fix: "use a kptr built with -tags seccomp (make build-seccomp; the release image is)"})
	}
	return out, f
}

// Required reports the first failed probe, if any.
func Required(results []ProbeResult) error {
	for _, r := range results {
		if r.Status == StatusFailed {
			return &ProbeError{Result: r}
		}
	}
	return nil
}

const (
	fixUserns = "pod: securityContext.seccompProfile {type: Localhost} allowing unshare/clone with CLONE_NEWUSER " +
		"(RuntimeDefault refuses it; Unconfined is the blunt fix); node: sysctl user.max_user_namespaces > 0, " +
		"on Ubuntu ≥ 24.04 kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile allowing userns"
	fixSeccomp = "pod: securityContext.seccompProfile {type: Localhost} allowing unshare/clone with namespace flags (or Unconfined)"
	fixMount   = "pod: securityContext.appArmorProfile {type: Localhost} allowing mount (containerd's default profile denies it; Unconfined is the blunt fix)"
	fixProc    = "pod: securityContext.procMount: Unmasked (with hostUsers: false) lets a fresh /proc mount; otherwise an unmasked /proc must be visible to bind"
)

func usernsFailure(err error) ProbeResult {
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
	return ProbeResult{Name: "userns", Status: StatusFailed, Detail: d, Fix: fixUserns}
}

func idMapDetail(f Features) string {
	if f.Root {
		return fmt.Sprintf("host uids %d-%d (functions run as nobody)", rootHostIDBase, rootHostIDBase+rootHostIDSize-1)
	}
	return fmt.Sprintf("uid %d only (functions run as container root = uid %d, never host root)", f.UID, f.UID)
}

// probeCgroups decides whether kptr itself can create cgroups with limits.
func probeCgroups(f Features, out []ProbeResult) (bool, []ProbeResult) {
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
			return true, append(out, ProbeResult{Name: "cgroups", Status: StatusOK, Detail: "memory and pids limits enforced through cgroups"})
		}
	}
	detail := "cgroups not delegated to kptr: memory limit not enforced (the OOM killer picks functions first, oom_score_adj 1000); processes bounded by RLIMIT_NPROC inside each run's user namespace"
	return false, append(out, ProbeResult{Name: "cgroups", Status: StatusDegraded, Detail: detail,
		Fix: "pod: resources.limits.memory bounds the whole sidecar; per-function cgroup limits need kptr to run as root or a delegated cgroup v2 subtree"})
}

// canMapRange: kptr is root with the whole uid/gid space mapped (the
// initial user namespace, or one that maps the range functions get), so it
// may give each run container ids 0-65535 on host ids rootHostIDBase+.
// Root inside a user namespace that maps only itself is treated as
// unprivileged: one id, container root.
func canMapRange() bool {
	if os.Geteuid() != 0 {
		return false
	}
	covers := func(file string) bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		for _, l := range strings.Split(string(b), "\n") {
			var in, out, n uint64
			if _, err := fmt.Sscan(l, &in, &out, &n); err == nil && in <= rootHostIDBase && in+n >= rootHostIDBase+rootHostIDSize {
				return true
			}
		}
		return false
	}
	return covers("/proc/self/uid_map") && covers("/proc/self/gid_map")
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
	err := onStableThread(cmd.Start)
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
	mounted := false
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
		case "overlay":
			if !mounted {
				err = errors.New("no tmpfs to try on")
				break
			}
			for _, d := range []string{"l", "u", "w", "m"} {
				if err = os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
					break
				}
			}
			if err == nil {
				err = unix.Mount("overlay", tmp+"/m", "overlay", 0, "lowerdir="+tmp+"/l,upperdir="+tmp+"/u,workdir="+tmp+"/w")
			}
		default:
			err = errors.New("unknown probe")
		}
		report(s, err)
	}
	return 0
}
