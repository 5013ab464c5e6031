package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sync/singleflight"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

// Defaults of a Runner.
const (
	// DefaultMemoryLimit is the largest linear memory of a module, in bytes
	// (16384 pages of 64 KiB).
	DefaultMemoryLimit = 1 << 30
	// MaxModuleBytes is the largest module file a Runner reads.
	MaxModuleBytes = 256 << 20
	pageSize       = 65536
)

// ABI is the host interface a module expects.
type ABI string

const (
	ABIJS     ABI = "js"     // Go's GOOS=js GOARCH=wasm (wasm_exec.js)
	ABIWASIP1 ABI = "wasip1" // wasi_snapshot_preview1
)

// Runner runs wasm bundles (bundle.Bundle with Wasm set). It implements
// runtime.Runner; the zero value is not usable, use New.
type Runner struct {
	timeout     time.Duration
	maxOutput   int64
	memoryLimit int64
	cacheDir    string
	// notice, when set, is called with the image (or module path) before a
	// module is compiled that has no compiled code in cacheDir yet: the
	// run's progress can say why it takes long (runtime.WithCompileNotice).
	notice func(name string)
	// start is how a run begins whose module has no compiled code yet.
	start Start
	// workers is how many goroutines compile one module.
	workers int
	*engine
}

// Start is how a run begins when its module has no compiled code yet (not
// in this process, not in the cache directory).
type Start int

const (
	// StartCompiled compiles the module (with the other runs and
	// preparations of it: one compilation per module at a time), then
	// runs it. The default: BENCHMARKS.md, "wasm: a module's first run".
	StartCompiled Start = iota
	// StartBoth runs the module at once with wazero's interpreter while
	// the compiler builds it in the background (into the cache directory);
	// when the compiled module is ready before the interpreted run ends,
	// that run is ended and the compiled one run. The first result comes
	// as soon as the faster of the two gives it, less what the two take
	// from each other running at once (measured: as much as the
	// interpreter gains at 50 resources), at twice the memory.
	StartBoth
	// StartInterpreted only interprets (the benchmark's column).
	StartInterpreted
)

// WithStart sets how a run begins whose module has no compiled code yet.
func WithStart(s Start) Option { return func(r *Runner) { r.start = s } }

// WithCompileWorkers sets how many goroutines compile one module (default:
// GOMAXPROCS, at least two). With one, a compilation cannot be abandoned
// midway: wazero checks its context between functions only with more.
func WithCompileWorkers(n int) Option { return func(r *Runner) { r.workers = max(n, 1) } }

// engine is what Runners made from one another (with) share: the wazero
// runtimes and the compiled modules. Without a cache directory one runtime
// holds every module; with one, each module has a runtime of its own whose
// compilation cache is the module's directory (compiledDir), so what a
// module leaves on disk can be pruned with it.
type engine struct {
	once    sync.Once
	rt      wazero.Runtime
	initErr error

	// the interpreter's runtime, made on first use
	ionce sync.Once
	irt   wazero.Runtime
	iErr  error

	mu          sync.Mutex
	compiled    map[string]*compiledModule
	interpreted map[string]*compiledModule // modules without compiled code yet
	runtimes    []wazero.Runtime           // every runtime made, closed by Close
	sf          singleflight.Group         // compilations, by module
	isf         singleflight.Group         // preparations for the interpreter
	compiling   sync.WaitGroup             // compilations under way, awaited by Close
	closing     context.Context            // ended by Close to drop the compilations under way
	drop        context.CancelCauseFunc    // ends closing
	switches    atomic.Int64               // interpreted runs ended for the compiled module

	// compileGate, set by tests, is called as a compilation starts: it
	// can hold the compilation back.
	compileGate func(ctx context.Context)
}

// with is a Runner with other options sharing r's compiled modules (the
// compilation cache directory is r's).
func (r *Runner) with(opts ...Option) *Runner {
	c := *r
	for _, o := range opts {
		o(&c)
	}
	c.cacheDir = r.cacheDir
	return &c
}

type compiledModule struct {
	rt  wazero.Runtime // the runtime mod was compiled in, and runs in
	mod wazero.CompiledModule
	abi ABI
}

// Option configures a Runner.
type Option func(*Runner)

// WithTimeout is the default timeout of a run (Invocation.Timeout wins).
func WithTimeout(d time.Duration) Option { return func(r *Runner) { r.timeout = d } }

// WithMaxOutput is the default cap of stdout and stderr each (Invocation.MaxOutput wins).
func WithMaxOutput(n int64) Option { return func(r *Runner) { r.maxOutput = n } }

// WithMemoryLimit caps a module's linear memory, in bytes (rounded down to
// whole 64 KiB pages); its js host values get the same budget.
func WithMemoryLimit(n int64) Option { return func(r *Runner) { r.memoryLimit = n } }

// WithCacheDir keeps compiled modules in dir (created if missing), so a
// module is compiled once per machine and wazero version.
func WithCacheDir(dir string) Option { return func(r *Runner) { r.cacheDir = dir } }

// New returns a Runner. Nothing is compiled until the first run.
func New(opts ...Option) *Runner {
	e := &engine{compiled: map[string]*compiledModule{}, interpreted: map[string]*compiledModule{}}
	e.closing, e.drop = context.WithCancelCause(context.Background())
	r := &Runner{timeout: runtime.DefaultTimeout, maxOutput: runtime.DefaultMaxOutput,
		memoryLimit: DefaultMemoryLimit, workers: max(goruntime.GOMAXPROCS(0), 2), engine: e}
	for _, o := range opts {
		o(r)
	}
	if r.memoryLimit < pageSize {
		r.memoryLimit = pageSize
	}
	return r
}

// init creates the shared runtime of a Runner without a cache directory.
func (r *Runner) init() error {
	r.once.Do(func() {
		if r.cacheDir == "" {
			r.rt, r.initErr = r.newRuntime("", false)
		}
	})
	return r.initErr
}

// newRuntime is a wazero runtime with the host modules: the compiler where
// wazero has one (else, or with interp, its interpreter), closing modules
// when their context ends, with the compilation cache in dir when one is
// given.
func (r *Runner) newRuntime(dir string, interp bool) (wazero.Runtime, error) {
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfig()
	if interp {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	cfg = cfg.WithCloseOnContextDone(true)
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("wasm compilation cache: %w", err)
		}
		cc, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			return nil, fmt.Errorf("wasm compilation cache: %w", err)
		}
		cfg = cfg.WithCompilationCache(cc)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	r.mu.Lock()
	r.runtimes = append(r.runtimes, rt)
	r.mu.Unlock()
	if err := instantiateJSHost(ctx, rt); err != nil {
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, err
	}
	return rt, nil
}

// Close ends the compilations under way in the background, or under
// StartBoth waits for them (background), then releases the compiled
// modules and the runtimes.
func (r *Runner) Close() error {
	if r.start != StartBoth {
		r.drop(errClosed)
	}
	r.compiling.Wait()
	r.mu.Lock()
	rts := r.runtimes
	r.runtimes = nil
	r.mu.Unlock()
	var errs []error
	for _, rt := range rts {
		errs = append(errs, rt.Close(context.Background()))
	}
	return errors.Join(errs...)
}

// Run implements runtime.Runner: the module b.Wasm names (beneath b.Rootfs,
// or a host path for an exec function without a rootfs) runs with
// inv.Stdin as its input.
func (r *Runner) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	start := time.Now()
	res, err := r.run(ctx, b, inv)
	res.Duration = time.Since(start)
	if err != nil {
		return res, &runtime.RunError{Image: moduleName(b), Err: err}
	}
	return res, nil
}

// moduleName names b's module in errors and notices: its image, else its path.
func moduleName(b bundle.Bundle) string {
	if b.Ref != "" {
		return b.Ref
	}
	return b.Wasm
}

// Compile compiles b's module ahead of its run (pre-warming), into the
// compilation cache when the Runner has one.
func (r *Runner) Compile(ctx context.Context, b bundle.Bundle) (ABI, error) {
	m, err := r.load(b)
	if err != nil {
		return "", err
	}
	cm, err := r.compile(ctx, m)
	if err != nil {
		return "", err
	}
	return cm.abi, nil
}

// wasmModule is a module's code as read, and what names it.
type wasmModule struct {
	code []byte
	key  string // SHA-256 of code, hex: names its compiled code
	name string
}

// load reads b's module.
func (r *Runner) load(b bundle.Bundle) (wasmModule, error) {
	if b.Wasm == "" {
		return wasmModule{}, errors.New("not a wasm function")
	}
	if err := r.init(); err != nil {
		return wasmModule{}, err
	}
	code, err := readModule(b)
	if err != nil {
		return wasmModule{}, err
	}
	sum := sha256.Sum256(code)
	return wasmModule{code: code, key: hex.EncodeToString(sum[:]), name: moduleName(b)}, nil
}

// inMemory is m's compiled module if this process has compiled or loaded it.
func (r *Runner) inMemory(m wasmModule) *compiledModule {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.compiled[m.key]
}

// compile compiles m with the optimizing compiler (or loads its compiled
// code from the cache directory), once per module at a time: callers of
// the same module share one compilation.
func (r *Runner) compile(ctx context.Context, m wasmModule) (*compiledModule, error) {
	// a caller that joins a compilation started by another stops waiting
	// when its own context ends
	select {
	case res := <-r.sf.DoChan(m.key, r.compileFunc(ctx, m)):
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*compiledModule), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("compiling module: %w", context.Cause(ctx))
	}
}

// background starts m's compilation, unless one is in flight already (which
// it then joins), without waiting for it: the channel has its result. The
// compilation outlives ctx's plain end (the run or preparation that started
// it returns long before it), but ends with ctx when ctx ends for a cause
// (a signal, a deadline). Close waits for it under StartBoth, so a process
// that closes its Runner leaves the module compiled for the next (its
// interpreted runs did not need it); otherwise Close drops it (a function
// prepared that never ran).
func (r *Runner) background(ctx context.Context, m wasmModule) <-chan singleflight.Result {
	r.compiling.Add(1)
	cctx, release := r.backgroundContext(ctx)
	in := r.sf.DoChan(m.key, r.compileFunc(cctx, m))
	out := make(chan singleflight.Result, 1)
	go func() {
		res := <-in
		release()
		r.compiling.Done()
		out <- res
	}()
	return out
}

// errClosed ends the compilations Close drops.
var errClosed = errors.New("the runner closed")

// backgroundContext is the context of a compilation started in the
// background by a caller with ctx: ended by ctx's end for a cause other
// than a plain cancellation (context.Canceled: the caller is done), and by
// Close dropping it. release frees what watches them.
func (r *Runner) backgroundContext(ctx context.Context) (_ context.Context, release func()) {
	bg, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopCaller := context.AfterFunc(ctx, func() {
		if cause := context.Cause(ctx); cause != context.Canceled {
			cancel(cause)
		}
	})
	stopClose := context.AfterFunc(r.closing, func() { cancel(context.Cause(r.closing)) })
	return bg, func() { stopCaller(); stopClose(); cancel(nil) }
}

// compileFunc is m's compilation, for r.sf.
func (r *Runner) compileFunc(ctx context.Context, m wasmModule) func() (any, error) {
	return func() (any, error) {
		if cm := r.inMemory(m); cm != nil {
			return cm, nil
		}
		if r.compileGate != nil {
			r.compileGate(ctx)
		}
		rt := r.rt
		if r.cacheDir != "" {
			if err := r.cacheReady(m); err != nil {
				return nil, err
			}
			if r.notice != nil && !r.CompiledOnDisk(m.key) {
				r.notice(m.name)
			}
			var err error
			if rt, err = r.newRuntime(compiledDir(r.cacheDir, m.key), false); err != nil {
				return nil, err
			}
		} else if r.notice != nil {
			r.notice(m.name)
		}
		// More than one worker makes the compilation end with ctx
		// (wazero checks it between functions only then) and use the
		// cores an interpreted run leaves idle.
		wctx := experimental.WithCompilationWorkers(ctx, r.workers)
		mod, err := rt.CompileModule(wctx, m.code)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("compiling module: %w", context.Cause(ctx))
			}
			return nil, fmt.Errorf("compiling module: %s", firstLine(err.Error()))
		}
		abi, err := checkImports(mod)
		if err != nil {
			_ = mod.Close(ctx)
			return nil, err
		}
		cm := &compiledModule{rt: rt, mod: mod, abi: abi}
		r.mu.Lock()
		r.compiled[m.key] = cm
		im := r.interpreted[m.key]
		delete(r.interpreted, m.key)
		r.mu.Unlock()
		if im != nil {
			// safe while runs of it are under way (wazero)
			_ = im.mod.Close(context.Background())
		}
		return cm, nil
	}
}

// cacheReady checks m's directory in the cache directory, marks it used
// and clears it of stale leftovers.
func (r *Runner) cacheReady(m wasmModule) error {
	if r.cacheDir == "" {
		return nil
	}
	dir := compiledDir(r.cacheDir, m.key)
	// wazero loads what it finds there as machine code, following links
	// and checking nothing: only the cache's owner or root may have
	// written it (the cache's rule)
	if err := cache.CheckTree(dir); err != nil {
		return &cache.Error{Err: fmt.Errorf("wasm compilation cache: %w", err)}
	}
	// in use: PruneCompiled keeps what was used lately
	touch(dir)
	// What a compilation killed long ago left here goes now, not only at a
	// prune, which a sidecar never runs: two small directory reads at a
	// module's first use by a process, and never a file another kptr may
	// be writing.
	_, _, _ = sweepLeftovers(dir, staleLeftover, false)
	return nil
}

// interpret prepares m for wazero's interpreter (quick: no machine code),
// once per module while it has no compiled code.
func (r *Runner) interpret(ctx context.Context, m wasmModule) (*compiledModule, error) {
	v, err, _ := r.isf.Do(m.key, func() (any, error) {
		r.mu.Lock()
		im := r.interpreted[m.key]
		r.mu.Unlock()
		if im != nil {
			return im, nil
		}
		r.ionce.Do(func() { r.irt, r.iErr = r.newRuntime("", true) })
		if r.iErr != nil {
			return nil, r.iErr
		}
		mod, err := r.irt.CompileModule(ctx, m.code)
		if err != nil {
			return nil, fmt.Errorf("compiling module: %s", firstLine(err.Error()))
		}
		abi, err := checkImports(mod)
		if err != nil {
			_ = mod.Close(ctx)
			return nil, err
		}
		im = &compiledModule{rt: r.irt, mod: mod, abi: abi}
		r.mu.Lock()
		if r.compiled[m.key] == nil {
			r.interpreted[m.key] = im
		}
		r.mu.Unlock()
		return im, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*compiledModule), nil
}

// readModule reads the module file, bounded, beneath the rootfs through
// os.Root (an image's files are untrusted) or at its host path.
func readModule(b bundle.Bundle) ([]byte, error) {
	var f *os.File
	var err error
	if b.Rootfs != "" {
		root, rerr := os.OpenRoot(b.Rootfs)
		if rerr != nil {
			return nil, rerr
		}
		defer root.Close()
		f, err = root.Open(strings.TrimPrefix(filepath.Clean("/"+b.Wasm), "/"))
	} else {
		f, err = os.Open(b.Wasm)
	}
	if err != nil {
		return nil, fmt.Errorf("reading module: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("module %s is not a regular file", b.Wasm)
	}
	code, err := io.ReadAll(io.LimitReader(f, MaxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading module: %w", err)
	}
	if len(code) > MaxModuleBytes {
		return nil, fmt.Errorf("module %s is larger than %d MiB", b.Wasm, MaxModuleBytes>>20)
	}
	return code, nil
}

// checkImports decides the module's ABI from its imports and refuses any
// import kptr does not provide, before anything runs.
func checkImports(m wazero.CompiledModule) (ABI, error) {
	var abi ABI
	for _, d := range m.ImportedMemories() {
		mod, name, _ := d.Import()
		return "", fmt.Errorf("module imports memory %s.%s, which kptr does not provide", mod, name)
	}
	for _, fn := range m.ImportedFunctions() {
		mod, name, _ := fn.Import()
		var this ABI
		switch {
		case mod == "gojs" || mod == "go":
			if _, ok := jsImports[name]; !ok && name != "debug" {
				return "", fmt.Errorf("module imports %s.%s, which kptr does not provide", mod, name)
			}
			this = ABIJS
		case mod == wasi_snapshot_preview1.ModuleName:
			this = ABIWASIP1
		default:
			return "", fmt.Errorf("module imports %s.%s, which kptr does not provide", mod, name)
		}
		if abi != "" && abi != this {
			return "", errors.New("module imports both the js and the wasip1 interfaces")
		}
		abi = this
	}
	if abi == "" {
		if _, ok := m.ExportedFunctions()["_start"]; ok {
			return ABIWASIP1, nil
		}
		return "", errors.New("module has neither Go's js imports nor a wasip1 _start")
	}
	return abi, nil
}

// errSwitch ends an interpreted run whose module's compiled code became
// ready: the run starts again, compiled.
var errSwitch = errors.New("switching to the compiled module")

func (r *Runner) run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	m, err := r.load(b)
	if err != nil {
		return runtime.Result{}, err
	}
	cm, compiled, err := r.ready(ctx, m)
	if err != nil {
		return runtime.Result{}, err
	}
	timeout := firstPositive(inv.Timeout, r.timeout, runtime.DefaultTimeout)
	limit := int64(r.memoryLimit/pageSize) * pageSize
	// One timeout covers the interpreted run and the compiled one that
	// may replace it.
	runCtx, cancelTimeout := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w after %s", runtime.ErrTimeout, timeout))
	defer cancelTimeout()
	// The input is read whole before the module starts, bounded by the
	// memory a module may have and by the run's context: a module blocked
	// in a host call reading stdin could not be closed by its context.
	input, err := readInput(runCtx, inv.Stdin, limit)
	if err != nil {
		if runCtx.Err() != nil && ctx.Err() == nil {
			return runtime.Result{}, context.Cause(runCtx)
		}
		return runtime.Result{}, err
	}
	if compiled == nil {
		return r.attempt(ctx, runCtx, cm, b, inv, input)
	}
	// Interpreted while the compiler works: when the compiled module is
	// ready first, the interpreted run is ended and the compiled one run
	// (a function is a function of its input: running it again is safe).
	// The interpreted run ends before the compiled one starts, so one
	// instance at a time holds the run's memory.
	iCtx, cancel := context.WithCancelCause(runCtx)
	defer cancel(nil)
	go func() {
		select {
		case res := <-compiled:
			if res.Err == nil {
				cancel(errSwitch)
			}
		case <-iCtx.Done():
		}
	}()
	res, err := r.attempt(ctx, iCtx, cm, b, inv, input)
	if !errors.Is(err, errSwitch) {
		return res, err
	}
	r.switches.Add(1)
	return r.attempt(ctx, runCtx, r.inMemory(m), b, inv, input)
}

// ready is what m runs as now: its compiled module when this process has
// it, the cache directory holds its compiled code or the Runner's Start
// says to compile first; otherwise, wazero's interpreter with the module
// (StartInterpreted), and by default with the compilation going on in the
// background, whose result compiled will carry.
func (r *Runner) ready(ctx context.Context, m wasmModule) (cm *compiledModule, compiled <-chan singleflight.Result, err error) {
	if cm := r.inMemory(m); cm != nil {
		return cm, nil, nil
	}
	switch {
	case r.start == StartCompiled || r.CompiledOnDisk(m.key):
		cm, err := r.compile(ctx, m)
		return cm, nil, err
	case r.start == StartInterpreted:
		cm, err := r.interpret(ctx, m)
		return cm, nil, err
	}
	// what the compiler would find is refused now, not when it is done
	if err := r.cacheReady(m); err != nil {
		return nil, nil, err
	}
	compiled = r.background(ctx, m)
	im, err := r.interpret(ctx, m)
	if err != nil {
		return nil, nil, err
	}
	select {
	case res := <-compiled:
		// compiled while the interpreter prepared it (or failed, and the
		// interpreter runs it)
		if res.Err == nil {
			return res.Val.(*compiledModule), nil, nil
		}
		return im, nil, nil
	default:
		return im, compiled, nil
	}
}

// attempt runs cm once with input under runCtx (which has the run's
// timeout); ctx is the caller's.
func (r *Runner) attempt(ctx, runCtx context.Context, cm *compiledModule, b bundle.Bundle, inv runtime.Invocation, input []byte) (runtime.Result, error) {
	maxOut := firstPositive(inv.MaxOutput, r.maxOutput, runtime.DefaultMaxOutput)
	limit := int64(r.memoryLimit/pageSize) * pageSize
	runCtx, cancel := context.WithCancelCause(runCtx)
	defer cancel(nil)
	alloc := &allocator{limit: uint64(limit)}
	runCtx = context.WithValue(experimental.WithMemoryAllocator(runCtx, alloc), allocatorKey{}, alloc)
	stdout := &cappedBuffer{name: "stdout", max: maxOut, overflow: cancel}
	stderr := &cappedBuffer{name: "stderr", max: maxOut, overflow: cancel}
	stdin := bytes.NewReader(input)

	// As for a container: the image's Cmd are the arguments, its Env and
	// then the invocation's the environment (kpt's images have neither).
	args := append([]string{"function"}, b.Config.Cmd...)
	env := mergeEnv(b.Config.Env, inv.Env)
	var res runtime.Result
	var err error
	switch cm.abi {
	case ABIJS:
		res, err = r.runJS(runCtx, cm, stdin, stdout, stderr, args, env, limit)
	default:
		res, err = r.runWASI(runCtx, cm, stdin, stdout, stderr, args, env)
	}
	res.Stderr = stderr.Bytes()
	if res.Stdout == nil {
		res.Stdout = stdout.Bytes()
	}
	// The cause that ended the run, most specific first.
	switch {
	case runCtx.Err() != nil && ctx.Err() == nil:
		return res, context.Cause(runCtx)
	case ctx.Err() != nil:
		return res, ctx.Err()
	case errors.Is(err, errInitialMemory):
		return res, fmt.Errorf("%w of %d MiB", err, r.memoryLimit>>20)
	case alloc.refused && (err != nil || res.ExitCode != 0):
		return res, fmt.Errorf("memory limit of %d MiB reached", r.memoryLimit>>20)
	case err != nil:
		if errors.Is(err, errHostMemory) {
			return res, fmt.Errorf("memory limit of %d MiB reached (js values)", r.memoryLimit>>20)
		}
		return res, err
	}
	return res, nil
}

func (r *Runner) runWASI(ctx context.Context, cm *compiledModule, stdin io.Reader, stdout, stderr io.Writer, args, env []string) (runtime.Result, error) {
	cfg := wazero.NewModuleConfig().WithName("").
		WithStdin(stdin).WithStdout(stdout).WithStderr(stderr).
		WithArgs(args...).
		WithSysNanotime().WithSysWalltime().
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
		}).
		WithRandSource(rand.Reader).
		WithStartFunctions("_start")
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			cfg = cfg.WithEnv(k, v)
		}
	}
	mod, err := instantiate(ctx, cm.rt, cm.mod, cfg)
	if mod != nil {
		defer mod.Close(context.Background())
	}
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		if ctx.Err() != nil {
			return runtime.Result{ExitCode: -1}, ctx.Err()
		}
		return runtime.Result{ExitCode: int(ee.ExitCode())}, nil
	}
	if err != nil {
		return runtime.Result{ExitCode: -1}, trapError(err)
	}
	return runtime.Result{}, nil
}

// errInitialMemory is a module whose memory at start is over the limit:
// the allocator refuses it while wazero instantiates, which wazero does not
// expect (it panics).
var errInitialMemory = errors.New("module needs more memory at start than the limit")

// instantiate is InstantiateModule, with a refused initial memory as an error.
func instantiate(ctx context.Context, rt wazero.Runtime, m wazero.CompiledModule, cfg wazero.ModuleConfig) (mod api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			if a, ok := ctx.Value(allocatorKey{}).(*allocator); ok && a.refused {
				mod, err = nil, errInitialMemory
				return
			}
			panic(r)
		}
	}()
	return rt.InstantiateModule(ctx, m, cfg)
}

type allocatorKey struct{}

// entrypoint is the global function of kpt's js contract, and the one that
// explains a failure.
const (
	entrypoint       = "processResourceList"
	entrypointErrors = "processResourceListErrors"
)

func (r *Runner) runJS(ctx context.Context, cm *compiledModule, stdin io.Reader, stdout, stderr *cappedBuffer, args, env []string, hostBudget int64) (runtime.Result, error) {
	// kpt passes the ResourceList to the entrypoint as a string
	input, err := io.ReadAll(stdin)
	if err != nil {
		return runtime.Result{}, fmt.Errorf("reading input: %w", err)
	}
	h := newJSHost(bytes.NewReader(input), stdout, stderr, &budget{limit: hostBudget})
	h.curCtx = context.WithValue(ctx, hostKey{}, h)
	mod, err := instantiate(h.curCtx, cm.rt, cm.mod, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return runtime.Result{ExitCode: -1}, trapError(err)
	}
	defer mod.Close(context.Background())
	if err := h.attach(mod); err != nil {
		return runtime.Result{}, err
	}
	err = h.call(func() error { return h.runMain(h.curCtx, args, env) })
	if err != nil {
		return runtime.Result{ExitCode: -1}, trapError(err)
	}
	if h.exited {
		return runtime.Result{ExitCode: int(h.exitCode)}, nil
	}
	fn, ok := h.global.props[entrypoint].(*jsObject)
	if !ok || fn.call == nil {
		// a program reading stdin: let its timers run until it exits
		if err := h.fireTimers(h.curCtx); err != nil {
			return runtime.Result{ExitCode: -1}, trapError(err)
		}
		if !h.exited {
			return runtime.Result{ExitCode: -1}, errors.New("module neither exited nor set " + entrypoint + ": it waits for an event that never comes")
		}
		return runtime.Result{ExitCode: int(h.exitCode)}, nil
	}
	var out any
	err = h.call(func() error { out = fn.call(undefined, []any{string(input)}); return nil })
	if err != nil {
		return runtime.Result{ExitCode: -1}, trapError(err)
	}
	if h.exited {
		return runtime.Result{ExitCode: int(h.exitCode)}, nil
	}
	s, _ := out.(string)
	if !looksLikeResourceList(s) {
		// kpt's contract: the output is not a ResourceList, the second
		// function explains why; the run failed as a function fails.
		msg := s
		if e, ok := h.global.props[entrypointErrors].(*jsObject); ok && e.call != nil {
			var why any
			if err := h.call(func() error { why = e.call(undefined, nil); return nil }); err == nil {
				if w, ok := why.(string); ok && w != "" {
					msg = w
				}
			}
		}
		if msg == "" {
			msg = entrypoint + " returned " + toString(out) + ", not a ResourceList"
		}
		if _, err := stderr.Write([]byte(strings.TrimRight(msg, "\n") + "\n")); err != nil {
			return runtime.Result{ExitCode: -1}, err
		}
		return runtime.Result{ExitCode: 1, Stdout: []byte{}}, nil
	}
	if int64(len(s)) > stdout.max {
		return runtime.Result{ExitCode: -1}, fmt.Errorf("%w: more than %d bytes on stdout", runtime.ErrOutputLimit, stdout.max)
	}
	// What the module printed to stdout is diagnostics under this contract.
	if stdout.Len() > 0 {
		if _, err := stderr.Write(stdout.Bytes()); err != nil {
			return runtime.Result{ExitCode: -1}, err
		}
	}
	return runtime.Result{Stdout: []byte(s)}, nil
}

// readInput reads r whole, at most limit bytes, giving up when ctx ends
// (the reading goroutine then ends with r).
func readInput(ctx context.Context, r io.Reader, limit int64) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, limit+1))
		done <- read{b, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case got := <-done:
		if got.err != nil {
			return nil, fmt.Errorf("reading input: %w", got.err)
		}
		if int64(len(got.b)) > limit {
			return nil, fmt.Errorf("input is larger than the memory limit of %d MiB", limit>>20)
		}
		return got.b, nil
	}
}

// call runs f, which calls into the module, turning what host functions
// raise (a panic that wazero hands back as the call's error, or one raised
// by a host-side function value outside any call) into an error; the
// module's own exit is not an error.
func (h *jsHost) call(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch x := r.(type) {
			case error:
				err = x
			case *jsThrow:
				err = errors.New("uncaught exception: " + toString(x.value))
			default:
				err = fmt.Errorf("%v", x)
			}
		}
		err = h.exitErr(err)
	}()
	return f()
}

// looksLikeResourceList is kpt's test of the entrypoint's result: YAML whose
// kind is ResourceList (the pipeline parses it fully later).
func looksLikeResourceList(s string) bool {
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "kind: ResourceList" && !strings.HasPrefix(line, " ") {
			return true
		}
	}
	return false
}

// trapError is a run that ended in a fault of the module: wazero's first line.
func trapError(err error) error {
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("module closed (exit code %d)", ee.ExitCode())
	}
	for _, known := range []error{errInitialMemory, errHostMemory, errValueLimit, runtime.ErrOutputLimit, errMemory} {
		if errors.Is(err, known) {
			return err
		}
	}
	return fmt.Errorf("wasm trap: %s", firstLine(err.Error()))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func firstPositive[T int64 | time.Duration](vs ...T) T {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}

// cappedBuffer collects one output stream up to max bytes; one byte more
// ends the run (overflow cancels its context) with ErrOutputLimit.
type cappedBuffer struct {
	bytes.Buffer
	name     string
	max      int64
	overflow context.CancelCauseFunc
	mu       sync.Mutex
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - int64(c.Len()); int64(len(p)) > room {
		// keep what fits, as the other tiers do, then end the run
		n, _ := c.Buffer.Write(p[:max(room, 0)])
		err := fmt.Errorf("%w: more than %d bytes on %s", runtime.ErrOutputLimit, c.max, c.name)
		c.overflow(err)
		return n, err
	}
	return c.Buffer.Write(p)
}

// mergeEnv is base with each KEY=VAL of over replacing base's KEY.
func mergeEnv(base, over []string) []string {
	out := make([]string, 0, len(base)+len(over))
	idx := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// allocator backs a module's linear memory and refuses to grow it past
// limit: memory.grow then fails inside the module (Go's runtime reports
// "out of memory" and exits), and refused says the limit was the cause.
type allocator struct {
	limit   uint64
	refused bool
}

func (a *allocator) Allocate(capacity, max uint64) experimental.LinearMemory {
	return &linearMemory{a: a}
}

type linearMemory struct {
	a   *allocator
	buf []byte
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.a.limit {
		m.a.refused = true
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	newCap := uint64(cap(m.buf)) * 2
	if newCap < size {
		newCap = size
	}
	if newCap > m.a.limit {
		newCap = m.a.limit
	}
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return m.buf
}

func (m *linearMemory) Free() { m.buf = nil }
