package namespace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/containerinit"
	"github.com/kptr-dev/kptr/runtime/launcher"
	"github.com/kptr-dev/kptr/runtime/seccomp"
	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/exeseal"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// A run's sandbox is one libcontainer configuration (buildConfig), started
// by one of two launchers:
//
//   - nsinit (the default): kptr vforks and executes its sealed copy, whose
//     C constructor (runtime/launcher) unshares the namespaces, clones the
//     function's pid 1 as kptr's child and sets the sandbox up (mounts,
//     pivot_root, credentials, capabilities, seccomp) before any Go
//     runtime start. A start costs about a third of a libcontainer one
//     (BENCHMARKS.md).
//   - libcontainer: runc's libcontainer, whose container init is a Go start
//     of kptr plus libcontainer's Go init. It is used where nsinit cannot
//     give the same sandbox: as root with invocation mounts (their sources
//     may be out of reach of the unprivileged uids a run maps;
//     libcontainer opens sources from kptr's side), or with an image out of
//     their reach that cannot be staged (mayStage), a mount target below a
//     symbolic link of the image (libcontainer resolves it inside the root;
//     nsinit refuses every link), seccomp on an architecture without
//     kptr's own filter, no sealed copy of kptr to start, or when
//     KPTR_LAUNCHER=libcontainer asks for it.
//
// A run nsinit fails to start but libcontainer starts is taken as this
// environment refusing what only nsinit does (a seccomp profile without one
// of its calls): libcontainer then starts every later run of the Sandbox
// (Sandbox.run). Both keep every promise of the package doc; the runtime
// suite runs against each (make test) and fails if nsinit left it a run.

// Launcher names, for WithLauncher and KPTR_LAUNCHER.
const (
	LauncherAuto         = ""             // nsinit where it can, else libcontainer
	LauncherNsinit       = "nsinit"       // nsinit where it can (as auto)
	LauncherLibcontainer = "libcontainer" // always libcontainer
)

// WithLauncher chooses how sandboxes are started (LauncherAuto by default,
// or what KPTR_LAUNCHER says).
func WithLauncher(name string) runtime.Option {
	return runtime.TierOption(func(t any) {
		if s, ok := t.(*Sandbox); ok {
			s.launcher, s.launcherSet = name, true
		}
	})
}

func validLauncher(name string) error {
	switch name {
	case LauncherAuto, LauncherNsinit, LauncherLibcontainer:
		return nil
	}
	return fmt.Errorf("unknown sandbox launcher %q (want %s or %s)", name, LauncherNsinit, LauncherLibcontainer)
}

// container is one run's container as its launcher started it.
type container interface {
	// start starts the init and lets it set the sandbox up; with run it
	// also releases the function. Errors are start failures (nothing of
	// the invocation consumed) except an *execError.
	start(run bool) error
	// release lets a started init execute the function (*execError when
	// execve failed).
	release() error
	pid() (int, error)
	wait() (*os.ProcessState, error)
	// destroy removes the launcher's own state once every process is gone.
	destroy() error
	kind() string
}

// libcontainerLogLevel: only errors from the init's log pipe; debug lines
// cost a write and a JSON decode each, dozens per start.
var libcontainerLogLevel = strconv.Itoa(int(logrus.ErrorLevel))

// execError: the sandbox was set up but execve of the entrypoint failed,
// which is the image's fault (reported like libcontainer's "exec PATH:
// CAUSE" on the function's stderr), not the environment's.
type execError struct{ msg string }

func (e *execError) Error() string { return e.msg }

// lcContainer is a libcontainer container.
type lcContainer struct {
	c *libcontainer.Container
	p *libcontainer.Process
}

func (l *lcContainer) start(run bool) error {
	err := runtime.OnStableThread(func() error { return l.c.Start(l.p) })
	if err != nil {
		return fmt.Errorf("start: %w", unwrapStart(err))
	}
	if err := l.filter(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if run {
		if err := l.c.Exec(); err != nil {
			return fmt.Errorf("start: %w", unwrapStart(err))
		}
	}
	return nil
}

// filterTimeout bounds how long libcontainer's init may take to load the
// seccomp filter once asked.
const filterTimeout = 10 * time.Second

// filter has libcontainer's container init, set up and waiting to execute
// the function, load kptr's seccomp filter into all its threads
// (runtime/containerinit: libcontainer loads filters only through
// libseccomp, cgo, which kptr does not link), and checks from outside that
// every thread of the init runs under a filter (Seccomp: 2) before the
// function may start. An init that cannot is an error: the function is
// never run unfiltered.
func (l *lcContainer) filter() error {
	pid, err := l.p.Pid()
	if err != nil {
		return err
	}
	if err := unix.Kill(pid, containerinit.FilterSignal); err != nil {
		return fmt.Errorf("ask libcontainer's init to load the seccomp filter: %w", err)
	}
	deadline := time.Now().Add(filterTimeout)
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		filtered, err := allThreadsFiltered(pid)
		if filtered {
			return nil
		}
		if err != nil || time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("not within %s", filterTimeout)
			}
			return fmt.Errorf("libcontainer's container init did not load the seccomp filter (%v): the function is not run unfiltered", err)
		}
		time.Sleep(wait)
	}
}

// allThreadsFiltered reads the seccomp mode of every thread of pid: true
// when each is 2 (a filter). An error means the process is gone.
func allThreadsFiltered(pid int) (bool, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false, err
	}
	if len(tasks) == 0 {
		return false, errors.New("the init has no threads left")
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			return false, err
		}
		st := string(b)
		if strings.Contains(st, "\nState:\tZ") {
			return false, errors.New("the init exited")
		}
		if !strings.Contains(st, "\nSeccomp:\t2\n") {
			return false, nil
		}
	}
	return true, nil
}
func (l *lcContainer) release() error                  { return l.c.Exec() }
func (l *lcContainer) pid() (int, error)               { return l.p.Pid() }
func (l *lcContainer) wait() (*os.ProcessState, error) { return l.p.Wait() }
func (l *lcContainer) destroy() error                  { return l.c.Destroy() }
func (l *lcContainer) kind() string                    { return LauncherLibcontainer }

// nsContainer is a container started by runtime/launcher.
type nsContainer struct {
	spec *launcher.Spec
	// upperInMemory: the run's overlay has its upper layer on a tmpfs of
	// its own mount namespace, not in the run-state directory.
	upperInMemory bool
	exe           string
	sio           *runtime.Stdio
	cg            cgroups.Manager // nil: no cgroups (unprivileged, or none delegated)
	res           *cgroups.Resources
	p             *launcher.Proc
}

// nsSetupTimeout bounds an init's set-up and its execve (a hung mount
// source): past it the init is killed and the start fails.
const nsSetupTimeout = 30 * time.Second

// errNsinitStart marks a failed nsinit start (Sandbox.run then tries
// libcontainer); nsinitFallbacks counts such fallbacks in this process
// (the runtime suite fails on any: it runs where nsinit must work).
var (
	errNsinitStart  = errors.New("nsinit")
	NsinitFallbacks atomic.Int64
	NsinitLastFail  atomic.Value // string: the last fallback's cause
)

func (n *nsContainer) start(run bool) error {
	selfJoin := n.cg != nil && !cgroups.IsCgroup2UnifiedMode()
	if selfJoin {
		if err := n.makeCgroups(); err != nil {
			n.close()
			return fmt.Errorf("start: %w (%w)", err, errNsinitStart)
		}
	}
	err := runtime.OnStableThread(func() error {
		var err error
		n.p, err = launcher.Start(n.spec, n.exe, n.sio.ChildIn, n.sio.ChildOut, n.sio.ChildErr)
		return err
	})
	n.close() // the init has its own copies of the image's tree and the cgroup files
	if err != nil {
		return fmt.Errorf("start: %w (%w)", err, errNsinitStart)
	}
	fail := func(err error) error {
		_ = n.p.Kill()
		_, _ = n.p.Wait()
		return fmt.Errorf("start: %w (%w)", err, errNsinitStart)
	}
	if n.cg != nil && !selfJoin {
		// Before the set-up: its cgroup namespace is unshared with these
		// as its root, and the limits hold from the first mount on. (On
		// cgroup v1 the init joins them itself: makeCgroups.)
		if err := n.cg.Apply(n.p.Pid()); err != nil {
			return fail(fmt.Errorf("join cgroups: %w", err))
		}
		if err := n.cg.Set(n.res); err != nil {
			return fail(fmt.Errorf("set cgroup limits: %w", err))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), nsSetupTimeout)
	defer cancel()
	if err := n.p.Setup(ctx); err != nil {
		return fail(err)
	}
	if run {
		return n.release()
	}
	return nil
}

func (n *nsContainer) release() error {
	ctx, cancel := context.WithTimeout(context.Background(), nsSetupTimeout)
	defer cancel()
	if err := n.p.Release(ctx); err != nil {
		// After the release only execve can fail in the init.
		if e := (*launcher.Error)(nil); errors.As(err, &e) && strings.HasPrefix(e.Op, "exec ") {
			return &execError{err.Error()}
		}
		return err
	}
	return nil
}

func (n *nsContainer) pid() (int, error) {
	if n.p == nil {
		return 0, errors.New("not started")
	}
	return n.p.Pid(), nil
}
func (n *nsContainer) wait() (*os.ProcessState, error) { return n.p.Wait() }
func (n *nsContainer) kind() string                    { return LauncherNsinit }

func (n *nsContainer) destroy() error {
	n.close()
	if n.cg == nil {
		return nil
	}
	return n.cg.Destroy()
}

// libcontainerContainer makes the run's libcontainer container.
func (s *Sandbox) libcontainerContainer(id string, cfg *configs.Config, proc runtime.Process, sio *runtime.Stdio) (container, error) {
	c, err := createContainer(s.stateDir, id, cfg)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	return &lcContainer{c: c, p: &libcontainer.Process{
		Args: proc.Args, Env: proc.Env, Cwd: proc.Cwd, UID: proc.UID, GID: proc.GID,
		Stdin: sio.ChildIn, Stdout: sio.ChildOut, Stderr: sio.ChildErr, Init: true,
		LogLevel: libcontainerLogLevel,
	}}, nil
}

// mayStage says whether a run of the image at rootfs is planned with the
// image staged for nsinit: as root, when the run's uids (other users) cannot
// reach it by its path (a cache below /root). kptr then opens the image as a
// detached mount tree (open_tree(2), which needs CAP_SYS_ADMIN where kptr
// runs) and the init attaches it at an empty directory of the run-state
// directory, which they can reach, in the run's mount namespace only; the
// run is otherwise the same. libcontainer reaches such sources from kptr's
// side instead (its mount-source descriptors).
func (s *Sandbox) mayStage(feat Features, rootfs string) bool {
	return feat.Root && s.launcher != LauncherLibcontainer && !s.nsinitOff.Load() && !runtime.WorldTraversable(rootfs)
}

// nsinitContainer is the run's nsinit container (its stdio still to be
// set), or nil and why not. image is the cached rootfs; stage, where the
// plan sees it when staged ("" otherwise).
func (s *Sandbox) nsinitContainer(spec runSpec, cfg *configs.Config, proc runtime.Process, image, stage string) (*nsContainer, string) {
	if s.launcher == LauncherLibcontainer {
		return nil, ""
	}
	if s.nsinitOff.Load() {
		return nil, "nsinit failed to start a run here before"
	}
	if spec.Feat.Root {
		// The init is an unprivileged host uid from the start: it must
		// reach every path it mounts from by itself.
		if stage == "" && !runtime.WorldTraversable(spec.Image) {
			return nil, "the image's rootfs is not reachable by others (as root, its cache directory needs o+x on its path)"
		}
		if len(spec.Inv.Mounts) > 0 {
			return nil, "invocation mounts as root"
		}
	}
	ns, err := nsinitSpec(cfg, proc)
	if err != nil {
		return nil, err.Error()
	}
	exe, err := sealedExe(s.stateDir)
	if err != nil {
		return nil, "no sealed copy of kptr: " + err.Error()
	}
	n := &nsContainer{spec: ns, exe: exe}
	if spec.RW != "" {
		n.upperInMemory = upperInMemory(ns, spec)
	}
	if spec.Feat.Cgroups && cfg.Cgroups != nil {
		if n.cg, n.res, err = runCgroups(cfg.Cgroups); err != nil {
			return nil, "cgroups: " + err.Error()
		}
	}
	if stage != "" {
		fd, err := unix.OpenTree(unix.AT_FDCWD, image, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return nil, "the image is out of the run uids' reach and cannot be opened as a mount tree: " + err.Error()
		}
		ns.Trees = []launcher.Tree{{FD: os.NewFile(uintptr(fd), "image-tree"), Target: stage}}
	}
	return n, ""
}

// upperInMemory gives an nsinit run's overlay (spec.RW) its upper layer in
// memory: the init mounts a tmpfs (the size of /tmp's) on the root's /tmp,
// makes u, w and u/<dir> for each top-level directory of the image in it
// (as Mount.Dirs, owned by the init: container root, with the image
// directory's mode), and stacks the overlay on /tmp over it. The layer
// then exists only in the run's mount namespace and ends with it: kptr
// makes and removes nothing in the run-state directory (a dozen directory
// operations on its file system per run, the largest share of kptr's own
// cost of a start), and a function's writes to the image are bounded like
// its /tmp. False, and the layer stays in the run-state directory, when
// the root's path cannot be spelled in overlay options or the kernel's
// tmpfs has no user xattrs (before 6.6): overlayfs would mount, but could
// not mark a directory opaque (a function's rm -r and mkdir of an image
// directory would fail).
func upperInMemory(ns *launcher.Spec, spec runSpec) bool {
	tmp := filepath.Join(ns.Root, "tmp")
	i := slices.IndexFunc(ns.Mounts, func(m launcher.Mount) bool { return m.FSType == "overlay" && m.Target == "/tmp" })
	if i < 0 || !overlaySafePath(tmp) || !tmpfsUserXattrs() {
		return false
	}
	dirs := []launcher.Dir{{Path: "u", Mode: 0o700}, {Path: "w", Mode: 0o700}}
	for _, e := range spec.Entries {
		if e.Kind == entryDir && !skippedTop[e.Name] {
			dirs = append(dirs, launcher.Dir{Path: "u/" + e.Name, Mode: e.Mode})
		}
	}
	upper := launcher.Mount{Source: "tmpfs", Target: "/tmp", FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV,
		Data: fmt.Sprintf("mode=700,size=%d", tmpSize(spec.Limits)), Dirs: dirs}
	ns.Mounts[i].Data = overlayData(spec.Image, tmp)
	ns.Mounts = slices.Insert(ns.Mounts, i, upper)
	return true
}

// tmpfsUserXattrs: the running kernel's tmpfs takes user.* xattrs, which
// an overlay's upper layer needs with userxattr (Linux 6.6; a kernel that
// backports them is taken for older, and keeps its upper layers on disk).
var tmpfsUserXattrs = sync.OnceValue(func() bool {
	var uts unix.Utsname
	if unix.Uname(&uts) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(uts.Release[:]), 6, 6)
})

// kernelAtLeast compares a kernel release ("6.18.44-fc-v782") with
// major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// close releases what a container not started holds (the image's tree,
// the cgroup files to join).
func (n *nsContainer) close() {
	for _, t := range n.spec.Trees {
		t.FD.Close()
	}
	n.spec.Trees = nil
	for _, f := range n.spec.JoinCgroups {
		f.Close()
	}
	n.spec.JoinCgroups = nil
}

// makeCgroups makes the run's cgroup v1 cgroups with their limits, empty,
// and opens their "tasks" files for the init, which joins them itself
// before its set-up (nsinit's Spec.JoinCgroups): kptr writing the init's
// pid to cgroup.procs instead waits for an RCU grace period in the kernel
// (measured 5–13 ms per start on a 2-CPU machine; a thread moving itself
// takes 0.02–0.1 ms). The limits hold before the init is in the cgroups,
// so from its first mount on, as before. On cgroup v2 a thread cannot move
// itself without that lock (cgroup.threads is for threaded cgroups only),
// and kptr joins the init as before.
func (n *nsContainer) makeCgroups() error {
	if err := n.cg.Apply(-1); err != nil {
		return fmt.Errorf("make cgroups: %w", err)
	}
	if err := n.cg.Set(n.res); err != nil {
		return fmt.Errorf("set cgroup limits: %w", err)
	}
	paths := n.cg.GetPaths()
	names := slices.Sorted(maps.Keys(paths))
	for _, name := range names {
		f, err := cgroups.OpenFile(paths[name], "tasks", unix.O_WRONLY)
		if err != nil {
			return fmt.Errorf("join cgroups: %w", err)
		}
		n.spec.JoinCgroups = append(n.spec.JoinCgroups, f)
	}
	if len(n.spec.JoinCgroups) == 0 {
		return errors.New("join cgroups: no cgroup v1 hierarchy for the run")
	}
	return nil
}

// runCgroups is the cgroup manager of one nsinit run: on cgroup v1 only the
// memory and pids hierarchies (runControllers without devices: the run's
// user namespace refuses device nodes, and its /dev holds four bound ones),
// at the paths libcontainer would use; on v2 the one unified cgroup.
func runCgroups(cg *cgroups.Cgroup) (cgroups.Manager, *cgroups.Resources, error) {
	res := *cg.Resources
	res.SkipDevices = true
	c := *cg
	c.Resources = &res
	var paths map[string]string
	if !cgroups.IsCgroup2UnifiedMode() {
		paths = runCgroupPaths(&c)
		delete(paths, "devices")
	}
	m, err := manager.NewWithPaths(&c, paths)
	if err != nil {
		return nil, nil, err
	}
	return m, &res, nil
}

// nsinitSpec translates a libcontainer configuration made by buildConfig
// (and the run's process) into nsinit's, or says why it cannot.
func nsinitSpec(cfg *configs.Config, proc runtime.Process) (*launcher.Spec, error) {
	s := &launcher.Spec{
		Root:          cfg.Rootfs,
		MaskPaths:     cfg.MaskPaths,
		ReadonlyPaths: cfg.ReadonlyPaths,
		ReadonlyRoot:  cfg.Readonlyfs,
		Hostname:      cfg.Hostname,
		UID:           uint32(proc.UID),
		GID:           uint32(proc.GID),
		Cwd:           proc.Cwd,
		Args:          proc.Args,
		Env:           proc.Env,
		Umask:         0o022,
	}
	if cfg.Umask != nil {
		s.Umask = *cfg.Umask
	}
	if cfg.OomScoreAdj != nil {
		s.OOMScoreAdj = *cfg.OomScoreAdj
	}
	for _, n := range cfg.Namespaces {
		if n.Path != "" {
			return nil, fmt.Errorf("namespace %s joined by path", n.Type)
		}
	}
	s.Cloneflags = cfg.Namespaces.CloneFlags()
	for _, nw := range cfg.Networks {
		if nw.Type != "loopback" {
			return nil, fmt.Errorf("network %q", nw.Type)
		}
		s.Loopback = true
	}
	for _, m := range cfg.UIDMappings {
		s.UIDMappings = append(s.UIDMappings, sysIDMap(m))
	}
	for _, m := range cfg.GIDMappings {
		s.GIDMappings = append(s.GIDMappings, sysIDMap(m))
	}
	// setgroups(2) only where the whole range is mapped (kptr is root):
	// an unprivileged map must deny it.
	s.Setgroups = !cfg.RootlessEUID
	for _, m := range cfg.Mounts {
		// Create: a missing mount point is made where libcontainer would
		// make it, but only inside a file system the init mounted (an
		// invocation mount's target in the overlay's upper layer), never
		// in the image.
		nm := launcher.Mount{Source: m.Source, Target: m.Destination, Flags: uintptr(m.Flags), Data: m.Data, Create: true}
		switch m.Device {
		case "bind":
		case "proc", "tmpfs", "overlay":
			nm.FSType = m.Device
		default:
			return nil, fmt.Errorf("mount type %q", m.Device)
		}
		if !linkFreeIn(cfg.Rootfs, m.Destination) {
			return nil, fmt.Errorf("mount target %s is below a symbolic link of the image", m.Destination)
		}
		s.Mounts = append(s.Mounts, nm)
	}
	for _, d := range cfg.Devices {
		s.Devices = append(s.Devices, d.Path)
	}
	for _, r := range cfg.Rlimits {
		s.Rlimits = append(s.Rlimits, launcher.Rlimit{Resource: r.Type, Cur: r.Soft, Max: r.Hard})
	}
	// Every run is filtered: without a program of kptr's own for this
	// architecture nsinit starts none (nor does libcontainer, see
	// lcContainer.filter).
	f, err := namespaceSeccomp()
	if err != nil {
		return nil, err
	}
	s.Seccomp = f
	return s, nil
}

func sysIDMap(m configs.IDMap) syscall.SysProcIDMap {
	return syscall.SysProcIDMap{ContainerID: int(m.ContainerID), HostID: int(m.HostID), Size: int(m.Size)}
}

// linkFreeIn says whether no component of target (inside root) is a
// symbolic link, as far as the path exists: nsinit refuses a mount whose
// target crosses one, where libcontainer resolves it inside the root. The
// paths that must exist are checked by buildConfig's callers; a missing one
// fails the start either way.
func linkFreeIn(root, target string) bool {
	p := root
	for _, c := range strings.Split(strings.Trim(path.Clean(target), "/"), "/") {
		if c == "" {
			continue
		}
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil {
			return true
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return false
		}
	}
	return true
}

var (
	sealOnce sync.Once
	sealPath string
	sealErr  error
	sealFile *os.File // kept open for the life of the process
)

// sealedExe is the path nsinit starts kptr from: /proc/self/exe when it is
// already a sealed memfd (ReexecSealed), else one sealed clone of the binary
// (a read-only overlayfs view, or a sealed memfd copy) made once per
// process and kept open, never the binary's own file, which a function
// running as kptr's uid could otherwise reach through /proc and rewrite
// (CVE-2019-5736). When no run can write that file (sealNeeded), it is
// the binary itself: a 20-45 MB memfd copy per kptr process spared, where
// kptr is not root (as root, an overlay mount).
func sealedExe(stateDir string) (string, error) {
	if exeseal.IsSelfExeCloned() || !selfSealNeeded() {
		return "/proc/self/exe", nil
	}
	sealOnce.Do(func() {
		f, err := exeseal.CloneSelfExe(stateDir)
		if err != nil {
			sealErr = err
			return
		}
		sealFile, sealPath = f, fdPath(f)
	})
	return sealPath, sealErr
}

// keepSealed makes f, a sealed clone of the binary, the one nsinit starts
// from for the rest of the process (ReexecSealed's, when it made one: a
// second clone per process is not needed).
func keepSealed(f *os.File) {
	sealOnce.Do(func() { sealFile, sealPath = f, fdPath(f) })
}

func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

// namespacePolicy is the namespace tier's seccomp policy (defined in
// runtime/containerinit, which loads it into libcontainer's runs).
var namespacePolicy = containerinit.Policy

// namespaceSeccomp is namespacePolicy as the BPF program nsinit loads.
func namespaceSeccomp() ([]unix.SockFilter, error) {
	if !seccomp.Supported {
		return nil, seccomp.ErrUnsupported
	}
	return seccomp.Filter(namespacePolicy), nil
}

// LauncherSummary says, for kptr doctor, how the namespace tier's runs of
// images cached in cacheDir start here (see the top of this file).
func LauncherSummary(cacheDir string) string {
	l := os.Getenv("KPTR_LAUNCHER")
	if err := validLauncher(l); err != nil {
		return "none: " + err.Error()
	}
	if l == LauncherLibcontainer {
		return "libcontainer (KPTR_LAUNCHER=libcontainer)"
	}
	if runtime.CanMapRange() {
		d := filepath.Clean(cacheDir)
		for d != "/" {
			if _, err := os.Stat(d); err == nil {
				break
			}
			d = filepath.Dir(d)
		}
		if u := runtime.Untraversable(d); u != "" {
			fd, err := unix.OpenTree(unix.AT_FDCWD, d, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err == nil {
				unix.Close(fd)
				return fmt.Sprintf("nsinit (kptr's own C container init); %s is not traversable by a run's uids, so each run's image is attached from a mount tree kptr opens", u)
			}
			return fmt.Sprintf("libcontainer for images cached in %s: as root a run's uids are other users, %s is not traversable by them, and kptr cannot open mount trees here (%v) "+
				"(chmod o+x %s, or a --cache-dir / KPTR_CACHE_DIR whose whole path is, lets nsinit start those runs, at about a third of the cost)", cacheDir, u, err, u)
		}
	}
	return "nsinit (kptr's own C container init; libcontainer only for a run nsinit cannot start)"
}
