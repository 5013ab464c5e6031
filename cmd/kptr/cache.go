package main

import (
	"context"
	"errors"

	"github.com/kptr-dev/kptr/cache"
)

// openCache opens the image cache the global flags describe. STUB.
func (g *globals) openCache(ctx context.Context) (*cache.Cache, error) {
	return nil, withCode(exitEnv, errors.New("cache: not implemented"))
}
