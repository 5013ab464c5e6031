package fnenv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
)

// Background makes each pull a fetch of its own that outlives the command
// (generate: Argo CD kills a generate at its deadline, and a pull that
// died with it would start again on every retry). Start starts the fetch
// of ref into the cache at cacheDir (a process holding the image's fetch
// lock, cache.BackgroundFetch) unless one runs; the chain waits for it.
// The guarantees: an image cached unpacked starts nothing; at most one
// fetch per image and cache runs at a time; a Resolve cut short while the
// fetch runs says so (with the fetch's progress) and leaves it running.
type Background struct {
	Start   func(bf *cache.BackgroundFetch, cacheDir, ref string) error
	Timeout time.Duration // of each fetch, for the message
}

// resolveInBackground resolves ref through a background fetch: offline,
// pull policy Never, an image cached unpacked, or a fetch that cannot
// start resolve at the turn as without one.
func (e *Env) resolveInBackground(ctx context.Context, ref string) (bundle.Bundle, error) {
	if e.cfg.Background.Start == nil || e.cfg.Offline || e.init() != nil || e.c.Unpacked(ref) {
		return e.resolveTurn(ctx, ref) // no download (or the turn's own error)
	}
	if p, err := cache.ParsePullPolicy(e.cfg.PullPolicy); err == nil && p == cache.PullNever {
		return e.resolveTurn(ctx, ref)
	}
	bf := e.c.BackgroundFetch(ref)
	since := time.Now()
	if err := e.cfg.Background.Start(bf, e.c.Dir(), ref); err != nil {
		e.cfg.Log.Debug("background fetch not started; pulling in the render", "image", ref, "error", err)
		return e.resolveTurn(ctx, ref)
	}
	if err := e.waitFetch(ctx, bf, ref, since); err != nil {
		return bundle.Bundle{}, err
	}
	// Cached now, or the fetch ended without saying why (killed): the
	// cache pulls what is missing, resuming the fetch's partial files.
	return e.resolveTurn(ctx, ref)
}

// waitFetch waits for the fetch of ref to end. It returns nil when the
// image is cached or the fetch ended without recording a failure, the
// fetch's error when it failed (recorded after since), and, when ctx ends
// first, the error that says the image is still being fetched.
func (e *Env) waitFetch(ctx context.Context, bf *cache.BackgroundFetch, ref string, since time.Time) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for bf.Running() {
		select {
		case <-ctx.Done():
			progress := ""
			if st, ok := bf.Status(); ok && st.Progress() != "" {
				progress = " (" + st.Progress() + " so far)"
			}
			return &Error{ExitEnv, fmt.Errorf("image %s is still being fetched in the background%s; the download goes on after this render (for up to %s): retry in a moment (Argo CD retries by itself; Hard Refresh to retry now): %w",
				ref, progress, e.cfg.Background.Timeout, context.Cause(ctx))}
		case <-tick.C:
		}
	}
	if e.c.Unpacked(ref) {
		return nil
	}
	if st, ok := bf.Status(); ok && st.State == cache.FetchFailed && !st.Updated.Before(since) {
		code := st.Code
		if code == 0 {
			code = ExitEnv
		}
		return &Error{code, errors.New(st.Error)}
	}
	return nil
}
