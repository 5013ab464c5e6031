package runtime

import (
	"context"
	"io"
	"time"

	"github.com/kptr-dev/kptr/bundle"
)

// Invocation is one call of a function: what it reads and what it may use.
type Invocation struct {
	// Stdin is the ResourceList the function reads.
	Stdin io.Reader
	// Env is added to the image config's Env (KEY=VAL; a later entry wins).
	// The host environment is never passed.
	Env []string
	// Network shares the host network instead of a loopback-only namespace.
	Network bool
	// Mounts are host paths made visible inside the sandbox (kpt fn eval --mount).
	Mounts []Mount
	// AsCurrentUser runs the function as the invoking uid/gid instead of nobody.
	AsCurrentUser bool
	// Timeout kills every process of the run when it expires; 0 means the default (5m).
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each, in bytes; 0 means the default.
	MaxOutput int64
}

// Mount is a bind mount into the sandbox, as kpt fn eval --mount describes it.
type Mount struct {
	Source   string
	Target   string
	ReadOnly bool
}

// Result is what a run produced. A function that ran and exited non-zero is a
// Result with ExitCode != 0 and a nil error; an error means the function could
// not be run (or was killed by a limit) and is reported as exit code 125.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
	Duration time.Duration
	// MaxRSS is the peak resident set size in bytes of the function's main
	// process (in the sandbox: including the container init it starts as);
	// 0 when unknown.
	MaxRSS int64
	// Reused says the function did not run: this is the recorded result
	// of an identical earlier run, replayed (package memo).
	Reused bool
}

// Runner runs a bundle. Implementations are safe for concurrent use.
type Runner interface {
	Run(ctx context.Context, b bundle.Bundle, inv Invocation) (Result, error)
}
