package main

import (
	"context"
	"sync"
	"time"

	"github.com/kptr-dev/kptr/bundle"
)

// Fetching a render's images ahead (pipeline.Fetcher). fn render asks, once
// the root Kptfile is read, for every image of its pipeline; lazyEnv starts
// pulling them at once, at most fetchAheadJobs at a time, through the same
// cache and settings as a function's turn (mirrors, pull policy, offline,
// signature policy, progress display), so a cold cache downloads the
// pipeline's images together and while the first functions run, instead of
// one at each function's turn (issue 26: 2.1 s against 1.0 s for the same
// four images pulled at once). The turn's Resolve then takes the fetch's
// outcome as its own: the bundle, or the error the pull met, reported and
// classified (exit code) at that turn exactly as before. The bundle's
// Pulled (the transcript's "Pulled in" line, which the function's own time
// leaves out) is what the turn waited for the pull: 0, and no line, when
// the image came down while earlier functions ran. Only the first turn of an
// image takes its fetch; a later one resolves from the cache as it did.
// generate's resolvers do not pass this on (its pulls are background
// fetches of their own, fetch.go).

// fetchAheadJobs is how many images are fetched ahead at once (kptr
// prewarm's default --jobs).
const fetchAheadJobs = 4

// aheadFetch is one image fetched ahead: done is closed once b and err are set.
type aheadFetch struct {
	ctx  context.Context // the render's: ended, the fetch is no outcome
	done chan struct{}
	b    bundle.Bundle
	err  error
}

// fetchAhead is lazyEnv's state of the fetches ahead.
type fetchAhead struct {
	mu      sync.Mutex
	fetches map[string]*aheadFetch // by reference; removed by the turn that takes it
	asked   map[string]bool        // each reference is fetched ahead once
	jobs    chan struct{}
}

// Fetch starts pulling ref in the background (pipeline.Fetcher) and
// returns at once: the cache and the sandbox open (init) in the background
// too, as for a preparation ahead, so a warm render's start does not wait
// for them here. When they cannot be opened nothing is pulled: the turn's
// initTurn reports that, as without a fetch ahead.
func (l *lazyEnv) Fetch(ctx context.Context, ref string) {
	fa := &l.ahead
	fa.mu.Lock()
	if fa.asked[ref] {
		fa.mu.Unlock()
		return
	}
	if fa.asked == nil {
		fa.asked, fa.fetches = map[string]bool{}, map[string]*aheadFetch{}
		fa.jobs = make(chan struct{}, fetchAheadJobs)
	}
	f := &aheadFetch{ctx: ctx, done: make(chan struct{})}
	fa.asked[ref], fa.fetches[ref] = true, f
	fa.mu.Unlock()
	go func() {
		defer close(f.done)
		if f.err = l.init(); f.err != nil {
			return
		}
		select {
		case fa.jobs <- struct{}{}:
			defer func() { <-fa.jobs }()
		case <-ctx.Done():
			f.err = ctx.Err()
			return
		}
		f.b, f.err = l.c.Resolve(ctx, ref)
	}()
}

// resolve is the cache's Resolve for a function's turn: the outcome of the
// image's fetch ahead when one was started (waiting for it), else a pull now.
// A fetch cut short because its render ended (its context) is not an
// outcome while this turn's context is live: the turn pulls itself. A turn
// whose own context ends while it waits resolves as it would have (the
// cache's Resolve on an ended context).
func (l *lazyEnv) resolve(ctx context.Context, ref string) (bundle.Bundle, error) {
	fa := &l.ahead
	fa.mu.Lock()
	f := fa.fetches[ref]
	delete(fa.fetches, ref)
	fa.mu.Unlock()
	if f != nil {
		start := time.Now()
		select {
		case <-f.done:
			if f.ctx.Err() == nil || ctx.Err() != nil {
				b := f.b
				if b.Pulled > 0 {
					// what this turn spent on the pull: its wait (the
					// transcript's pull line, left out of the function's time)
					b.Pulled = time.Since(start)
				}
				return b, f.err
			}
		case <-ctx.Done():
		}
	}
	return l.c.Resolve(ctx, ref)
}
