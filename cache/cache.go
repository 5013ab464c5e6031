package cache

import (
	"context"
	"errors"
)

// Cache is the image cache. STUB: replaced by the cache implementation.
type Cache struct{}

// Resolve turns an image reference into a runnable bundle.
func (c *Cache) Resolve(ctx context.Context, ref string) (Bundle, error) {
	return Bundle{}, errors.New("cache: not implemented")
}
