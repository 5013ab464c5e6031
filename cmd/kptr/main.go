// Command kptr renders kpt packages by running the exact KRM function images
// their Kptfiles name, in a rootless sandbox, without a container daemon.
//
// This package is thin on purpose: it parses flags and environment, builds the
// cache, runtime and pipeline values, and maps errors to exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit codes (DESIGN.md): 0 ok, 1 function or validation failure, 2 usage or
// input error, 3 environment error (sandbox, registry, cache).
const (
	exitOK       = 0
	exitFunction = 1
	exitUsage    = 2
	exitEnv      = 3
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

// command is one kptr subcommand. name may have two words ("cache pull").
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, g *globals, args []string) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

func main() {
	startup()
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

func run(argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := newGlobals(stdin, stdout, stderr, os.Getenv)
	defer g.cleanup()
	args := argv[1:]
	if invokedAsKpt(argv[0]) {
		var err error
		if args, err = kptArgs(args); err != nil {
			fmt.Fprintf(stderr, "Error: %v \n", err)
			return exitFunction
		}
	}
	switch {
	case len(args) == 1 && args[0] == "--version":
		args = []string{"version"}
	case len(args) > 1 && args[0] == "help":
		// "kptr help fn render" is "kptr fn render --help".
		if c, rest := lookup(args[1:]); c != nil && len(rest) == 0 {
			args = append(args[1:len(args):len(args)], "--help")
		}
	}
	c, rest := lookup(args)
	if c == nil {
		if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			// Help that was asked for goes to stdout (kptr --help | less).
			printUsage(stdout)
			return exitOK
		}
		printUsage(stderr)
		fmt.Fprintf(stderr, "kptr: unknown command %q\n", strings.Join(args, " "))
		return exitUsage
	}
	if err := c.run(ctx, g, rest); err != nil {
		if errors.Is(err, errHelp) {
			return exitOK
		}
		if !errors.Is(err, errReported) {
			fmt.Fprintf(stderr, "kptr %s: %v\n", c.name, err)
		}
		return exitCodeOf(err)
	}
	return exitOK
}

// errHelp is returned by a command whose --help was printed.
var errHelp = errors.New("help requested")

// errReported marks an error the command already printed in its own format
// (kpt's "Error: ..." lines); main only sets the exit code.
var errReported = errors.New("reported")

func lookup(args []string) (*command, []string) {
	if len(args) >= 2 {
		if c, ok := commands[args[0]+" "+args[1]]; ok {
			return c, args[2:]
		}
	}
	if len(args) >= 1 {
		if c, ok := commands[args[0]]; ok {
			return c, args[1:]
		}
	}
	return nil, nil
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "kptr renders kpt packages with the exact KRM function images their Kptfiles name,")
	fmt.Fprintln(w, "in a rootless sandbox, without a container daemon.")
	fmt.Fprintln(w, "\nUsage: kptr <command> [flags] [args]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'kptr <command> --help' for a command's flags.")
}
