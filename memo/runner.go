package memo

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/kptr-dev/kptr/cache"
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

	// missed is set by the first run that was not a hit (Prepare).
	missed atomic.Bool
}

// Run replays a record of the same run or runs b through Next (recording
// a success). Stdin is read in full before either.
func (r *Runner) Run(ctx context.Context, b cache.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	if r.Store == nil || !Eligible(b, inv) {
		r.missed.Store(true)
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
	r.missed.Store(true)
	inv.Stdin = bytes.NewReader(stdin)
	res, err := r.Next.Run(ctx, b, inv)
	if err == nil && res.ExitCode == 0 && ctx.Err() == nil {
		// best effort: a store that cannot be written only costs the next run
		_ = r.Store.Put(k, Record{Stdout: res.Stdout, Stderr: res.Stderr, Duration: res.Duration})
	}
	return res, err
}

// Prepare forwards to Next (when it is a runtime.Preparer) once a run of
// this Runner was not a hit, or for an invocation that cannot be one:
// while every run is replayed, a prepared sandbox would only cost its
// start-up and be thrown away.
func (r *Runner) Prepare(ctx context.Context, b cache.Bundle, inv runtime.Invocation) {
	if r.Store != nil && Eligible(b, inv) && !r.missed.Load() {
		return
	}
	if p, ok := r.Next.(runtime.Preparer); ok {
		p.Prepare(ctx, b, inv)
	}
}

var _ runtime.Preparer = (*Runner)(nil)
