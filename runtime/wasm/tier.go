package wasm

import (
	"context"
	"errors"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

func init() { runtime.Register(tier{}) }

// Name is the tier's name (--sandbox=wasm runs wasm images only).
const Name = runtime.Wasm

// tier is the wasm tier as runtime.Tier. Auto never picks it: it runs wasm
// function images only, so kptr opens it for those beside whichever tier
// runs container images (or none), and --sandbox=wasm names it.
type tier struct{}

func (tier) Info() runtime.TierInfo {
	return runtime.TierInfo{
		Name:    Name,
		Summary: "wasm modules in kptr's own process under wazero: no kernel isolation needed, so any pod, for js/wasm and wasip1/wasm images with --allow-alpha-wasm",
		Caveat:  "runs wasm function images only",
	}
}

// Probe runs a trivial module: the tier needs nothing of the environment
// but memory the compiler can make executable.
func (tier) Probe(string, bool) []runtime.ProbeResult {
	engine, err := Probe(context.Background())
	if err != nil {
		return []runtime.ProbeResult{{Name: "wazero", Status: runtime.StatusFailed, Detail: err.Error(),
			Fix: "kptr's process must be allowed executable memory (the wazero compiler)"}}
	}
	return []runtime.ProbeResult{{Name: "wazero", Status: runtime.StatusOK, Detail: "modules run in-process (" + engine + ")"}}
}

// Open returns the wasm Sandbox: the Settings' timeout and output cap, its
// memory limit (Limits.Memory, at most wasm32's 4 GiB) as the modules'
// memory cap; runtime.WithCompileCache adds the compilation cache.
func (t tier) Open(opts ...runtime.Option) (runtime.Sandbox, error) {
	s := runtime.NewSettings(opts...)
	mem := s.Limits.Memory
	if mem <= 0 || mem > 4<<30 {
		mem = 4 << 30
	}
	sb := &Sandbox{Runner: New(WithTimeout(s.Timeout), WithMaxOutput(s.MaxOutput), WithMemoryLimit(mem))}
	sb.Runner.cacheDir = s.CompileCache
	sb.Runner.notice = s.CompileNotice
	s.ApplyTier(sb)
	probes := t.Probe("", false)
	if err := runtime.Required(probes); err != nil {
		return nil, err
	}
	sb.probes = probes
	return sb, nil
}

// PruneCompiled prunes the compiled code in dir (runtime.CompiledPruner):
// that of modules no bundle of keep holds, and by o.
func (tier) PruneCompiled(dir string, keep []bundle.Bundle, o runtime.PruneOptions) (runtime.PruneReport, error) {
	sums := map[string]bool{}
	for _, b := range keep {
		if sum, err := ModuleSum(b); err == nil {
			sums[sum] = true
		}
	}
	return PruneCompiled(dir, sums, o)
}

// Sandbox is the wasm tier opened: a Runner that also prepares (compiles
// ahead) and runs exec functions through runtime.Host, as every tier does.
type Sandbox struct {
	*Runner
	probes []runtime.ProbeResult
}

var errNotWasm = errors.New("the wasm tier runs only wasm function images (js/wasm, wasip1/wasm)")

// Run runs a wasm bundle; an exec function (no rootfs, no module) through
// runtime.Host; refuses a container image.
func (s *Sandbox) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	switch {
	case b.Wasm != "":
		return s.Runner.Run(ctx, b, inv)
	case b.Rootfs == "":
		return runtime.Host{Timeout: s.timeout, MaxOutput: s.maxOutput}.Run(ctx, b, inv)
	}
	return runtime.Result{}, &runtime.RunError{Image: b.Ref, Err: errNotWasm}
}

// Prepare starts compiling b's module ahead of its run (in the background:
// a compilation the run then shares, or finds done; Close waits for it).
func (s *Sandbox) Prepare(ctx context.Context, b bundle.Bundle, _ runtime.Invocation) {
	if b.Wasm == "" {
		return
	}
	// reading and hashing the module is off the caller's path too; Close
	// waits for it (it counts as a compilation under way)
	s.compiling.Add(1)
	go func() {
		defer s.compiling.Done()
		if m, err := s.load(b); err == nil && s.inMemory(m) == nil {
			s.background(ctx, m)
		}
	}()
}

// Precompile compiles b's module into the compile cache
// (runtime.Compiler).
func (s *Sandbox) Precompile(ctx context.Context, b bundle.Bundle) error {
	_, err := s.Compile(ctx, b)
	return err
}

// Probes are the results the sandbox was opened on.
func (s *Sandbox) Probes() []runtime.ProbeResult { return s.probes }

// Close releases the compiled modules.
func (s *Sandbox) Close() error { return s.Runner.Close() }

var (
	_ runtime.Sandbox        = (*Sandbox)(nil)
	_ runtime.Compiler       = (*Sandbox)(nil)
	_ runtime.CompiledPruner = tier{}
)
