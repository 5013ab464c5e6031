package fnenv

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// Pull resolves ref into the cache (pull, verify, unpack) ahead of any
// render, as a render's turn would (the allow-list, the signature policy,
// wasm images only when allowed), without opening a sandbox.
func (e *Env) Pull(ctx context.Context, ref string) (bundle.Bundle, error) {
	if err := e.cfg.Policy.CheckImage(ref); err != nil {
		return bundle.Bundle{}, err
	}
	c, err := e.Cache()
	if err != nil {
		return bundle.Bundle{}, err
	}
	return c.Resolve(ctx, ref)
}

// PullAll pulls refs with at most jobs in flight. Every failure is
// reported; the first one's exit code wins.
func (e *Env) PullAll(ctx context.Context, refs []string, jobs int) ([]bundle.Bundle, error) {
	bundles := make([]bundle.Bundle, len(refs))
	errs := make([]error, len(refs))
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			bundles[i], errs[i] = e.Pull(ctx, ref)
		}()
	}
	wg.Wait()
	var failed []error
	for i, err := range errs {
		if err != nil {
			if !strings.Contains(err.Error(), refs[i]) {
				err = fmt.Errorf("%s: %w", refs[i], err)
			}
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 {
		return bundles, nil
	}
	return bundles, &Error{ExitCode(failed[0]), fmt.Errorf("%d of %d image(s) failed: %w", len(failed), len(refs), errors.Join(failed...))}
}

// Compile compiles the modules of the wasm bundles among bundles (refs
// name them) into the cache directory's wasm/, as a render's run would
// find them: one compilation per core at a time, since each module
// compiles on one (wazero's compiler); a module already compiled is only
// checked. Every module is tried; the error names each that failed.
func (e *Env) Compile(ctx context.Context, refs []string, bundles []bundle.Bundle) error {
	cp, ok := e.wasmRunner().(runtime.Compiler)
	if !ok {
		// the tier did not open: its error, once, for the first module
		for i, b := range bundles {
			if b.Wasm != "" {
				if _, err := e.wasmRunner().Run(ctx, b, runtime.Invocation{}); err != nil {
					return fmt.Errorf("%s: %w", refs[i], err)
				}
				return nil
			}
		}
		return nil
	}
	errs := make([]error, len(bundles))
	sem := make(chan struct{}, goruntime.NumCPU())
	var wg sync.WaitGroup
	for i, b := range bundles {
		if b.Wasm == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := cp.Precompile(ctx, b); err != nil {
				errs[i] = fmt.Errorf("%s: %w", refs[i], err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
