package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/kptr-dev/kptr/pipeline"
)

// ownSignals is the annotation of a command that answers SIGINT and
// SIGTERM itself (generate: Argo CD's deadline kill; init: forwards them;
// cache fetch: a detached download), so run leaves its exit alone.
const ownSignals = "kptr.dev/own-signals"

// interrupted is the cause of a context cancelled by a signal.
type interrupted struct{ sig syscall.Signal }

func (e *interrupted) Error() string { return "interrupted by " + e.sig.String() }

// Unwrap makes the pipeline see the cancellation as the user's
// interruption (pipeline.ErrInterrupted): it then writes nothing.
func (e *interrupted) Unwrap() error { return pipeline.ErrInterrupted }

// withoutInterruption returns a context cancelled when ctx is, but with the
// plain context.Canceled as its cause: for a command that answers signals
// itself (generate), a signal ends its work as it always did, not as an
// interruption.
func withoutInterruption(ctx context.Context) (context.Context, context.CancelFunc) {
	plain, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return plain, func() { stop(); cancel() }
}

// interruptible returns a context that SIGINT or SIGTERM cancels, with the
// signal as its cause (interruptedBy). Until stop, later signals are
// ignored: the first one is already ending the command.
func interruptible(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			if n, ok := s.(syscall.Signal); ok {
				cancel(&interrupted{sig: n})
			} else {
				cancel(&interrupted{sig: syscall.SIGINT})
			}
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// interruptedBy returns the signal that cancelled ctx, or 0.
func interruptedBy(ctx context.Context) syscall.Signal {
	var ie *interrupted
	if errors.As(context.Cause(ctx), &ie) {
		return ie.sig
	}
	return 0
}
