package pipeline

import (
	"context"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// Resolver turns an image reference into a runnable bundle (cache.Cache does).
type Resolver interface {
	Resolve(ctx context.Context, ref string) (bundle.Bundle, error)
}

// Runner runs a bundle (every tier's runtime.Sandbox does; runtime.Host runs without a sandbox).
type Runner = runtime.Runner

// CachedResolver is optionally implemented by a Resolver that can resolve an
// image it already holds without pulling, printing or failing: ok is false
// whenever that is not possible. The pipeline uses it to prepare the next
// function's sandbox ahead (runtime.Preparer); the function's own turn still
// calls Resolve, so errors surface exactly as without it.
type CachedResolver interface {
	ResolveCached(ctx context.Context, ref string) (b bundle.Bundle, ok bool)
}

// Fetcher is optionally implemented by a Resolver that can start fetching an
// image in the background: Fetch returns at once, fails never and prints
// nothing of its own; the function's own turn still calls Resolve, which
// gives that fetch's outcome (its bundle, or the error it met) as if the
// turn had pulled. Render asks for every image function of the root
// package's pipeline as soon as its Kptfile is read (fetchAhead), so a cold
// cache pulls them at once instead of one at each function's turn. ctx ends
// when Render returns: a fetch no turn took is abandoned then.
type Fetcher interface {
	Fetch(ctx context.Context, ref string)
}
