package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/sirupsen/logrus"
)

// Sandbox runs bundles in rootless libcontainer sandboxes. It is safe for
// concurrent use; every run gets its own namespaces, root directory and
// container state, removed when the run ends.
type Sandbox struct {
	stateDir  string
	timeout   time.Duration
	maxOutput int64
	limits    runtime.Limits
	log       *slog.Logger
	feat      Features
	probes    []runtime.ProbeResult
	probed    bool
	// cached: feat and probes came from a cached verdict (verdict.go);
	// rechecked: a failed start already made New's probes run afresh.
	cached    bool
	noCache   bool
	rechecked atomic.Bool
	// featMu guards feat, probes and overlay once New has returned: recheck
	// may replace them while runs and preparations read them.
	featMu sync.RWMutex
	// overlay: runs get a writable overlay of the image (Features.Overlay,
	// verified for stateDir, unless WithOverlay(false)).
	overlay   bool
	noOverlay bool
	// launcher starts the runs' containers (launch.go); nsinitOff: nsinit
	// failed to start a run, libcontainer starts them from then on.
	launcher    string
	launcherSet bool
	nsinitOff   atomic.Bool

	seq     atomic.Uint64
	entries sync.Map // rootfs path → []entry (a cached rootfs never changes)

	mu       sync.Mutex
	prepared []*prepared // prepared sandboxes not yet used, oldest first (see Prepare)
	closed   bool
	prepHits atomic.Uint64 // runs that used a prepared sandbox
	// disposing counts prepared sandboxes being destroyed, and prepared
	// runs' state being removed, in the background (Close waits for them).
	disposing sync.WaitGroup
}

// WithFeatures skips probing and uses f (tests, or a caller that probed).
func WithFeatures(f Features) runtime.Option {
	return runtime.TierOption(func(t any) {
		if s, ok := t.(*Sandbox); ok {
			s.feat, s.probed = f, true
		}
	})
}

// New probes the environment and returns a Sandbox, or a *ProbeError naming
// the prerequisite that is missing (kptr doctor explains how to fix it).
// The probes' verdict is cached in the run-state directory and reused while
// the kernel, the user, the process's confinement and the kptr build stay
// the same (verdict.go); a run that then fails to start probes again once.
func New(opts ...runtime.Option) (*Sandbox, error) {
	set := runtime.NewSettings(opts...)
	s := &Sandbox{stateDir: set.StateDir, timeout: set.Timeout, maxOutput: set.MaxOutput, limits: set.Limits,
		log: set.Log, noCache: set.NoProbeCache, noOverlay: set.NoOverlay}
	set.ApplyTier(s)
	if !s.launcherSet {
		s.launcher = os.Getenv("KPTR_LAUNCHER")
	}
	if err := validLauncher(s.launcher); err != nil {
		return nil, err
	}
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		logrus.SetLevel(logrus.ErrorLevel)
	}
	if !s.probed {
		s.probes, s.feat, s.cached = ProbeCached(s.noCache)
		if err := runtime.Required(s.probes); err != nil {
			return nil, err
		}
		for _, p := range s.probes {
			if p.Status == runtime.StatusDegraded && p.Name == "cgroups" && s.limits.Memory > 0 {
				s.log.Debug("sandbox: memory limit not enforced", "reason", p.Detail)
			}
		}
	}
	if s.stateDir == "" {
		s.stateDir = runtime.DefaultStateDir()
	}
	if err := runtime.EnsurePrivateDir(s.stateDir); err != nil {
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	if err := runtime.StateDirReachable(s.stateDir, runtime.CanMapRange()); err != nil {
		return nil, fmt.Errorf("sandbox state dir: %w", err)
	}
	if err := runtime.HoldOwnerLock(s.stateDir); err != nil {
		return nil, fmt.Errorf("sandbox state dir %s: %w", s.stateDir, err)
	}
	runtime.PruneStale(s.stateDir)
	if s.feat.Overlay && !s.noOverlay && overlaySafePath(s.stateDir) {
		if err := overlayCheck(s.stateDir); err != nil {
			s.log.Debug("sandbox: no overlay, read-only view of the image", "state-dir", s.stateDir, "err", err)
		} else {
			s.overlay = true
		}
	}
	return s, nil
}

// Features returns what the sandbox adapted to.
func (s *Sandbox) Features() Features {
	s.featMu.RLock()
	defer s.featMu.RUnlock()
	return s.feat
}

// Overlay says whether runs see a writable overlay of the image (else the
// image is read-only apart from tmpfs /tmp and $HOME).
func (s *Sandbox) Overlay() bool {
	s.featMu.RLock()
	defer s.featMu.RUnlock()
	return s.overlay
}

// Probes returns the probe results New acted on (nil with WithFeatures).
func (s *Sandbox) Probes() []runtime.ProbeResult {
	s.featMu.RLock()
	defer s.featMu.RUnlock()
	return s.probes
}

// Run runs b's entrypoint in a fresh sandbox with inv.Stdin as its stdin.
// A bundle without Rootfs is one of kpt's exec functions, a host binary: it
// runs through Host, unsandboxed, as kpt runs it (whether exec functions may
// run at all is the caller's policy).
func (s *Sandbox) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	return runtime.RunImage(ctx, b, inv, s.timeout, s.maxOutput, s.run)
}

func (s *Sandbox) run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	if pr := s.take(ctx, b, inv); pr != nil {
		if res, err, ok := s.runPrepared(ctx, pr, inv); ok {
			return res, err
		}
		// The prepared sandbox could not be released (its init died):
		// nothing of the invocation was consumed, so start afresh.
	}
	res, err, started := s.runOnce(ctx, b, inv, false)
	if err != nil && !started && errors.Is(err, errNsinitStart) {
		// nsinit could not start it: if libcontainer can, it is a call only
		// nsinit makes refused here (a seccomp profile) or a bug of
		// nsinit's, and libcontainer starts every later run of this
		// Sandbox (launch.go); if it cannot either (a bind source that
		// does not exist), its error is the run's.
		nsErr := err
		res, err, started = s.runOnce(ctx, b, inv, true)
		if err == nil || started {
			s.nsinitOff.Store(true)
			NsinitFallbacks.Add(1)
			NsinitLastFail.Store(nsErr.Error())
			s.log.Debug("sandbox: nsinit could not start a run that libcontainer could; libcontainer from now on", "err", nsErr)
		}
	}
	if err != nil && !started {
		if retry, rerr := s.recheck(err); retry {
			res, err, _ = s.runOnce(ctx, b, inv, false)
		} else {
			err = rerr
		}
	}
	return res, err
}

// runOnce sets up and runs one sandbox; started is false when the run
// failed before its init was started (set-up or the container's start:
// what a probe would have caught), so nothing of inv was consumed. A failed
// execve of the entrypoint is the image's (started is true then).
func (s *Sandbox) runOnce(ctx context.Context, b bundle.Bundle, inv runtime.Invocation, lc bool) (_ runtime.Result, _ error, started bool) {
	st, err := s.setupWith(b, inv, lc)
	if err != nil {
		return runtime.Result{}, err, false
	}
	defer st.release(s.log)
	err = st.ct.start(true)
	st.sio.CloseChild()
	var xerr *execError
	if err != nil && !errors.As(err, &xerr) {
		return runtime.Result{}, err, false
	}
	if werr := st.watch(); werr != nil {
		return runtime.Result{}, werr, false
	}
	if xerr != nil {
		// The image's entrypoint could not be executed: the init has
		// reported it and exits; release reaps it.
		return runtime.Result{ExitCode: -1}, fmt.Errorf("start: %s", xerr.msg), true
	}
	res, err := s.finish(ctx, st, inv)
	return res, err, true
}

// recheck is called when a run failed to start (startErr) with probe
// results from a cached verdict: the environment may have changed in a way
// the verdict's key cannot see (verdict.go). Once per Sandbox it probes
// afresh, replacing the cached verdict. retry is true when the new verdict
// differs but still allows runs: the Sandbox has adopted it and the run
// should be tried again. Otherwise err is startErr, joined with the probe
// error when the sandbox can no longer run at all.
func (s *Sandbox) recheck(startErr error) (retry bool, err error) {
	if !s.cached || !s.rechecked.CompareAndSwap(false, true) {
		return false, startErr
	}
	results, f, _ := ProbeCached(true)
	if perr := runtime.Required(results); perr != nil {
		return false, fmt.Errorf("%w (probed again: %w)", startErr, perr)
	}
	s.featMu.Lock()
	defer s.featMu.Unlock()
	if sameVerdict(results, s.probes, f, s.feat) {
		return false, startErr
	}
	s.log.Debug("sandbox: the cached probe verdict no longer described the environment; replaced it", "start-error", startErr)
	s.probes, s.feat = results, f
	s.overlay = s.overlay && f.Overlay
	return true, nil
}

// started is one sandbox being set up: its container, the init process and
// the pipes the function will have as stdin, stdout and stderr.
type started struct {
	id    string
	ct    container
	sio   *runtime.Stdio
	proc  runtime.Process
	root  string          // the run's private root directory to remove ("" for a direct root)
	stage string          // the image's mount point to remove ("" unless staged, launch.go)
	rw    string          // the run's overlay upper and work directories to remove ("" without overlay)
	reap  *runtime.Reaper // once the init has started
	// stateDir holds the run's entries; "" once they are removed.
	stateDir string
}

// watch hands the started init to a reaper.
func (st *started) watch() error {
	pid, err := st.ct.pid()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	st.reap = runtime.NewReaper(pid, st.ct.wait, nil)
	return nil
}

// setup creates (but does not start) the sandbox of one run of b.
func (s *Sandbox) setup(b bundle.Bundle, inv runtime.Invocation) (*started, error) {
	return s.setupWith(b, inv, false)
}

// setupWith is setup; with lc, libcontainer starts the run.
func (s *Sandbox) setupWith(b bundle.Bundle, inv runtime.Invocation, lc bool) (_ *started, err error) {
	s.featMu.RLock()
	feat, overlay := s.feat, s.overlay
	s.featMu.RUnlock()
	proc, err := runtime.ResolveProcess(b.Rootfs, b.Config, inv, feat.Root)
	if err != nil {
		return nil, err
	}
	entries, err := s.topEntries(b.Rootfs)
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("%s-%d", runtime.OwnerName(), s.seq.Add(1))
	// plan is the run's spec and configuration; with stage, the image is
	// seen at that path (launch.go: as root, an image out of the run
	// uids' reach, attached there for nsinit).
	plan := func(stage string) (runSpec, *configs.Config, error) {
		spec := runSpec{
			ID: id, Root: filepath.Join(s.stateDir, id+".root"), Image: b.Rootfs, Entries: entries,
			Proc: proc, Inv: inv, Limits: s.limits, Feat: feat,
		}
		spec.HomeMount = homeMountable(b.Rootfs, proc.Home, entries)
		if fi, err := runtime.StatIn(b.Rootfs, "/etc/resolv.conf"); err == nil && fi.Mode().IsRegular() {
			spec.ResolvConf = true
		}
		reach := b.Rootfs
		if stage != "" {
			spec.Image, reach = stage, s.stateDir
		}
		spec.Direct = s.directRoot(b.Rootfs, reach, spec)
		if overlay && overlayFor(spec.Image, reach, feat) {
			spec.RW = filepath.Join(s.stateDir, id+".rw")
		}
		cfg, err := buildConfig(spec)
		return spec, cfg, err
	}
	stage := ""
	if !lc && s.mayStage(feat, b.Rootfs) {
		stage = filepath.Join(s.stateDir, id+".img")
	}
	spec, cfg, err := plan(stage)
	if err != nil {
		return nil, err
	}
	var ns *nsContainer
	why := ""
	if !lc {
		ns, why = s.nsinitContainer(spec, cfg, proc, b.Rootfs, stage)
	}
	if ns == nil && stage != "" {
		stage = ""
		if spec, cfg, err = plan(""); err != nil {
			return nil, err
		}
	}
	if ns == nil && why != "" {
		s.log.Debug("sandbox: started by libcontainer", "image", b.Ref, "reason", why)
	}
	if !spec.Direct {
		s.log.Debug("sandbox: binding the image's top-level entries one by one (slower): the rootfs lacks /proc, /dev or /tmp, a mount target, or (as root) is not reachable by others; a cache directory with o+x on its path avoids the latter", "image", b.Ref)
	}
	if err := runtime.HoldOwnerLock(s.stateDir); err != nil {
		if ns != nil {
			ns.close()
		}
		return nil, fmt.Errorf("sandbox state dir %s: %w", s.stateDir, err)
	}
	st := &started{id: id, proc: proc, stateDir: s.stateDir}
	if ns != nil {
		st.ct = ns
	}
	defer func() {
		if err != nil {
			st.destroy(s.log)
		}
	}()
	if stage != "" {
		st.stage = stage
		if err := os.Mkdir(stage, 0o755); err != nil {
			return nil, fmt.Errorf("prepare image mount point: %w", err)
		}
	}
	if !spec.Direct {
		st.root = spec.Root
		if err := makeRoot(spec.Root, entries); err != nil {
			return nil, fmt.Errorf("prepare root: %w", err)
		}
	}
	if spec.RW != "" && (ns == nil || !ns.upperInMemory) {
		st.rw = spec.RW
		if err := makeUppers(spec.RW, entries, feat); err != nil {
			return nil, fmt.Errorf("prepare overlay: %w", err)
		}
	}
	if st.sio, err = runtime.NewStdio(nil, 0); err != nil {
		return nil, err
	}
	if ns != nil {
		ns.sio = st.sio
		return st, nil
	}
	if st.ct, err = s.libcontainerContainer(id, cfg, proc, st.sio); err != nil {
		return nil, err
	}
	return st, nil
}

// finish feeds the started (and released) function its stdin, collects its
// output and waits for it under the invocation's limits.
func (s *Sandbox) finish(ctx context.Context, st *started, inv runtime.Invocation) (runtime.Result, error) {
	timeout := inv.Timeout
	if timeout <= 0 {
		timeout = s.timeout
	}
	maxOut := inv.MaxOutput
	if maxOut <= 0 {
		maxOut = s.maxOutput
	}
	st.sio.Src, st.sio.Max = inv.Stdin, maxOut
	st.sio.Out.Max, st.sio.Err.Max = maxOut, maxOut
	st.sio.Start()
	res, err := runtime.Wait(ctx, timeout, st.sio, st.reap)
	if err == nil && res.ExitCode == 255 && isExecFailure(res.Stderr, st.proc.Args[0]) {
		// libcontainer's init reports a failed execve of the entrypoint on
		// the function's stderr and exits 255: that is a start failure.
		return res, fmt.Errorf("start: %s", strings.TrimSpace(string(res.Stderr)))
	}
	return res, err
}

// release ends the run: it kills whatever is left of it (nothing, when its
// init has been reaped), waits up to KillGrace and removes its state; when
// the init is still not reaped then, the reaper removes the state once it
// is.
func (st *started) release(log *slog.Logger) {
	if st.reap == nil {
		st.destroy(log)
		return
	}
	st.reap.End(runtime.KillGrace)
	st.reap.AfterEnd(func() { st.destroy(log) })
}

// destroy removes the state of a run whose processes are all gone.
func (st *started) destroy(log *slog.Logger) {
	if st.ct != nil {
		if err := st.ct.destroy(); err != nil {
			log.Warn("sandbox: destroy", "id", st.id, "err", err)
		}
	}
	if st.sio != nil {
		st.sio.Close()
	}
	if st.stateDir == "" {
		return // destroyed before
	}
	if _, ns := st.ct.(*nsContainer); !ns {
		// libcontainer's own state, also when Create or Destroy failed
		// midway (nsinit keeps none on disk).
		runtime.RemoveTree(filepath.Join(st.stateDir, st.id))
	}
	if st.root != "" {
		runtime.RemoveTree(st.root)
	}
	if st.stage != "" {
		_ = os.Remove(st.stage) // empty on the host: the image was attached in the run's namespace only
	}
	if st.rw != "" {
		runtime.RemoveTree(st.rw)
	}
	runtime.ReleaseOwnerLock(st.stateDir)
	st.stateDir = ""
}

// overlayFor says whether runs of an image seen at lower can get an
// overlay (where the sandbox gives runs one): the kernel reads the lower
// layer's path as the run's container root, so it must be spellable in
// mount options and, as root (container root is an unprivileged host uid
// then), reach (the image, or the directory it is staged in) must be
// reachable by others.
func overlayFor(lower, reach string, feat Features) bool {
	if !overlaySafePath(lower) {
		return false
	}
	return !feat.Root || runtime.WorldTraversable(reach)
}

// makeUppers creates a run's overlay directory in the run-state directory
// (libcontainer's runs; nsinit's keep it in memory, upperInMemory):
// <rw>/u (the upper layer) with, for each top-level directory of the
// image, <rw>/u/<dir> (its mode, owned by container root: the view's
// top-level directories belong to the run's root, who may add files there)
// and <rw>/w (overlayfs's work directory). When kptr is root the run's
// container root is host uid RootHostIDBase, which must own them.
func makeUppers(rw string, entries []entry, f Features) error {
	u, w := filepath.Join(rw, "u"), filepath.Join(rw, "w")
	chown := func(p string) error {
		if f.Root {
			return os.Lchown(p, runtime.RootHostIDBase, runtime.RootHostIDBase)
		}
		return nil
	}
	// rw is traversable (the run's container root is another host uid when
	// kptr is root); u and w are private to the run's container root.
	for _, d := range []string{rw, u, w} {
		if err := os.Mkdir(d, map[bool]os.FileMode{true: 0o711, false: 0o700}[d == rw]); err != nil {
			return err
		}
		if d != rw {
			if err := chown(d); err != nil {
				return err
			}
		}
	}
	for _, e := range entries {
		if e.Kind != entryDir || skippedTop[e.Name] {
			continue
		}
		d := filepath.Join(u, e.Name)
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if err := chown(d); err != nil {
			return err
		}
		if err := os.Chmod(d, e.Mode); err != nil {
			return err
		}
	}
	return nil
}

// isExecFailure recognises the single line libcontainer's init writes when
// execve of the entrypoint fails ("exec /path: exec format error").
func isExecFailure(stderr []byte, exe string) bool {
	s := string(stderr)
	return strings.HasPrefix(s, "exec "+exe+": ") && strings.Count(s, "\n") == 1 && strings.HasSuffix(s, "\n")
}

// unwrapStart shortens libcontainer's nested start errors to their cause.
func unwrapStart(err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "exec: "); i >= 0 {
		return errors.New(msg[i:])
	}
	return err
}

// directRoot says whether the cached rootfs can be the container's root
// as it is: libcontainer creates missing mount points inside the root, so
// that is only allowed when every mount point already exists (then nothing
// is ever written: the root is bound, mounted on and made read-only before
// the function starts), and when the run's mapped uid can reach the rootfs.
func (s *Sandbox) directRoot(rootfs, reach string, spec runSpec) bool {
	for _, d := range []string{"/proc", "/dev", "/tmp"} {
		if fi, err := os.Lstat(filepath.Join(rootfs, d)); err != nil || !fi.IsDir() {
			return false
		}
	}
	for _, m := range spec.Inv.Mounts {
		if _, err := runtime.StatIn(rootfs, m.Target); err != nil {
			return false
		}
	}
	if spec.Feat.Root && !runtime.WorldTraversable(reach) {
		return false // the mapped uid could not reach it; binds are opened by kptr instead
	}
	return true
}

// topEntries lists the top level of a cached rootfs once per rootfs.
func (s *Sandbox) topEntries(rootfs string) ([]entry, error) {
	if v, ok := s.entries.Load(rootfs); ok {
		return v.([]entry), nil
	}
	des, err := os.ReadDir(rootfs)
	if err != nil {
		return nil, fmt.Errorf("read rootfs: %w", err)
	}
	var out []entry
	for _, de := range des {
		e := entry{Name: de.Name()}
		switch t := de.Type(); {
		case t.IsDir():
			e.Kind = entryDir
			fi, err := de.Info()
			if err != nil {
				return nil, err
			}
			e.Mode = fi.Mode() & (os.ModePerm | os.ModeSticky | os.ModeSetgid)
		case t&os.ModeSymlink != 0:
			e.Kind = entrySymlink
			if e.Target, err = os.Readlink(filepath.Join(rootfs, e.Name)); err != nil {
				return nil, err
			}
		case t.IsRegular():
			e.Kind = entryFile
		default:
			continue // sockets, fifos, devices: never bound
		}
		out = append(out, e)
	}
	s.entries.Store(rootfs, out)
	return out, nil
}

// makeRoot creates a run's root directory: mount points for the image's
// top-level directories and files, copies of its top-level symlinks, and
// /proc, /dev and /tmp.
func makeRoot(root string, entries []entry) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"proc", "dev", "tmp"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if skippedTop[e.Name] {
			continue
		}
		p := filepath.Join(root, e.Name)
		var err error
		switch e.Kind {
		case entryDir:
			err = os.Mkdir(p, 0o755)
		case entryFile:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				err = f.Close()
			}
		case entrySymlink:
			err = os.Symlink(e.Target, p)
		}
		if err != nil {
			return err
		}
	}
	return os.Chmod(root, 0o755)
}

// homeMountable: $HOME gets its own tmpfs when it is an existing directory of
// the image below a bound top-level directory (never /, /tmp, /proc, /dev).
func homeMountable(rootfs, home string, entries []entry) bool {
	home = path.Clean(home)
	if home == "/" {
		return false
	}
	top := strings.SplitN(strings.TrimPrefix(home, "/"), "/", 2)[0]
	if skippedTop[top] {
		return false
	}
	for _, e := range entries {
		if e.Name == top && e.Kind == entryDir {
			fi, err := os.Lstat(filepath.Join(rootfs, home))
			return err == nil && fi.IsDir()
		}
	}
	return false
}
