package main

import (
	"context"
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

// backgroundFetch is how generate's chain starts the background fetch of
// an image (fnenv.Background, which waits for it): `kptr cache fetch`
// with this command's pull settings and a limit of timeout. nil in tests
// that run kptr in-process: the background fetch is this executable, and
// a test binary would run its tests.
func (g *globals) backgroundFetch(timeout time.Duration) func(bf *cache.BackgroundFetch, cacheDir, ref string) error {
	if testing.Testing() {
		return nil
	}
	return func(bf *cache.BackgroundFetch, cacheDir, ref string) error {
		return g.startFetch(bf, cacheDir, ref, timeout)
	}
}

// startFetch starts the background fetch of ref unless one runs already.
// It claims the image's fetch lock and hands it to the child, so no second
// fetch can start between the check and the child's start.
func (g *globals) startFetch(bf *cache.BackgroundFetch, cacheDir, ref string, timeout time.Duration) error {
	lock, ok, err := bf.Claim()
	if err != nil || !ok {
		return err // !ok: a fetch of ref is running; wait for it
	}
	defer lock.Close() // the child holds its own copy, and with it the lock
	args := []string{"kptr", "cache", "fetch", "--lock-fd", "3", "--timeout", timeout.String(),
		"--cache-dir", cacheDir, "--image-pull-policy", g.pullPolicy, "--registry-timeout", g.regTimeout.String(),
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
