package fnenv

import (
	"context"
	"sync"
	"time"

	"github.com/kptr-dev/kptr/bundle"
)

// Fetching a render's images ahead (pipeline.Fetcher). fn render asks, once
// the root Kptfile is read, for every image of its pipeline; the chain starts
// pulling them at once, at most FetchAheadJobs at a time, through the same
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
// Only with Config.FetchAhead: generate's pulls are background fetches of
// their own (background.go).

// FetchAheadJobs is how many images are fetched ahead at once (kptr
// prewarm's default --jobs).
const FetchAheadJobs = 4

// aheadFetch is one image fetched ahead: done is closed once b and err are set.
type aheadFetch struct {
	ref  string
	ctx  context.Context // the render's: ended, the fetch is no outcome
	done chan struct{}
	b    bundle.Bundle
	err  error
}

// fetchAhead is the chain's state of the fetches ahead. They start in the
// order they were asked for (the pipeline's), FetchAheadJobs at a time, so
// the first function's image is never queued behind a later one's; a fetch
// whose render has ended by its turn in the queue is not started (issue
// 30: a render that stopped at its first function went on pulling the
// later images, which kpt never pulls), and one under way ends with the
// render (its context).
type fetchAhead struct {
	mu      sync.Mutex
	fetches map[string]*aheadFetch // by reference; removed by the turn that takes it
	asked   map[string]bool        // each reference is fetched ahead once
	queue   []*aheadFetch          // asked for, not started
	workers int                    // goroutines taking from queue
}

// Fetch queues ref for pulling in the background (pipeline.Fetcher) and
// returns at once: the cache and the sandbox open (init) in the background
// too, as for a preparation ahead, so a warm render's start does not wait
// for them here. When they cannot be opened nothing is pulled: the turn's
// initTurn reports that, as without a fetch ahead. Without
// Config.FetchAhead, and for an image the allow-list refuses, it does
// nothing: the turn resolves (and refuses) it.
func (e *Env) Fetch(ctx context.Context, ref string) {
	if !e.cfg.FetchAhead || e.cfg.Policy.CheckImage(ref) != nil {
		return
	}
	fa := &e.ahead
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if fa.asked[ref] {
		return
	}
	if fa.asked == nil {
		fa.asked, fa.fetches = map[string]bool{}, map[string]*aheadFetch{}
	}
	f := &aheadFetch{ref: ref, ctx: ctx, done: make(chan struct{})}
	fa.asked[ref], fa.fetches[ref] = true, f
	fa.queue = append(fa.queue, f)
	if fa.workers < FetchAheadJobs {
		fa.workers++
		go e.fetchWorker()
	}
}

// fetchWorker fetches queued images, oldest first, until the queue is empty.
func (e *Env) fetchWorker() {
	fa := &e.ahead
	for {
		fa.mu.Lock()
		if len(fa.queue) == 0 {
			fa.workers--
			fa.mu.Unlock()
			return
		}
		f := fa.queue[0]
		fa.queue[0] = nil
		fa.queue = fa.queue[1:]
		fa.mu.Unlock()
		f.err = f.ctx.Err() // the render ended before its turn: never started
		if f.err == nil {
			f.err = e.init()
		}
		if f.err == nil {
			f.b, f.err = e.c.Resolve(f.ctx, f.ref)
		}
		close(f.done)
	}
}

// takeAhead is the cache's Resolve for a function's turn: the outcome of the
// image's fetch ahead when one was started (waiting for it), else a pull now.
// A fetch cut short because its render ended (its context) is not an
// outcome while this turn's context is live: the turn pulls itself. A turn
// whose own context ends while it waits resolves as it would have (the
// cache's Resolve on an ended context).
func (e *Env) takeAhead(ctx context.Context, ref string) (bundle.Bundle, error) {
	fa := &e.ahead
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
	return e.c.Resolve(ctx, ref)
}
