package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Tag records dst as one more name of the image src names in the cache, as
// `docker tag SRC DST` does in docker's image store: nothing is fetched, the
// image is not copied, and a later Resolve of dst under the pull policies
// IfNotPresent and Never finds it locally (Always still asks the registry
// for dst). src must already be cached for this cache's platform; dst must be
// a tag, not a digest. An earlier record of dst is replaced.
func (c *Cache) Tag(ctx context.Context, src, dst string) error {
	si, err := c.parseRef(src)
	if err != nil {
		return err
	}
	di, err := c.parseRef(dst)
	if err != nil {
		return err
	}
	if _, ok := di.ref.(name.Digest); ok {
		return usageErr(di.named, errors.New("the new name must be a tag, not a digest"))
	}
	d, ok := c.recordedDescriptor(si)
	if !ok {
		return imgErr(si.named, fmt.Errorf("%w: pull or import it before tagging", ErrNotCached))
	}
	return imgErr(di.named, c.record(ctx, di.key, d))
}

// Present reports whether ref is in the cache for this cache's platform
// without any network access (what `docker image inspect` answers from
// docker's store), and the cached image when it is.
func (c *Cache) Present(ctx context.Context, ref string) (Image, bool, error) {
	ir, err := c.parseRef(ref)
	if err != nil {
		return Image{}, false, err
	}
	d, ok := c.recordedDescriptor(ir)
	if !ok {
		return Image{}, false, nil
	}
	list, err := c.List(ctx)
	if err != nil {
		return Image{}, false, err
	}
	for _, im := range list {
		if im.Digest == d.Digest {
			return im, true, nil
		}
	}
	return Image{}, false, nil
}

// recordedDescriptor is the full index descriptor of ir's image: its
// recorded resolution, or for a digest reference the recorded entry with
// that digest.
func (c *Cache) recordedDescriptor(ir imageRef) (v1.Descriptor, bool) {
	d, ok := c.localDescriptor(ir)
	if !ok {
		return v1.Descriptor{}, false
	}
	if d.MediaType != "" {
		return d, true
	}
	idx, err := c.readIndex()
	if err != nil {
		return v1.Descriptor{}, false
	}
	for _, m := range idx.Manifests {
		if m.Digest == d.Digest && (m.Platform == nil || platformMatches(*m.Platform, c.s.platform)) {
			return m, true
		}
	}
	return v1.Descriptor{}, false
}
