package fnenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/pipeline"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/signature"
)

// Config is a function environment as a command describes it: filled from
// its flags, environment and operator settings, read by fnenv alone.
type Config struct {
	// Where image functions run.
	Sandbox   string // a --sandbox word
	NoOverlay bool   // KPTR_OVERLAY=0: a read-only image even where an overlay works
	NoPrepare bool   // KPTR_PREPARE=0: every sandbox starts cold
	// Quiet: the sandbox's notice (auto's fallback) is never printed (the
	// docker face prints nothing but the function's output).
	Quiet bool
	// AllowWasm resolves wasm function images and runs them in-process
	// (--allow-alpha-wasm).
	AllowWasm bool
	// WasmNotice says on Stderr when a wasm module compiles (seconds to
	// minutes): false for --progress=none.
	WasmNotice bool

	// What a run may take.
	FnTimeout time.Duration
	MaxOutput int64 // a function's stdout and stderr (KPTR_FN_MAX_OUTPUT; 0: the default)
	Limits    pipeline.OutputLimits
	Results   pipeline.ResultBudget
	PkgLimits pipeline.PackageLimits

	// What may run: the operator's policy (nil: any image, exec and
	// network as the pipeline's options say) and the signature policy the
	// chain's caches enforce (nil: none).
	Policy    *Policy
	Signature *signature.Policy

	// Memo replays recorded results of identical runs (--memo).
	Memo bool

	// Where images come from. OpenCache opens the command's cache (its
	// directory, mirrors, registries, progress display) with extra options
	// after its own; the chain adds wasm and the signature policy.
	OpenCache   func(extra ...cache.Option) (*cache.Cache, error)
	CacheDir    string // the image cache's directory (the sandbox's images, compiled wasm)
	ImagePrefix string // for names without '/' (imageref.NoPrefix: none)
	PullPolicy  string
	Offline     bool
	// FetchAhead pulls a render's images together, ahead of their turns
	// (pipeline.Fetcher); Background pulls each in a process of its own
	// (generate). Neither: each at its turn.
	FetchAhead bool
	Background *Background

	Log    *slog.Logger
	Stderr io.Writer
	// OnExit registers what to release when the command has finished (the
	// sandbox, the memo store, the wasm tier).
	OnExit func(func() error)
}

// SandboxConfig is the sandbox c describes (OpenSandbox). When it is the
// wasm tier, it is also the tier wasm images run in, so it is opened with
// what their runs need besides (wasmOptions).
func (c Config) SandboxConfig() SandboxConfig {
	sc := SandboxConfig{Mode: c.Sandbox, Timeout: c.FnTimeout, Log: c.Log, ImageDir: c.CacheDir, NoOverlay: c.NoOverlay}
	if c.wasmIsSandbox() {
		sc.More = c.wasmOptions()
	}
	return sc
}

// wasmIsSandbox: --sandbox=wasm, whose tier also runs the wasm images.
func (c Config) wasmIsSandbox() bool {
	mode, err := ParseSandbox(c.Sandbox, "--sandbox")
	return err == nil && mode == runtime.Wasm
}

// wasmOptions open the wasm tier for the wasm images' runs: it compiles
// modules into the cache directory's wasm/ (entries keyed by module and
// wazero version) and, unless quiet, says when one compiles.
func (c Config) wasmOptions() []runtime.Option {
	opts := []runtime.Option{runtime.WithTimeout(c.FnTimeout), runtime.WithLogger(c.Log)}
	if c.MaxOutput > 0 {
		opts = append(opts, runtime.WithMaxOutput(c.MaxOutput))
	}
	if c.CacheDir != "" {
		opts = append(opts, runtime.WithCompileCache(filepath.Join(c.CacheDir, cache.WasmDir)))
	}
	if c.WasmNotice {
		opts = append(opts, runtime.WithCompileNotice(func(name string) {
			fmt.Fprintf(c.Stderr, "compiling the wasm module of %s (once per module: kptr prewarm and kptr cache pull --allow-alpha-wasm compile ahead)\n", name)
		}))
	}
	return opts
}

// Env is the one chain a command's functions go through: the operator's
// policy, then the signature policy (the cache's), the failure cause, the
// memo and the sandbox tier, with exec functions on the host and wasm ones
// in-process. It is the pipeline's Resolver (with ResolveConstraint,
// ResolveCached and Fetch); Runner, ExecRunner and WasmRunner are its
// runners. The cache and the sandbox open when a function first needs them,
// so exec-only packages and Kptfile errors never do, and a failure to open
// them is that function's failure.
type Env struct {
	cfg   Config
	cause causeRecorder

	cacheOnce sync.Once
	c         *cache.Cache
	cacheErr  error

	initOnce sync.Once
	r        runtime.Runner // what image runs go through: the memo's Runner or the sandbox
	initErr  error
	sb       lazySandbox

	offlineOnce sync.Once
	offline     *cache.Cache // Cached's view: never pulls, shows no progress
	offlineErr  error

	wasmOnce sync.Once
	wasm     runtime.Runner

	ahead fetchAhead
}

// New builds the chain cfg describes; nothing opens until a function needs it.
func New(cfg Config) *Env {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.OnExit == nil {
		cfg.OnExit = func(func() error) {}
	}
	e := &Env{cfg: cfg}
	e.sb.e = e
	return e
}

// Options are the pipeline options of the chain: its resolver and runners,
// the limits and, under an operator's policy, what it allows.
func (e *Env) Options() pipeline.Options {
	o := pipeline.Options{
		Resolver:    e,
		Runner:      e.Runner(),
		ExecRunner:  &stage{e, runExec},
		AllowWasm:   e.cfg.AllowWasm,
		MaxOutput:   e.cfg.MaxOutput,
		Limits:      e.cfg.Limits,
		Results:     e.cfg.Results,
		PkgLimits:   e.cfg.PkgLimits,
		ImagePrefix: e.cfg.ImagePrefix,
		Timeout:     e.cfg.FnTimeout,
	}
	if e.cfg.AllowWasm {
		o.WasmRunner = &stage{e, runWasm}
	}
	if p := e.cfg.Policy; p != nil {
		o.AllowExec, o.AllowNetwork, o.AllowImage = p.AllowExec, p.AllowNetwork, p.CheckImage
	}
	return o
}

// Runner runs image functions through the chain.
func (e *Env) Runner() runtime.Runner { return &stage{e, runImage} }

// Cause is the last error resolving or running returned: what stopped a
// function from running (the pipeline reports it as the function's exit
// code 125, as kpt does, keeping only its text; its exit code says whether
// it was the policy, a registry, the cache or the sandbox). The pipeline
// runs one function at a time and stops at the first failure, so the last
// error is the one that stopped the render.
func (e *Env) Cause() error { return e.cause.get() }

// openCache opens a cache of the command's with the chain's options.
func (e *Env) openCache(extra ...cache.Option) (*cache.Cache, error) {
	return e.cfg.OpenCache(append([]cache.Option{cache.WithWasm(e.cfg.AllowWasm), cache.WithSignaturePolicy(e.cfg.Signature)}, extra...)...)
}

// Cache is the command's cache, opened once.
func (e *Env) Cache() (*cache.Cache, error) {
	e.cacheOnce.Do(func() { e.c, e.cacheErr = e.openCache() })
	return e.c, e.cacheErr
}

// Close closes the cache and its offline view if they were opened (and
// keeps them from opening after).
func (e *Env) Close() error {
	closed := errors.New("the function environment is closed")
	e.cacheOnce.Do(func() { e.cacheErr = closed })
	e.offlineOnce.Do(func() { e.offlineErr = closed })
	var errs []error
	if e.c != nil {
		errs = append(errs, e.c.Close())
	}
	if e.offline != nil {
		errs = append(errs, e.offline.Close())
	}
	return errors.Join(errs...)
}

// eager: without memo and wasm the sandbox opens with the cache, as it
// always did, so a sandbox that cannot run fails the first image function
// before its pull.
func (e *Env) eager() bool { return !e.cfg.Memo && !e.cfg.AllowWasm }

func (e *Env) init() error {
	e.initOnce.Do(func() {
		if e.eager() {
			// the sandbox opens (the tier's checks, its probe verdict)
			// while the cache does: neither needs the other, and the
			// first function's sandbox waits for both
			go e.sb.openQuiet()
		}
		c, err := e.Cache()
		if err != nil {
			e.initErr = err
			return
		}
		switch {
		case e.eager():
			// quietly: init may run ahead of any function's turn (initTurn)
			if _, err := e.sb.openQuiet(); err != nil {
				e.initErr = err
				return
			}
			e.r = &e.sb
		case !e.cfg.Memo:
			// with wasm allowed the sandbox opens at the first container
			// image's run: a wasm-only pipeline needs none (a pod where
			// no sandbox tier works still runs wasm functions)
			e.r = &e.sb
		default:
			// the first run that is not replayed opens the sandbox (a
			// render whose every result is replayed never starts it)
			e.r = e.memoRunner(c, &e.sb)
		}
	})
	return e.initErr
}

// initTurn is init for a function's own turn: the sandbox's notice (the
// landlock fallback) is printed now, where it always was, also when a
// preparation ahead opened the sandbox earlier.
func (e *Env) initTurn() error {
	if err := e.init(); err != nil {
		return err
	}
	if e.eager() {
		_, _ = e.sb.open() // opened by init: this only prints the notice, once
	}
	return nil
}

// memoRunner puts the current user's memo store for cache c in front of
// next. A store that cannot be opened (no private directory to be had)
// turns memoisation off with a warning; the render runs all the same.
func (e *Env) memoRunner(c *cache.Cache, next runtime.Runner) runtime.Runner {
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		e.cfg.Log.Warn("function results are not memoised", "err", err)
		return next
	}
	e.cfg.OnExit(st.Close)
	return &memo.Runner{Next: next, Store: st, Variant: e.variant()}
}

// Resolve resolves a function's image at its turn: the allow-list first
// (nothing refused is ever pulled), then the cache (the signature policy,
// the fetch ahead or in the background).
func (e *Env) Resolve(ctx context.Context, ref string) (bundle.Bundle, error) {
	b, err := e.resolve(ctx, ref)
	e.cause.note(err)
	return b, err
}

func (e *Env) resolve(ctx context.Context, ref string) (bundle.Bundle, error) {
	if err := e.cfg.Policy.CheckImage(ref); err != nil {
		return bundle.Bundle{}, err
	}
	if e.cfg.Background != nil {
		return e.resolveInBackground(ctx, ref)
	}
	return e.resolveTurn(ctx, ref)
}

// resolveTurn resolves ref through the cache at a function's turn.
func (e *Env) resolveTurn(ctx context.Context, ref string) (bundle.Bundle, error) {
	if err := e.initTurn(); err != nil {
		return bundle.Bundle{}, err
	}
	b, err := e.takeAhead(ctx, ref)
	if err != nil && e.cfg.Memo {
		// as without memo: a sandbox that cannot run is the cause
		// reported first (the image could not run either way)
		if _, serr := e.sb.open(); serr != nil {
			err = serr
		}
	}
	return b, err
}

// ResolveConstraint lists a repository's tags (Kptfile `tag:`
// constraints) only if the allow-list could allow some tag of it, and
// checks the tag it picked.
func (e *Env) ResolveConstraint(ctx context.Context, repo, constraint string) (string, error) {
	ref, err := e.resolveConstraint(ctx, repo, constraint)
	e.cause.note(err)
	return ref, err
}

func (e *Env) resolveConstraint(ctx context.Context, repo, constraint string) (string, error) {
	if err := e.cfg.Policy.checkRepo(repo); err != nil {
		return "", err
	}
	if err := e.initTurn(); err != nil {
		return "", err
	}
	ref, err := e.c.ResolveConstraint(ctx, repo, constraint)
	if err != nil {
		return "", err
	}
	if err := e.cfg.Policy.CheckImage(ref); err != nil {
		return "", err
	}
	return ref, nil
}

// ResolveCached resolves ref only if the allow-list allows it and the
// cache already holds it (preparing the next function's sandbox): it
// records nothing and never pulls. It reads the cache through the offline
// view (Cached), so the cache and the sandbox are opened (init, which the
// Prepare that follows waits for) while it looks: the first sandbox is then
// set up as early as its image is known.
func (e *Env) ResolveCached(ctx context.Context, ref string) (bundle.Bundle, bool) {
	if e.cfg.Policy.CheckImage(ref) != nil {
		return bundle.Bundle{}, false
	}
	go func() { _ = e.init() }()
	b, err := e.cached(ctx, ref)
	return b, err == nil
}

// Cached resolves ref as a function's turn would (the allow-list, the
// signature policy, wasm images only when allowed) but only from what the
// cache holds: it never contacts a registry, never shows progress and
// opens no sandbox, so it answers in bounded time whatever ref names (kptr
// parameters announces a package's images with it, for Argo CD's UI). Its
// errors: the policy's refusal (a *PolicyError), cache.ErrNotCached, or
// what stopped the cache from opening or reading.
func (e *Env) Cached(ctx context.Context, ref string) (bundle.Bundle, error) {
	if err := e.cfg.Policy.CheckImage(ref); err != nil {
		return bundle.Bundle{}, err
	}
	return e.cached(ctx, ref)
}

// cached is Cached once the allow-list has allowed ref.
func (e *Env) cached(ctx context.Context, ref string) (bundle.Bundle, error) {
	e.offlineOnce.Do(func() {
		e.offline, e.offlineErr = e.openCache(cache.WithOffline(true), cache.WithProgress(nil))
	})
	if e.offlineErr != nil {
		return bundle.Bundle{}, e.offlineErr
	}
	return e.offline.Resolve(ctx, ref)
}

// runKind is what a stage runs.
type runKind int

const (
	runImage runKind = iota // through the memo and the sandbox tier (wasm images in-process)
	runExec                 // a host binary
	runWasm                 // a .wasm exec function
)

// stage is the chain's runner: the operator's policy, then the runner of
// its kind, the error recorded as the cause. Every runner of the chain is
// one, so each optional interface (runtime.Preparer) is forwarded here once.
type stage struct {
	e    *Env
	kind runKind
}

func (s *stage) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	res, err := s.run(ctx, b, inv)
	// exec and wasm runs are causes under an operator's policy only: the
	// fn commands classify them as kpt does
	if s.kind == runImage || s.e.cfg.Policy != nil {
		s.e.cause.note(err)
	}
	return res, err
}

func (s *stage) run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	e := s.e
	if err := e.cfg.Policy.checkRun(b, inv); err != nil {
		return runtime.Result{}, err
	}
	switch s.kind {
	case runExec:
		return runtime.Host{Timeout: e.cfg.FnTimeout, MaxOutput: e.cfg.MaxOutput}.Run(ctx, b, inv)
	case runWasm:
		return e.wasmRunner().Run(ctx, b, inv)
	}
	if err := e.initTurn(); err != nil {
		return runtime.Result{}, err
	}
	e.c.MarkRun(b) // cache ls's LAST USED: the last run (or replay), not the last pull
	return e.r.Run(ctx, b, inv)
}

// Prepare sets up the sandbox of an image run ahead of its turn, only if
// the policy allows the run (a forbidden sandbox is never even prepared),
// through the memo (which prepares once a run was not replayed).
func (s *stage) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	if s.kind != runImage || s.e.cfg.Policy.checkRun(b, inv) != nil || s.e.init() != nil {
		return
	}
	if p, ok := s.e.r.(runtime.Preparer); ok {
		p.Prepare(ctx, b, inv)
	}
}

// lazySandbox is the sandbox tier Config.Sandbox names, opened by its
// first Run or Prepare; wasm images run in-process in the wasm tier
// (wasmRunner: this one under --sandbox=wasm) whatever the tier.
type lazySandbox struct {
	e      *Env
	once   sync.Once
	r      runtime.Runner
	notice string // OpenSandbox's line for stderr, printed by open
	err    error
	said   sync.Once
}

// open opens the sandbox and prints its notice (once).
func (s *lazySandbox) open() (runtime.Runner, error) {
	r, err := s.openQuiet()
	s.said.Do(func() {
		if s.notice != "" && !s.e.cfg.Quiet {
			fmt.Fprint(s.e.cfg.Stderr, s.notice)
		}
	})
	return r, err
}

// openQuiet opens the sandbox without printing anything: what a
// preparation ahead does, which must not change a render's output.
func (s *lazySandbox) openQuiet() (runtime.Runner, error) {
	s.once.Do(func() {
		var closeSandbox func() error
		s.r, s.notice, closeSandbox, s.err = OpenSandbox(s.e.cfg.SandboxConfig())
		if closeSandbox != nil {
			// closed when the command ends: prepared sandboxes and the run-state lock go
			s.e.cfg.OnExit(closeSandbox)
		}
	})
	return s.r, s.err
}

func (s *lazySandbox) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	if b.Wasm != "" {
		return s.e.wasmRunner().Run(ctx, b, inv)
	}
	r, err := s.open()
	if err != nil {
		return runtime.Result{}, err
	}
	return r.Run(ctx, b, inv)
}

func (s *lazySandbox) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	if s.e.cfg.NoPrepare || b.Wasm != "" {
		return
	}
	if r, err := s.openQuiet(); err == nil {
		if p, ok := r.(runtime.Preparer); ok {
			p.Prepare(ctx, b, inv)
		}
	}
}

// wasmRunner is the wasm tier, opened once: under --sandbox=wasm the
// sandbox itself (one tier, one wazero runtime and compiled-code cache for
// every run), else a tier of its own beside the one that runs container
// images, opened by the first wasm run. A tier that cannot open is each
// wasm run's error.
func (e *Env) wasmRunner() runtime.Runner {
	e.wasmOnce.Do(func() {
		if e.cfg.wasmIsSandbox() {
			r, err := e.sb.openQuiet()
			if err != nil {
				r = failingRunner{err}
			}
			e.wasm = r
			return
		}
		t, ok := runtime.Lookup(runtime.Wasm)
		if !ok {
			e.wasm = failingRunner{errors.New("the wasm tier is not registered")}
			return
		}
		sb, err := t.Open(e.cfg.wasmOptions()...)
		if err != nil {
			e.wasm = failingRunner{Refusal(err, "")}
			return
		}
		e.cfg.OnExit(sb.Close)
		e.wasm = sb
	})
	return e.wasm
}

// failingRunner fails every run with err.
type failingRunner struct{ err error }

func (f failingRunner) Run(context.Context, bundle.Bundle, runtime.Invocation) (runtime.Result, error) {
	return runtime.Result{}, f.err
}

// causeRecorder keeps the last error the chain returned (Env.Cause).
type causeRecorder struct {
	mu   sync.Mutex
	last error
}

func (c *causeRecorder) note(err error) {
	if err != nil {
		c.mu.Lock()
		c.last = err
		c.mu.Unlock()
	}
}

func (c *causeRecorder) get() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

var (
	_ pipeline.CachedResolver     = (*Env)(nil)
	_ pipeline.ConstraintResolver = (*Env)(nil)
	_ pipeline.Fetcher            = (*Env)(nil)
	_ runtime.Preparer            = (*stage)(nil)
	_ runtime.Preparer            = (*lazySandbox)(nil)
)
