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

	"github.com/spf13/cobra"
)

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

// execute runs args through the command tree and returns the command that
// ran (or failed to parse) and its error, not yet printed.
func (g *globals) execute(ctx context.Context, args []string) (*cobra.Command, error) {
	var root *cobra.Command
	if g.kpt {
		root = g.kptRoot()
	} else {
		root = g.kptrRootFor(args)
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
