package pipeline

import (
	"context"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

// Resolver turns an image reference into a runnable bundle (cache.Cache does).
type Resolver interface {
	Resolve(ctx context.Context, ref string) (cache.Bundle, error)
}

// Runner runs a bundle (every tier's runtime.Sandbox does; runtime.Host runs without a sandbox).
type Runner = runtime.Runner

// CachedResolver is optionally implemented by a Resolver that can resolve an
// image it already holds without pulling, printing or failing: ok is false
// whenever that is not possible. The pipeline uses it to prepare the next
// function's sandbox ahead (runtime.Preparer); the function's own turn still
// calls Resolve, so errors surface exactly as without it.
type CachedResolver interface {
	ResolveCached(ctx context.Context, ref string) (b cache.Bundle, ok bool)
}
