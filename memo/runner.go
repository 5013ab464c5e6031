package memo

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// Runner is a runtime.Runner that replays recorded successes of eligible
// runs (see the package doc) and records new ones; every other run goes to
// Next unchanged. A replayed Result has Reused set, the recorded Stdout,
// Stderr and exit code 0, and the time the lookup took as its Duration.
type Runner struct {
	Next  runtime.Runner
	Store *Store
	// Variant names what decides a run's outcome beyond the bundle and
	// the invocation: the sandbox tier and its options, as the caller
	// configured them. Runs under another variant never share records.
	Variant string

	mu sync.Mutex
	// missed is set by the first run that was not replayed (Prepare).
	missed bool
	// pending is a Prepare held back until a run misses.
	pending func()
}

// Run replays a record of the same run or runs b through Next (recording
// a success). Stdin is read in full before either.
func (r *Runner) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	if r.Store == nil || !Eligible(b, inv) {
		r.miss()
		return r.Next.Run(ctx, b, inv)
	}
	t0 := time.Now()
	var stdin []byte
	if inv.Stdin != nil {
		var err error
		if stdin, err = io.ReadAll(inv.Stdin); err != nil {
			return runtime.Result{}, err
		}
	}
	k := KeyOf(b, inv, r.Variant, stdin)
	if rec, ok := r.Store.Get(k); ok && rec.ExitCode == 0 && (inv.Timeout <= 0 || rec.Duration < inv.Timeout) {
		return runtime.Result{Stdout: rec.Stdout, Stderr: rec.Stderr, Duration: time.Since(t0), Reused: true}, nil
	}
	r.miss()
	inv.Stdin = bytes.NewReader(stdin)
	res, err := r.Next.Run(ctx, b, inv)
	if err == nil && res.ExitCode == 0 && ctx.Err() == nil {
		// best effort: a store that cannot be written only costs the next run
		_ = r.Store.Put(k, Record{Stdout: res.Stdout, Stderr: res.Stderr, Duration: res.Duration})
	}
	return res, err
}

// miss notes a run that is not replayed and releases a held-back Prepare
// (the next function's sandbox is then set up while this one runs, as
// without memoisation).
func (r *Runner) miss() {
	r.mu.Lock()
	r.missed = true
	p := r.pending
	r.pending = nil
	r.mu.Unlock()
	if p != nil {
		p()
	}
}

// Prepare forwards to Next (when it is a runtime.Preparer) once a run of
// this Runner was not replayed, or for an invocation that cannot be. Until
// then it holds the latest request back and forwards it when a run misses:
// while every run is replayed, a prepared sandbox would only cost its
// start-up (and the sandbox's probe) and be thrown away.
func (r *Runner) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	p, ok := r.Next.(runtime.Preparer)
	if !ok {
		return
	}
	r.mu.Lock()
	if r.Store != nil && Eligible(b, inv) && !r.missed {
		r.pending = func() { p.Prepare(ctx, b, inv) }
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	p.Prepare(ctx, b, inv)
}

var _ runtime.Preparer = (*Runner)(nil)
