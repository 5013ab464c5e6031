package cache

import (
	"errors"
	"strings"
)

// Error is what every exported cache operation returns on failure: one line
// that names the image and the cause. ExitCode maps it onto kptr's exit codes:
// 2 for a reference that does not parse, 3 (environment) for everything else
// (registry, network, disk, corrupt or hostile content).
type Error struct {
	// Image is the reference as the caller gave it (after the prefix rule).
	Image string
	// Err is the cause.
	Err error
	// code is the exit code; 0 means 3.
	code int
}

func (e *Error) Error() string {
	msg := oneLine(e.Err.Error())
	if e.Image == "" {
		return msg
	}
	return e.Image + ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is 2 for an unparsable reference and 3 for registry and cache trouble.
func (e *Error) ExitCode() int {
	if e.code != 0 {
		return e.code
	}
	return 3
}

// ErrNotCached is the cause when an image is needed but the pull policy or
// --offline forbids fetching it.
var ErrNotCached = errors.New("not in the cache")

// ErrHostile is the cause (wrapped) when a layer tries to escape its root,
// exceed a limit or otherwise breaks the extraction rules.
var ErrHostile = errors.New("unsafe layer")

func imgErr(image string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Image: image, Err: err}
}

func usageErr(image string, err error) error {
	return &Error{Image: image, Err: err, code: 2}
}

// oneLine folds multi-line causes (registry error bodies) into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return strings.Join(f, "; ")
}
