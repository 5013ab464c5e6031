package main

import (
	"errors"
	"fmt"

	"github.com/kptr-dev/kptr/fnenv"
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

// exitError carries an exit code through the error chain: fnenv's error
// type, so that a code set here and one set below read the same way.
type exitError = fnenv.Error

func usageError(format string, a ...any) error {
	return &exitError{Code: exitUsage, Err: fmt.Errorf(format, a...)}
}

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{Code: code, Err: err}
}

// exitCodeOf is the code err carries (the first ExitCode in its chain:
// the commands', fnenv's, the cache's), else 1.
func exitCodeOf(err error) int { return fnenv.ExitCode(err) }

// errReported marks an error the command already printed in its own format
// (kpt's "Error: ..." lines, doctor's report); run only sets the exit code.
var errReported = errors.New("reported")

// reported keeps err's exit code but tells run it was already printed.
func reported(err error) error {
	return &exitError{Code: exitCodeOf(err), Err: errReported}
}
