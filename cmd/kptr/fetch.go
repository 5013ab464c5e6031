package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
)

// Pulls that outlive `kptr generate`. Argo CD's argocd-cmp-server ends a
// generate at the request's deadline (60 s by default, less 100 ms): its
// exec.CommandContext sends kptr SIGKILL and, at the same moment, SIGTERM to
// kptr's process group. On a cold cache a large image may not be down by
// then; a pull that dies with the render starts again on every retry. So
// generate never pulls an image itself: for an image the cache does not hold
// unpacked, it starts a background fetch, `kptr cache fetch IMAGE`, and waits
// for it. The fetch runs in its own session (the group Argo CD kills is not
// its group), with no stdio (argocd-cmp-server waits for the plugin's output
// pipes to close), and holds the image's fetch lock (cache.BackgroundFetch)
// for its whole life, so one fetch per image runs however many renders wait
// for it, each blob is downloaded once (blob locks), and a render that
// arrives later waits for the same fetch. The fetch always ends: its own
// time limit (KPTR_FETCH_TIMEOUT, default 10 minutes; a timer ends the
// process 10 s after it whatever it is doing), on top of the registry's
// idle timeout and the size limits of every download. What it downloaded
// stays as partial files, resumed by the next fetch.
//
// A render whose time is up (KPTR_TIMEOUT, which the deploy/ component sets
// below Argo CD's deadline, or SIGTERM) while the fetch runs fails with
// "IMAGE is still being fetched in the background (N MiB of M MiB) … retry":
// Argo CD's retry, or a refresh, finds the image cached, or waits again.
//
// Only generate detaches: render, eval and cache pull run in a terminal or
// CI job that no deadline kills, and show the pull's progress themselves.

// defaultFetchTimeout bounds a background fetch (KPTR_FETCH_TIMEOUT).
const defaultFetchTimeout = 10 * time.Minute

// fetchGrace is how long a background fetch may take to end after its time
// limit before its timer ends the process.
const fetchGrace = 10 * time.Second

// fetchingResolver resolves images for generate, pulling through background
// fetches (see above). Its guarantees: an image cached unpacked starts
// nothing; at most one fetch per image and cache runs at a time; a Resolve
// cut short while the fetch runs says so (with the fetch's progress) and
// leaves the fetch running.
type fetchingResolver struct {
	env     *lazyEnv
	timeout time.Duration // of each fetch
	// detach is false in tests that run kptr in-process: the background
	// fetch is this executable, and a test binary would run its tests.
	detach bool
}

func newFetchingResolver(env *lazyEnv, timeout time.Duration) *fetchingResolver {
	return &fetchingResolver{env: env, timeout: timeout, detach: !testing.Testing()}
}

func (r *fetchingResolver) Resolve(ctx context.Context, ref string) (bundle.Bundle, error) {
	if !r.detach || r.env.g.offline || r.env.init() != nil || r.env.c.Unpacked(ref) {
		return r.env.Resolve(ctx, ref) // no download (or lazyEnv's own error)
	}
	if p, err := cache.ParsePullPolicy(r.env.g.pullPolicy); err == nil && p == cache.PullNever {
		return r.env.Resolve(ctx, ref)
	}
	bf := r.env.c.BackgroundFetch(ref)
	since := time.Now()
	if err := r.start(bf, ref); err != nil {
		r.env.g.logger().Debug("background fetch not started; pulling in the render", "image", ref, "error", err)
		return r.env.Resolve(ctx, ref)
	}
	if err := r.wait(ctx, bf, ref, since); err != nil {
		return bundle.Bundle{}, err
	}
	// Cached now, or the fetch ended without saying why (killed): the
	// cache pulls what is missing, resuming the fetch's partial files.
	return r.env.Resolve(ctx, ref)
}

// ResolveConstraint lists tags (Kptfile `tag:` constraints): one small
// request, made by the render itself.
func (r *fetchingResolver) ResolveConstraint(ctx context.Context, repo, constraint string) (string, error) {
	return r.env.ResolveConstraint(ctx, repo, constraint)
}

// ResolveCached resolves ref only if the cache already holds it (for
// preparing the next function's sandbox): nothing to fetch.
func (r *fetchingResolver) ResolveCached(ctx context.Context, ref string) (bundle.Bundle, bool) {
	return r.env.ResolveCached(ctx, ref)
}

// start starts the background fetch of ref unless one runs already. It
// claims the image's fetch lock and hands it to the child, so no second
// fetch can start between the check and the child's start.
func (r *fetchingResolver) start(bf *cache.BackgroundFetch, ref string) error {
	lock, ok, err := bf.Claim()
	if err != nil || !ok {
		return err // !ok: a fetch of ref is running; wait for it
	}
	defer lock.Close() // the child holds its own copy, and with it the lock
	g := r.env.g
	args := []string{"kptr", "cache", "fetch", "--lock-fd", "3", "--timeout", r.timeout.String(),
		"--cache-dir", r.env.c.Dir(), "--image-pull-policy", g.pullPolicy, "--registry-timeout", g.regTimeout.String(),
		"--image-prefix", g.imagePrefix, "--progress", "none", "--log-level", "error"}
	for _, m := range g.mirrors {
		args = append(args, "--mirror", m)
	}
	for _, h := range g.insecure {
		args = append(args, "--insecure-registry", h)
	}
	if g.sigPolicyPath != "" {
		// no layer of an image the policy refuses is downloaded (the child
		// runs in /: the path made absolute)
		p, err := filepath.Abs(g.sigPolicyPath)
		if err != nil {
			return err
		}
		args = append(args, "--signature-policy", p)
	}
	// /proc/self/exe: kptr itself, also when it runs from its sealed copy.
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: append(args, "--", ref), Dir: "/"}
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the background fetch: %w", err)
	}
	// Reaped here if it ends while generate runs; otherwise it outlives
	// generate and its new parent reaps it.
	go cmd.Wait()
	return nil
}

// wait waits for the fetch of ref to end. It returns nil when the image is
// cached or the fetch ended without recording a failure, the fetch's error
// when it failed (recorded after since), and, when ctx ends first, the
// error that says the image is still being fetched.
func (r *fetchingResolver) wait(ctx context.Context, bf *cache.BackgroundFetch, ref string, since time.Time) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for bf.Running() {
		select {
		case <-ctx.Done():
			progress := ""
			if st, ok := bf.Status(); ok && st.Progress() != "" {
				progress = " (" + st.Progress() + " so far)"
			}
			return withCode(exitEnv, fmt.Errorf("image %s is still being fetched in the background%s; the download goes on after this render (for up to %s): retry in a moment (Argo CD retries by itself; Hard Refresh to retry now): %w",
				ref, progress, r.timeout, context.Cause(ctx)))
		case <-tick.C:
		}
	}
	if r.env.c.Unpacked(ref) {
		return nil
	}
	if st, ok := bf.Status(); ok && st.State == cache.FetchFailed && !st.Updated.Before(since) {
		code := st.Code
		if code == 0 {
			code = exitEnv
		}
		return withCode(code, errors.New(st.Error))
	}
	return nil
}

// cacheFetchCmd is the background fetch itself (hidden: generate starts it).
func (g *globals) cacheFetchCmd() *cobra.Command {
	var timeout time.Duration
	var lockFD int
	c := g.command(&cobra.Command{
		Use:         "fetch [--timeout D] IMAGE",
		Annotations: map[string]string{ownSignals: "true"},
		Short:       "Pull one image as a bounded background job (what generate starts on a cold cache)",
		Hidden:      true,
		Args:        cobra.ExactArgs(1),
	}, scopeCache|scopePull|scopeNames|scopeLog, func(ctx context.Context, _ *cobra.Command, args []string) error {
		return g.runCacheFetch(ctx, args[0], timeout, lockFD)
	})
	c.Flags().DurationVar(&timeout, "timeout", defaultFetchTimeout, "time limit of the fetch")
	c.Flags().IntVar(&lockFD, "lock-fd", -1, "descriptor of the image's fetch lock, taken by the caller")
	return c
}

// runCacheFetch pulls ref into the cache within timeout, holding its fetch
// lock (inherited as lockFD, or claimed here: then a running fetch of ref
// makes this one a no-op) and recording its progress and outcome.
func (g *globals) runCacheFetch(ctx context.Context, ref string, timeout time.Duration, lockFD int) error {
	if timeout <= 0 {
		return usageError("--timeout: want a positive duration, got %s", timeout)
	}
	dir, err := filepath.Abs(g.cacheDir)
	if err != nil {
		return withCode(exitEnv, err)
	}
	bf := cache.NewBackgroundFetch(dir, ref)
	var lock *os.File
	if lockFD >= 0 {
		lock = os.NewFile(uintptr(lockFD), "fetch-lock-"+strconv.Itoa(lockFD))
	} else if lock, _, err = bf.Claim(); err != nil {
		return err
	} else if lock == nil {
		fmt.Fprintf(g.stderr, "kptr cache fetch: %s is being fetched by another process\n", ref)
		return nil
	}
	defer lock.Close()
	bf.Start()
	c, err := g.openCacheWith(slog.LevelInfo, cache.WithProgress(bf.Progress()))
	if err != nil {
		bf.Finish(err, exitCodeOf(err))
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("the background fetch's limit of %s (KPTR_FETCH_TIMEOUT) is up", timeout))
	defer cancel()
	// The limit holds even if some step does not heed ctx.
	stop := time.AfterFunc(timeout+fetchGrace, func() {
		bf.Finish(fmt.Errorf("image %s: the background fetch did not end within its limit of %s (KPTR_FETCH_TIMEOUT)", ref, timeout), exitEnv)
		os.Exit(exitEnv)
	})
	defer stop.Stop()
	_, err = c.Resolve(ctx, ref)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	bf.Finish(err, exitCodeOf(err))
	return err
}
