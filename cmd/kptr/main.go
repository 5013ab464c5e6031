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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := newGlobals(stdin, stdout, stderr, os.Getenv)
	defer g.cleanup()
	g.kpt = invokedAsKpt(argv[0])
	cmd, err := g.execute(ctx, argv[1:])
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

// execute runs args through the command tree and returns the command that
// ran (or failed to parse) and its error, not yet printed.
func (g *globals) execute(ctx context.Context, args []string) (*cobra.Command, error) {
	root := g.kptrRoot()
	if g.kpt {
		root = g.kptRoot()
	}
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
