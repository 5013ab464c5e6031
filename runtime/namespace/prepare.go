package namespace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// maxPrepared bounds the sandboxes prepared and not yet used (each is a
// live container init, ~3 MB of private memory): a pipeline prepares one
// function ahead, so at most the current function's (not yet taken) and the
// next one's wait; an older unused one is destroyed to make room. Several may
// share a key (the same function twice in a row); a Run takes the oldest.
const maxPrepared = 2

// prepared is a sandbox whose init has done all of its namespace, mount,
// rlimit and seccomp set-up and now blocks on libcontainer's exec fifo;
// Run releases it with Container.Exec. It belongs to the Sandbox's list
// until a Run takes it (then to that Run alone) or it is discarded.
type prepared struct {
	key     string
	st      *started
	err     error         // the set-up failed (st is then nil)
	ready   chan struct{} // closed when the set-up has finished
	stopCtx func() bool   // unregisters the context watch
}

// prepKey is everything that shapes a run's sandbox and process: the image
// (digest, rootfs, config: entrypoint, cmd, env, user, working dir) and the
// invocation's env, network, mounts and user. Stdin, the timeout and the
// output cap only matter once the function runs, so they are not part of
// it. The Sandbox's own limits and features are fixed for its lifetime.
func prepKey(b bundle.Bundle, inv runtime.Invocation) string {
	k, err := json.Marshal(struct {
		Rootfs, Digest string
		Config         any
		Env            []string
		Network        bool
		Mounts         []runtime.Mount
		AsCurrentUser  bool
	}{b.Rootfs, b.Digest.String(), b.Config, inv.Env, inv.Network, inv.Mounts, inv.AsCurrentUser})
	if err != nil {
		return "" // never matched: an empty key is never stored
	}
	return string(k)
}

// Prepare starts, in the background, the sandbox a later Run(ctx, b, inv)
// with the same bundle and an invocation of the same shape (see prepKey)
// will use: that Run then only releases the function and feeds it stdin.
// A prepared sandbox is used by exactly one Run and never shared. One that
// is not used is destroyed when ctx ends, when Close is called, or when
// more than maxPrepared are waiting; if kptr dies, its init dies with it
// (parent-death signal). Functions run on the host (no Rootfs) are not
// prepared.
func (s *Sandbox) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	if b.Rootfs == "" || ctx.Err() != nil {
		return
	}
	key := prepKey(b, inv)
	if key == "" {
		return
	}
	pr := &prepared{key: key, ready: make(chan struct{})}
	var evict *prepared
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if len(s.prepared) >= maxPrepared {
		evict = s.prepared[0]
		s.prepared = s.prepared[1:]
	}
	s.prepared = append(s.prepared, pr)
	// (f runs in its own goroutine, so registering under s.mu is safe)
	pr.stopCtx = context.AfterFunc(ctx, func() { s.discard(pr, false) })
	s.mu.Unlock()
	if evict != nil {
		s.disposeLater(evict)
	}
	go func() {
		defer close(pr.ready)
		st, err := s.setup(b, inv)
		if err != nil {
			pr.err = err
			return
		}
		if err := st.ct.start(false); err != nil {
			st.sio.CloseChild()
			st.destroy(s.log)
			pr.err = err
			return
		}
		st.sio.CloseChild()
		if err := st.watch(); err != nil {
			st.destroy(s.log)
			pr.err = err
			return
		}
		pr.st = st
	}()
}

// take removes and returns the prepared sandbox for (b, inv), if any.
func (s *Sandbox) take(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) *prepared {
	s.mu.Lock()
	if len(s.prepared) == 0 {
		s.mu.Unlock()
		return nil
	}
	key := prepKey(b, inv)
	var pr *prepared
	for i, o := range s.prepared {
		if o.key == key {
			pr = o
			s.prepared = append(s.prepared[:i:i], s.prepared[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if pr == nil {
		return nil
	}
	pr.stopCtx()
	select {
	case <-pr.ready:
	case <-ctx.Done():
		s.disposeLater(pr)
		return nil // the cold path reports the context's error
	}
	if pr.err != nil {
		s.log.Debug("sandbox: prepared sandbox unusable, starting cold", "err", pr.err)
		return nil
	}
	return pr
}

// runPrepared releases the prepared function and runs it to the end; ok is
// false when it could not be released (nothing of inv was consumed then).
func (s *Sandbox) runPrepared(ctx context.Context, pr *prepared, inv runtime.Invocation) (runtime.Result, error, bool) {
	st := pr.st
	if err := st.ct.release(); err != nil {
		var xerr *execError
		if errors.As(err, &xerr) {
			// The image's entrypoint could not be executed: a cold start
			// would fail the same way.
			st.release(s.log)
			return runtime.Result{ExitCode: -1}, fmt.Errorf("start: %s", xerr.msg), true
		}
		s.log.Debug("sandbox: prepared sandbox did not start, starting cold", "id", st.id, "err", err)
		st.release(s.log)
		return runtime.Result{}, nil, false
	}
	s.prepHits.Add(1)
	s.log.Debug("sandbox: using the prepared sandbox", "id", st.id)
	res, err := s.finish(ctx, st, inv)
	if err != nil {
		st.release(s.log) // a limit or a failed start: ended before Run returns, as a cold run
	} else {
		s.releaseLater(st)
	}
	return res, err, true
}

// releaseLater removes, in the background, the sandbox of a prepared run
// that has ended normally: its init is reaped, so every process of it is
// gone (its pid namespace went with it) and its output is collected; only
// its state (libcontainer's, the cgroup, the overlay's upper layer) is
// left, and removing it need not delay the caller's next function. Close
// waits for it, so a program that prepares sandboxes (and therefore calls
// Close) leaves nothing behind. After Close it is removed at once.
func (s *Sandbox) releaseLater(st *started) {
	s.background(func() { st.release(s.log) })
}

// background runs f in a goroutine that Close waits for; once Close has
// been called, f runs at once instead.
func (s *Sandbox) background(f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f()
		return
	}
	s.disposing.Add(1) // under s.mu: never after Close has started waiting
	s.mu.Unlock()
	go func() {
		defer s.disposing.Done()
		f()
	}()
}

// discard destroys pr if it is still waiting to be used (wait: before
// returning).
func (s *Sandbox) discard(pr *prepared, wait bool) {
	s.mu.Lock()
	found := false
	for i, o := range s.prepared {
		if o == pr {
			s.prepared = append(s.prepared[:i:i], s.prepared[i+1:]...)
			found = true
			break
		}
	}
	s.mu.Unlock()
	if !found {
		return // taken by a Run, or already discarded
	}
	if wait {
		s.dispose(pr)
	} else {
		s.disposeLater(pr)
	}
}

// disposeLater disposes of pr in the background; Close waits for it.
func (s *Sandbox) disposeLater(pr *prepared) {
	s.background(func() { s.dispose(pr) })
}

// dispose kills and removes a prepared sandbox nobody will use.
func (s *Sandbox) dispose(pr *prepared) {
	if pr.stopCtx != nil {
		pr.stopCtx()
	}
	<-pr.ready
	if pr.st == nil {
		return
	}
	pr.st.release(s.log)
}

// Close destroys every prepared sandbox that was not used, waits until
// those discarded before are gone too, and makes later Prepare calls
// no-ops; runs in progress and later Runs are unaffected. A program that
// prepares sandboxes calls Close before it exits, so that none of their
// state outlives it (what it leaves anyway, killed, the next kptr removes).
func (s *Sandbox) Close() error {
	s.mu.Lock()
	wasClosed := s.closed
	s.closed = true
	prs := s.prepared
	s.prepared = nil
	s.mu.Unlock()
	for _, pr := range prs {
		s.dispose(pr)
	}
	s.disposing.Wait()
	if !wasClosed {
		runtime.ReleaseOwnerLock(s.stateDir) // New's reference; runs hold their own
	}
	return nil
}

// Prepared is how many prepared sandboxes wait to be used (tests, debugging).
func (s *Sandbox) Prepared() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.prepared)
}
