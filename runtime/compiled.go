package runtime

import (
	"context"
	"errors"
	"time"

	"github.com/kptr-dev/kptr/bundle"
)

// Wasm is the name of the tier that runs wasm function images (in kptr's
// process): opened for them beside the tier that runs container images,
// never by auto.
const Wasm = "wasm"

// WithCompileCache names the directory where a tier keeps the code it
// compiles from functions (the wasm tier: wazero's machine code), so that a
// later process runs them without compiling again.
func WithCompileCache(dir string) Option { return func(s *Settings) { s.CompileCache = dir } }

// WithCompileNotice makes runs say, through notice, when they compile a
// function's code the compile cache does not hold yet (a compilation takes
// seconds to minutes).
func WithCompileNotice(notice func(name string)) Option {
	return func(s *Settings) { s.CompileNotice = notice }
}

// Compiler is a Sandbox that compiles a function's code ahead of its runs
// (the wasm tier): Precompile returns once b's code is in the compile cache.
type Compiler interface {
	Precompile(ctx context.Context, b bundle.Bundle) error
}

// CompiledPruner is a Tier that keeps compiled code in a compile cache:
// PruneCompiled removes from dir the code of every module that no bundle of
// keep holds, and, by o, more.
type CompiledPruner interface {
	PruneCompiled(dir string, keep []bundle.Bundle, o PruneOptions) (PruneReport, error)
}

// PruneOptions say which compiled code, beyond that of modules no cached
// image holds, a prune removes.
type PruneOptions struct {
	All    bool          // remove the code of every module, kept or not
	MaxAge time.Duration // remove code not used for longer than this
	// Grace keeps code used more recently than this, whatever the rest
	// says: a running kptr may be compiling or running it.
	Grace  time.Duration
	DryRun bool
}

// PruneReport says what a prune of compiled code removed (or would have).
type PruneReport struct {
	Removed    []string // module sums (or entry names) removed
	KeptInUse  []string // would have gone, but used within the grace period
	Leftovers  []string // half-written files of killed compilations in the code that stays (sum/dir/name)
	FreedBytes int64
	TotalBytes int64 // what is left
}

// ErrNoMounts is the cause when a run asks for mounts (kpt fn eval
// --mount, docker run -v) of a tier without a mount namespace (the landlock
// tier): commands tell it apart without importing the tier.
var ErrNoMounts = errors.New("mounts (kpt fn eval --mount) need the namespace tier; the landlock tier has no mount namespace")

// manyStarts are the tiers' hooks for a process about to start many
// sandboxes.
var manyStarts []func()

// RegisterManyStarts adds f to what ExpectManyStarts runs (a tier's
// package init: the namespace tier seals kptr's binary once so that no
// start copies it).
func RegisterManyStarts(f func()) { manyStarts = append(manyStarts, f) }

// ExpectManyStarts tells every tier that this process may start many
// sandboxes: right after HandleInit, before flags are parsed or goroutines
// started (a tier may re-execute the process).
func ExpectManyStarts() {
	for _, f := range manyStarts {
		f()
	}
}
