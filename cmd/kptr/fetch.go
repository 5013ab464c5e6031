package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/pipeline"
)

// Pulls that outlive `kptr generate`. Argo CD ends a generate at its deadline
// (60 s by default; SIGTERM to kptr's process group, SIGKILL 5 s later). On a
// cold cache a large image may not be down by then, and a pull that dies with
// the generate starts over on every retry and never finishes. So generate
// starts, for each image its cache does not hold, a detached fetch: kptr
// itself as `kptr cache fetch IMAGE`, in its own session (outside the process
// group Argo CD kills), holding a per-image lock so that at most one fetch of
// an image runs however many renders ask, and bounded by fetchLimit. The
// render waits for the fetch and then resolves the image from the cache, so
// every blob is downloaded once. When the render is cut short while the
// fetch runs, its error says the image is being fetched and to retry; Argo
// CD's retry finds the image cached, or waits for the same fetch again.

// fetchLimit bounds one detached fetch (all its downloads together).
const fetchLimit = 15 * time.Minute

func init() {
	register(&command{name: "cache fetch", summary: "pull images as a detached, bounded background job (what generate starts for a cold cache)", run: runCacheFetch})
}

// runCacheFetch pulls each IMAGE into the cache within fetchLimit. It prints
// nothing on success; failures go to stderr (the detached child's stderr is
// the log file fetchLog names).
func runCacheFetch(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("cache fetch", "IMAGE...")
	if err := g.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError("cache fetch: name at least one image")
	}
	ctx, cancel := context.WithTimeout(ctx, fetchLimit)
	defer cancel()
	c, err := g.openCacheWith(slog.LevelInfo)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, ref := range fs.Args() {
		if _, err := c.Resolve(ctx, ref); err != nil {
			return fmt.Errorf("%w (background fetch, limit %s)", err, fetchLimit)
		}
	}
	return nil
}

// fetchingResolver starts a detached fetch for every image next does not
// hold yet, waits for it, then resolves through next. Its guarantees: an
// image that is cached starts nothing; at most one fetch per image and cache
// runs at a time (fetchFiles' lock), and renders waiting for it download
// nothing themselves; a Resolve cut short (deadline or termination) while the
// image's fetch runs says so in its error, and the fetch goes on.
type fetchingResolver struct {
	next    pipeline.Resolver
	g       *globals
	offline func() (*cache.Cache, error) // the same cache, opened offline: "is it cached?"
	self    string                       // kptr's executable

	mu       sync.Mutex
	fetching map[string]bool
}

func newFetchingResolver(next pipeline.Resolver, g *globals) *fetchingResolver {
	r := &fetchingResolver{next: next, g: g, fetching: map[string]bool{}}
	// The child is this executable with "cache fetch": only when it is kptr.
	// A test binary calling generate in-process would run its own tests
	// again instead, each of them starting more.
	if !testing.Testing() {
		r.self, _ = os.Executable()
	}
	r.offline = sync.OnceValues(func() (*cache.Cache, error) {
		return g.openCacheWith(slog.LevelDebug, cache.WithOffline(true))
	})
	return r
}

// Close releases the offline cache handle.
func (r *fetchingResolver) Close() {
	if c, err := r.offline(); err == nil {
		c.Close()
	}
}

func (r *fetchingResolver) Resolve(ctx context.Context, ref string) (cache.Bundle, error) {
	if r.cached(ctx, ref) {
		return r.next.Resolve(ctx, ref)
	}
	// Leave the download to the detached fetch (ours or another render's)
	// and wait for it to end; then resolve through next, which finds the
	// image cached or, if the fetch failed, pulls and reports why itself.
	if r.startFetch(ref) || r.fetchRunning(ref) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for r.fetchRunning(ref) {
			select {
			case <-ctx.Done():
				return cache.Bundle{}, fmt.Errorf("image %s is still being fetched in the background (the download goes on after this render ends); retry in a minute (Argo CD retries by itself, or Refresh the Application): %w", ref, context.Cause(ctx))
			case <-tick.C:
			}
		}
	}
	return r.next.Resolve(ctx, ref)
}

// ResolveConstraint passes Kptfile `tag:` constraints to next.
func (r *fetchingResolver) ResolveConstraint(ctx context.Context, repo, constraint string) (string, error) {
	cr, ok := r.next.(pipeline.ConstraintResolver)
	if !ok {
		return "", errors.New("the image cache cannot resolve tag constraints")
	}
	return cr.ResolveConstraint(ctx, repo, constraint)
}

// cached reports whether the cache holds ref (resolving offline, no pull).
func (r *fetchingResolver) cached(ctx context.Context, ref string) bool {
	c, err := r.offline()
	if err != nil {
		return false
	}
	_, err = c.Resolve(ctx, ref)
	return err == nil
}

// fetchFiles are the lock a fetch of ref holds while it runs and the log its
// stderr goes to (the sidecar's log does not see it: it is no longer Argo
// CD's child), in the cache's locks directory.
func fetchFiles(cacheDir, ref string) (lock, log string) {
	sum := sha256.Sum256([]byte(ref))
	base := filepath.Join(cacheDir, "locks", "fetch-"+hex.EncodeToString(sum[:8]))
	return base + ".lock", base + ".log"
}

// startFetch starts the detached fetch of ref unless one runs already. It
// takes the image's lock itself and hands it to the child (an inherited
// descriptor of the same open file keeps the flock), so no second fetch can
// start between the check and the child's start.
func (r *fetchingResolver) startFetch(ref string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fetching[ref] || r.self == "" {
		return false
	}
	c, err := r.offline()
	if err != nil {
		return false
	}
	lockPath, logPath := fetchFiles(c.Dir(), ref)
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // a fetch of ref is running
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return false
	}
	defer logf.Close()
	cmd := exec.Command(r.self, "cache", "fetch", "--cache-dir", c.Dir(), ref)
	cmd.Dir = "/" // Argo CD deletes the render's work directory
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false
	}
	go cmd.Wait() // reaped if we are still there when it ends; orphaned (init reaps it) otherwise
	r.fetching[ref] = true
	return true
}

// fetchRunning reports whether some process holds ref's fetch lock.
func (r *fetchingResolver) fetchRunning(ref string) bool {
	c, err := r.offline()
	if err != nil {
		return false
	}
	lockPath, _ := fetchFiles(c.Dir(), ref)
	lock, err := os.Open(lockPath)
	if err != nil {
		return false
	}
	defer lock.Close()
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil {
		return true
	}
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	return false
}
