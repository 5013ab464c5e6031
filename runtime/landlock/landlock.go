package landlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/launcher"
	"github.com/kptr-dev/kptr/runtime/seccomp"
	"golang.org/x/sys/unix"
)

// Sandbox is the landlock tier opened for runs (see the package doc for
// what a run is guaranteed and what it cannot be). It is safe for
// concurrent use.
type Sandbox struct {
	stateDir  string
	timeout   time.Duration
	maxOutput int64
	limits    runtime.Limits
	log       *slog.Logger
	abi       int
	root      bool
	probes    []runtime.ProbeResult
	seq       atomic.Uint64
	// cached: probes came from a cached verdict; rechecked: a failed
	// confinement already made them run afresh (see Landlock.recheck).
	cached    bool
	rechecked atomic.Bool
}

// New probes Landlock and the seccomp filter load and returns the tier, or
// a *ProbeError naming what is missing. Of the runtime's options, those
// about namespaces (WithOverlay) have no effect here.
func New(opts ...runtime.Option) (*Sandbox, error) {
	s := runtime.NewSettings(opts...)
	l := &Sandbox{stateDir: s.StateDir, timeout: s.Timeout, maxOutput: s.MaxOutput, limits: s.Limits, log: s.Log,
		root: runtime.CanMapRange()}
	s.ApplyTier(l)
	if l.stateDir == "" {
		l.stateDir = runtime.DefaultStateDir()
	}
	l.probes, l.cached = ProbeCached(l.stateDir, s.NoProbeCache)
	if err := runtime.Required(l.probes); err != nil {
		return nil, err
	}
	runtime.PruneStale(l.stateDir)
	l.abi = landlockABI()
	return l, nil
}

// Probes returns the probe results New acted on.
func (l *Sandbox) Probes() []runtime.ProbeResult { return l.probes }

// ABI is the kernel's Landlock ABI version the tier runs with.
func (l *Sandbox) ABI() int { return l.abi }

// Probe checks what the landlock tier needs (Landlock, the state
// directory, the whole confinement applied in a child process) and what the
// running kernel's Landlock ABI gives, one result each.
func Probe(stateDir string) []runtime.ProbeResult {
	var out []runtime.ProbeResult
	add := func(r runtime.ProbeResult) { out = append(out, r) }
	abi, err := landlockVersion()
	if abi < abiFS {
		d, fix := "Landlock unavailable: landlock_create_ruleset: "+err.Error(), fixLandlockKernel
		switch {
		case errors.Is(err, unix.EOPNOTSUPP):
			d += " (built into the kernel but not enabled: landlock missing from the lsm= boot parameter)"
			fix = "node: add landlock to the kernel's lsm= boot parameter"
		case errors.Is(err, unix.ENOSYS):
			d += " (a kernel without Landlock, or a seccomp profile that refuses the landlock_* calls: containers-common's before 2022)"
			fix = fixLandlockKernel + "; pod: a seccomp profile allowing landlock_create_ruleset, landlock_add_rule, landlock_restrict_self (containerd's, Docker's and current CRI-O's defaults do)"
		}
		add(runtime.ProbeResult{Name: "landlock", Status: runtime.StatusFailed, Detail: d, Fix: fix})
		return out
	}
	add(runtime.ProbeResult{Name: "landlock", Status: runtime.StatusOK, Detail: fmt.Sprintf("Landlock ABI %d (Linux ≥ %s): file system confined to the image (read, execute) and a private run directory (read, write)", abi, landlockKernel[min(abi, 7)])})
	if abi >= abiNet {
		add(runtime.ProbeResult{Name: "ll-net", Status: runtime.StatusOK, Detail: "TCP bind and connect denied by Landlock, socket(2) refused by seccomp"})
	} else {
		add(runtime.ProbeResult{Name: "ll-net", Status: runtime.StatusDegraded, Detail: "no Landlock network rules on this kernel: only the seccomp filter (no socket(2) at all) keeps functions off the network",
			Fix: "Linux ≥ 6.7 (Landlock ABI 4)"})
	}
	if abi >= abiResolveUnix {
		add(runtime.ProbeResult{Name: "ll-unix", Status: runtime.StatusOK, Detail: "no UNIX socket of the host reachable: socket(AF_UNIX) and datagram socketpairs refused by seccomp, pathname sockets outside the run denied by Landlock (ABI 9)"})
	} else {
		add(runtime.ProbeResult{Name: "ll-unix", Status: runtime.StatusOK, Detail: "no UNIX socket of the host reachable: socket(AF_UNIX) and datagram socketpairs refused by seccomp (Landlock governs pathname sockets from ABI 9)"})
	}
	if abi >= abiScope {
		add(runtime.ProbeResult{Name: "ll-scope", Status: runtime.StatusOK, Detail: "signals and abstract unix sockets scoped to the run"})
	} else {
		add(runtime.ProbeResult{Name: "ll-scope", Status: runtime.StatusDegraded, Detail: "no Landlock scoping on this kernel: a function can signal processes of kptr's uid (kptr itself, the repo server) and connect to their abstract unix sockets",
			Fix: "Linux ≥ 6.12 (Landlock ABI 6)"})
	}
	if sd := runtime.StateDirResult(stateDir, runtime.CanMapRange()); sd.Status == runtime.StatusFailed {
		add(sd)
		return out
	}
	if err := probeConfinement(stateDir); err != nil {
		add(runtime.ProbeResult{Name: "confine", Status: runtime.StatusFailed, Detail: "confining a child failed: " + err.Error(),
			Fix: "a seccomp profile that allows seccomp(2), prctl(2) and the landlock_* calls (containerd's, CRI-O's and Docker's defaults do)"})
		return out
	}
	add(runtime.ProbeResult{Name: "confine", Status: runtime.StatusOK, Detail: "no_new_privs, Landlock and the seccomp filter applied in a child: host files and AF_INET refused"})
	add(runtime.ProbeResult{Name: "paths", Status: runtime.StatusDegraded,
		Detail: "the image is not the function's root: absolute paths resolve against the host and are denied, so functions that read their own image's files by absolute path (or run another of its programs) fail; memory and scratch space bounded by rlimits and a watchdog, not a cgroup and a tmpfs",
		Fix:    "the namespace tier (kptr doctor's first section says what it needs)"})
	return out
}

const fixLandlockKernel = "a kernel ≥ 5.13 with Landlock enabled (most distribution kernels since 2022: Ubuntu ≥ 22.04, Debian ≥ 12, Fedora, Amazon Linux 2023, Bottlerocket, COS ≥ 105)"

// probeConfinement runs the landlock probe child with a scratch directory.
func probeConfinement(stateDir string) error {
	// Under this process's owner lock, as a run: a kptr killed while it
	// probes leaves the directory to the next one's runtime.PruneStale.
	if err := runtime.HoldOwnerLock(stateDir); err != nil {
		return err
	}
	defer runtime.ReleaseOwnerLock(stateDir)
	dir, err := os.MkdirTemp(stateDir, runtime.OwnerName()+"-llprobe-")
	if err != nil {
		return err
	}
	defer runtime.RemoveTree(dir)
	cmd := exec.Command("/proc/self/exe", landlockProbeArg, dir)
	cmd.Env = []string{}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := runtime.OnStableThread(cmd.Start); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	if s := strings.TrimSpace(out.String()); s != "ok" {
		return errors.New(s)
	}
	return nil
}

// Run implements Runner. A bundle without Rootfs (an exec function) runs
// through Host, as with Sandbox.
func (l *Sandbox) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	res, err := runtime.RunImage(ctx, b, inv, l.timeout, l.maxOutput, l.run)
	var ce *confineError
	if errors.As(err, &ce) {
		err = l.recheck(err)
	}
	return res, err
}

// confineError is a run whose confinement could not be applied: what
// the landlock tier's probes check.
type confineError struct{ msg string }

func (e *confineError) Error() string { return "start: " + e.msg }

// recheck is called when a run's confinement failed with probe results
// from a cached verdict: once per Landlock it probes afresh and replaces the
// verdict, and joins the probe's error to err when the tier can no longer
// run. The failed run is not tried again (its stdin was consumed).
func (l *Sandbox) recheck(err error) error {
	if !l.cached || !l.rechecked.CompareAndSwap(false, true) {
		return err
	}
	results, _ := ProbeCached(l.stateDir, true)
	if perr := runtime.Required(results); perr != nil {
		return fmt.Errorf("%w (probed again: %w)", err, perr)
	}
	return err
}

// ErrLandlockMounts: the landlock tier cannot place a host directory at a
// path of the function's view (it has no mount namespace).
var ErrMounts = runtime.ErrNoMounts

// plan builds a run's confineSpec: a pure function of the bundle, the
// invocation and the run directory (it only reads the image).
func (l *Sandbox) plan(b bundle.Bundle, inv runtime.Invocation, runDir string) (confineSpec, error) {
	if len(inv.Mounts) > 0 {
		return confineSpec{}, ErrMounts
	}
	proc, err := runtime.ResolveProcess(b.Rootfs, b.Config, inv, l.root)
	if err != nil {
		return confineSpec{}, err
	}
	he, err := resolveHostExec(b.Rootfs, proc.Args)
	if err != nil {
		return confineSpec{}, fmt.Errorf("%w (the landlock tier starts entrypoints from the image's rootfs without making it the root: static binaries directly, dynamically linked ones through the image's ELF interpreter)", err)
	}
	cwd, err := securejoin.SecureJoin(b.Rootfs, proc.Cwd)
	if err != nil {
		return confineSpec{}, err
	}
	rootfs, err := filepath.EvalSymlinks(b.Rootfs)
	if err != nil {
		return confineSpec{}, err
	}
	spec := confineSpec{
		Exec: he, Dir: cwd, ABI: l.abi, UID: -1, GID: -1,
		Env: runtime.MergeEnv(proc.Env, []string{"HOME=" + filepath.Join(runDir, "home"), "TMPDIR=" + filepath.Join(runDir, "tmp")}),
		Policy: landlockPolicy{
			ReadExec:  []string{rootfs},
			ReadWrite: []string{runDir},
			DevRW:     []string{"/dev/null"},
			DevRead:   []string{"/dev/zero", "/dev/urandom"},
			Network:   inv.Network,
			OwnProc:   true,
		},
		NoFile: l.limits.NoFile, FSize: uint64(max(l.limits.TmpSize, 0)), Pids: uint64(max(l.limits.Pids, 0)),
		Data: uint64(max(l.limits.Memory, 0)),
	}
	var st unix.Stat_t
	if err := unix.Stat(rootfs, &st); err != nil {
		return confineSpec{}, err
	}
	spec.NoMetadata = !l.root && int(st.Uid) == os.Geteuid()
	if inv.Network {
		// As the namespace tier binds the host's resolv.conf into a
		// networked run: name resolution by the host's configuration.
		for _, f := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"} {
			if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
				spec.Policy.DevRead = append(spec.Policy.DevRead, f)
			}
		}
	}
	if l.root {
		if proc.UID >= runtime.RootHostIDSize || proc.GID >= runtime.RootHostIDSize {
			return confineSpec{}, fmt.Errorf("uid %d:%d is outside the range functions run as", proc.UID, proc.GID)
		}
		spec.UID, spec.GID = runtime.RootHostIDBase+proc.UID, runtime.RootHostIDBase+proc.GID
		for what, dir := range map[string]string{"the image's rootfs": rootfs, "the run-state directory": l.stateDir} {
			if !runtime.WorldTraversable(dir) {
				return confineSpec{}, fmt.Errorf("%s %s is not reachable by other users: as root the landlock tier runs functions as an unprivileged uid, which must traverse its path (make it o+x)", what, dir)
			}
		}
	}
	return spec, nil
}

func (l *Sandbox) run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	id := fmt.Sprintf("kptr-%d-%s-%d.ll", os.Getpid(), runtime.RunToken(), l.seq.Add(1))
	runDir := filepath.Join(l.stateDir, id)
	spec, err := l.plan(b, inv, runDir)
	if err != nil {
		return runtime.Result{}, err
	}
	// The owner lock, held while the run directory exists: a kptr killed
	// mid-run (Argo CD's SIGKILL) leaves it free, and the next kptr removes
	// the directory at once (runtime.PruneStale).
	if err := runtime.HoldOwnerLock(l.stateDir); err != nil {
		return runtime.Result{}, fmt.Errorf("run directory: %w", err)
	}
	defer runtime.ReleaseOwnerLock(l.stateDir)
	if err := makeRunDir(runDir, spec.UID, spec.GID); err != nil {
		return runtime.Result{}, fmt.Errorf("run directory: %w", err)
	}
	defer runtime.RemoveTree(runDir)
	ll, err := l.launch(spec)
	if err != nil {
		return runtime.Result{}, err
	}
	defer ll.Ruleset.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return runtime.Result{}, err
	}
	defer statusR.Close()
	defer statusW.Close()
	timeout := firstPositive(inv.Timeout, l.timeout, runtime.DefaultTimeout)
	maxOut := firstPositive(inv.MaxOutput, l.maxOutput, runtime.DefaultMaxOutput)
	sio, err := runtime.NewStdio(inv.Stdin, maxOut)
	if err != nil {
		return runtime.Result{}, err
	}
	defer sio.Close()
	// The launcher and the confiner are C (runtime/launcher's landlock.c):
	// no Go start between kptr and the function.
	var proc *os.Process
	err = runtime.OnStableThread(func() (err error) {
		proc, err = launcher.StartLandlock(ll, "/proc/self/exe", sio.ChildIn, sio.ChildOut, sio.ChildErr, statusW)
		return err
	})
	sio.CloseChild()
	statusW.Close()
	ll.Ruleset.Close()
	if err != nil && proc == nil {
		return runtime.Result{}, fmt.Errorf("start: %w", err)
	}
	werr := err
	var statusBuf bytes.Buffer
	statusDone := make(chan struct{})
	go func() { _, _ = io.Copy(&statusBuf, io.LimitReader(statusR, 64<<10)); close(statusDone) }()
	sio.Start()
	var escalate *time.Timer
	// The launcher is the run's subreaper: asked with SIGTERM, it kills and
	// reaps every process of the run, then exits; the reaper bounds the wait.
	r := runtime.NewReaper(proc.Pid, proc.Wait, func() {
		_ = proc.Signal(syscall.SIGTERM)
		// A launcher that cannot end the run in time is killed.
		escalate = time.AfterFunc(launcherGrace, func() { _ = proc.Kill() })
	})
	// The watchdog ends the run through ctx when it crosses its memory or
	// disk bound (watch.go).
	ctx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	watchDone := make(chan struct{})
	go watchRun(watchDone, proc.Pid, runDir, l.limits.Memory, runDirBytes(l.limits), stopRun)
	res, err := runtime.Wait(ctx, timeout, sio, r)
	close(watchDone)
	if escalate != nil {
		escalate.Stop()
	}
	<-statusDone
	if msg := strings.TrimSpace(statusBuf.String()); msg != "" && err == nil {
		return res, &confineError{msg}
	}
	if werr != nil && err == nil {
		return res, fmt.Errorf("start: %w", werr)
	}
	return res, err
}

// launch is the run's spec as the C launcher takes it: the Landlock ruleset
// built here (the caller closes it), the seccomp program, RLIMIT_NPROC.
func (l *Sandbox) launch(spec confineSpec) (*launcher.Landlock, error) {
	if !seccomp.Supported {
		return nil, seccomp.ErrUnsupported
	}
	ll := &launcher.Landlock{
		UID: spec.UID, GID: spec.GID, NoFile: spec.NoFile, FSize: spec.FSize, Data: spec.Data,
		Dir: spec.Dir, Path: spec.Exec.Path, Args: spec.Exec.Argv, Env: spec.Env,
		Seccomp: seccomp.Filter(spec.seccompPolicy()),
	}
	if spec.Pids > 0 {
		// RLIMIT_NPROC counts the uid's tasks, not the run's.
		uid := os.Getuid()
		if spec.UID >= 0 {
			uid = spec.UID
		}
		ll.NProc = uint64(tasksOf(uid)) + spec.Pids
	}
	if spec.Policy.OwnProc {
		ll.ProcFiles = procFiles
	}
	rs, err := spec.Policy.ruleset(spec.ABI)
	if err != nil {
		return nil, &confineError{err.Error()}
	}
	ll.Ruleset = os.NewFile(uintptr(rs), "landlock-ruleset")
	return ll, nil
}

// launcherGrace is how long the launcher may take to end a run's processes
// once asked to.
const launcherGrace = 10 * time.Second

// firstPositive returns the first positive value.
func firstPositive[T int64 | time.Duration](vals ...T) T {
	for _, v := range vals {
		if v > 0 {
			return v
		}
	}
	return 0
}

// makeRunDir creates a run's private directory with home/ and tmp/, owned
// by the function's uid when kptr is root (uid >= 0).
func makeRunDir(dir string, uid, gid int) error {
	for _, d := range []string{dir, filepath.Join(dir, "home"), filepath.Join(dir, "tmp")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if uid >= 0 {
			if err := os.Lchown(d, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// seccompPolicy is what the run's filter refuses on top of the common
// policy: every socket family but AF_UNIX without Invocation.Network,
// socket(AF_UNIX) itself (Landlock up to ABI 7 does not mediate connect or
// sendto on pathname sockets, so a function could reach the host's:
// ssh-agent, the docker socket, another plugin's; socketpair still works);
// System V IPC, POSIX message queues, memfds and shared anonymous memory
// (the run shares kptr's ipc namespace and has no memory cgroup: what
// they hold would outlive the run or escape the watchdog, watch.go);
// clearing the dumpable flag (the watchdog reads every process's
// descriptors); and, when the function's uid owns the cached image, the
// metadata calls. The namespace tier's filter keeps the shared memory
// calls: its runs have their own ipc namespace and, where kptr sets a
// memory limit, a memory cgroup that charges shared memory too.
func (spec confineSpec) seccompPolicy() seccomp.Policy {
	return seccomp.Policy{Network: spec.Policy.Network, NoUnixSockets: true, NoMetadata: spec.NoMetadata,
		NoSharedMemory: true, Inspectable: true}
}
