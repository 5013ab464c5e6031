package cache

import (
	"strings"
	"testing"
)

// BenchmarkResolveCached is the per-function cost of the cache on a warm
// render: resolving an already unpacked image (fresh Cache value, as a new
// kptr process has, and the same one again).
func BenchmarkResolveCached(b *testing.B) {
	reg := newTestRegistry(b)
	ref := reg.Host + "/fn/warm:v1"
	push(b, image(b, false, HostPlatform().Architecture, gzipLayer(b, file("usr/local/bin/function", strings.Repeat("x", 1<<20)))), ref)
	dir := b.TempDir()
	c := openTest(b, dir)
	if _, err := c.Resolve(ctx, ref); err != nil {
		b.Fatal(err)
	}
	b.Run("new-process", func(b *testing.B) {
		for b.Loop() {
			c, err := Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Resolve(ctx, ref); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	b.Run("same-process", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Resolve(ctx, ref); err != nil {
				b.Fatal(err)
			}
		}
	})
}
