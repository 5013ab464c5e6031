// Command kptr renders kpt packages by running the exact KRM function images
// their Kptfiles name, in a rootless sandbox, without a container daemon.
//
// This package is thin on purpose: it declares the command tree (cobra, with
// pflag underneath), reads flags and environment, builds the cache, runtime
// and pipeline values, and maps errors to exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/pipeline"
)

// Exit codes (DESIGN.md, README): 0 ok, 1 function or validation failure,
// 2 usage or input error, 3 environment error (sandbox, registry, cache).
// Invoked as kpt, every failure exits 1, as kpt's do.
const (
	exitOK       = 0
	exitFunction = 1
	exitUsage    = 2
	exitEnv      = 3
	// exitSignature: an image refused by the signature policy
	// (--signature-policy); the cache's refusal carries it.
	exitSignature = 4 // cache.ExitSignature
)

// exitError carries an exit code through the error chain.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode lets packages below (fnenv) read the code too.
func (e *exitError) ExitCode() int { return e.code }

func usageError(format string, a ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, a...)}
}

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code, err}
}

// exitCoder lets library errors choose their exit code without importing main.
type exitCoder interface{ ExitCode() int }

func exitCodeOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitFunction
}

// errReported marks an error the command already printed in its own format
// (kpt's "Error: ..." lines, doctor's report); run only sets the exit code.
var errReported = errors.New("reported")

// reported keeps err's exit code but tells run it was already printed.
func reported(err error) error {
	return &exitError{code: exitCodeOf(err), err: errReported}
}

func main() {
	startup()
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns its exit code. Invoked through a
// "kpt" name (a symlink), the command line, the help and the errors are
// kpt's (kpt.go); otherwise kptr's (commands.go).
func run(argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := interruptible(context.Background())
	defer stop()
	g := newGlobals(stdin, stdout, stderr, os.Getenv)
	defer g.cleanup()
	if invokedAsDocker(argv[0]) {
		// docker's command line, conventions and exit codes (docker.go)
		return g.dockerMain(ctx, argv[1:])
	}
	g.kpt = invokedAsKpt(argv[0])
	cmd, err := g.execute(ctx, argv[1:])
	if sig := interruptedBy(ctx); sig != 0 && cmd.Annotations[ownSignals] == "" {
		// Ctrl-C or a SIGTERM ended the command: its functions and
		// downloads were ended through ctx and nothing was written; one
		// line, and the shell's code for the signal (130, 143), as kpt
		g.cleanup()
		fmt.Fprintln(stderr, "interrupted")
		return 128 + int(sig)
	}
	if err == nil {
		return exitOK
	}
	if g.kpt {
		return kptExit(g, err)
	}
	if !errors.Is(err, errReported) {
		fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), err)
	}
	return exitCodeOf(err)
}

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

// execute runs args through the command tree and returns the command that
// ran (or failed to parse) and its error, not yet printed.
func (g *globals) execute(ctx context.Context, args []string) (*cobra.Command, error) {
	root := g.kptrRoot()
	if g.kpt {
		root = g.kptRoot()
	}
	strictBools(root)
	root.SetArgs(args)
	root.SetIn(g.stdin)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if cmd == nil {
		cmd = root
	}
	return cmd, err
}
