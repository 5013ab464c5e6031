package cache

import (
	"errors"
	"testing"
)

// TestTagAndPresent: `cache tag` is docker tag for kptr's store (offline, no
// copy; the new name resolves under IfNotPresent and Never without the
// registry) and Present answers docker image inspect's question.
func TestTagAndPresent(t *testing.T) {
	reg := newTestRegistry(t)
	src := reg.Host + "/fn/orig:v1"
	d := push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "one")), src)
	dir := t.TempDir()
	dst := "example.invalid/local/renamed:dev"

	c := openTest(t, dir)
	if _, ok, err := c.Present(ctx, src); err != nil || ok {
		t.Fatalf("present before pull: %v %v", ok, err)
	}
	if err := c.Tag(ctx, src, dst); !errors.Is(err, ErrNotCached) {
		t.Fatalf("tag of an uncached image: %v", err)
	}
	if _, err := c.Resolve(ctx, src); err != nil {
		t.Fatal(err)
	}
	if im, ok, err := c.Present(ctx, src); err != nil || !ok || im.Digest != d {
		t.Fatalf("present after pull: %v %v %v", im.Digest, ok, err)
	}
	if err := c.Tag(ctx, src, dst+"@sha256:"+d.Hex); err == nil {
		t.Fatal("a digest as the new name was accepted")
	}
	before := reg.requestCount()
	if err := c.Tag(ctx, src, dst); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Option{WithPullPolicy(PullNever), WithPullPolicy(PullIfNotPresent)} {
		b, err := openTest(t, dir, o).Resolve(ctx, dst)
		if err != nil || b.Digest != d {
			t.Fatalf("resolve tagged name: %v %v", b.Digest, err)
		}
	}
	if im, ok, err := c.Present(ctx, dst); err != nil || !ok || im.Digest != d {
		t.Fatalf("present tagged: %v %v", ok, err)
	}
	// by digest too
	if _, ok, err := c.Present(ctx, reg.Host+"/fn/orig@sha256:"+d.Hex); err != nil || !ok {
		t.Fatalf("present by digest: %v %v", ok, err)
	}
	if reg.requestCount() != before {
		t.Fatal("tag or present touched the registry")
	}
}
