package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/pipeline"
	"github.com/kptr-dev/kptr/runtime"
)

// Preparing the next function's sandbox while the current one runs
// (pipeline.CachedResolver + runtime.Preparer, see pipeline's prepareNext):
// the runner and resolver wrappers of kptr's commands pass it through,
// applying the same policy as their Run and Resolve, so nothing is ever
// prepared that the function's own turn would refuse.

// offlineViews holds, per lazyEnv, a second view of the same cache that never
// touches the network and reports no progress: ResolveCached must not pull.
var offlineViews sync.Map // *lazyEnv → *offlineView

type offlineView struct {
	once sync.Once
	c    *cache.Cache
}

// ResolveCached resolves ref only if the cache already holds it.
//
// It reads the cache through its own view, so the command's cache and
// sandbox are opened (init, which the Prepare that follows waits for) at
// the same time as it looks: the first sandbox is then set up as early as
// its image is known.
func (l *lazyEnv) ResolveCached(ctx context.Context, ref string) (bundle.Bundle, bool) {
	go func() { _ = l.init() }()
	v, _ := offlineViews.LoadOrStore(l, &offlineView{})
	ov := v.(*offlineView)
	ov.once.Do(func() {
		ov.c, _ = l.g.openCacheWith(slog.LevelDebug, cache.WithOffline(true), cache.WithProgress(nil))
	})
	if ov.c == nil {
		return bundle.Bundle{}, false
	}
	b, err := ov.c.Resolve(ctx, ref)
	return b, err == nil
}

// Prepare forwards to the runner image runs go through (the memo's, which
// prepares only once a run was not replayed, or the sandbox).
func (l *lazyEnv) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	if l.init() != nil {
		return
	}
	if p, ok := l.r.(runtime.Preparer); ok {
		p.Prepare(ctx, b, inv)
	}
}

// ResolveCached applies the allow-list as Resolve does.
func (r *allowListResolver) ResolveCached(ctx context.Context, ref string) (bundle.Bundle, bool) {
	if r.check(ref) != nil {
		return bundle.Bundle{}, false
	}
	if cr, ok := r.next.(pipeline.CachedResolver); ok {
		return cr.ResolveCached(ctx, ref)
	}
	return bundle.Bundle{}, false
}

// ResolveCached records nothing: it never fails, the turn's Resolve reports.
func (r *causeResolver) ResolveCached(ctx context.Context, ref string) (bundle.Bundle, bool) {
	return r.next.ResolveCached(ctx, ref)
}

// Prepare prepares only what Run would allow.
func (r *policyRunner) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	if r.check(b, inv) != nil {
		return
	}
	if p, ok := r.next.(runtime.Preparer); ok {
		p.Prepare(ctx, b, inv)
	}
}

// Prepare forwards.
func (r *causeRunner) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	if p, ok := r.next.(runtime.Preparer); ok {
		p.Prepare(ctx, b, inv)
	}
}

var (
	_ pipeline.CachedResolver = (*lazyEnv)(nil)
	_ pipeline.CachedResolver = (*causeResolver)(nil)
	_ runtime.Preparer        = (*lazyEnv)(nil)
	_ runtime.Preparer        = (*causeRunner)(nil)
	_ runtime.Preparer        = (*lazySandbox)(nil)
)
