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

// Runner runs a bundle (runtime.Sandbox does; runtime.Host runs without a sandbox).
type Runner = runtime.Runner
