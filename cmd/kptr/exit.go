package main

import (
	"errors"
	"fmt"
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
