package cache

import (
	"context"
	"errors"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Untag forgets ref as a name of a cached image, as `docker rmi NAME` does
// for a name among several: the record of ref goes (for every platform), the
// image's blobs and root filesystem stay until prune removes images no name
// points to. A run of a forgotten name under IfNotPresent pulls it again;
// under Never it fails. It reports ErrNotCached when ref names nothing.
func (c *Cache) Untag(ctx context.Context, ref string) error {
	ir, err := c.parseRef(ref)
	if err != nil {
		return err
	}
	if _, ok := ir.ref.(name.Digest); ok {
		return usageErr(ir.named, errors.New("untag a name, not a digest"))
	}
	found := false
	err = c.updateIndex(ctx, func(idx *v1.IndexManifest) bool {
		out := idx.Manifests[:0]
		for _, d := range idx.Manifests {
			if d.Annotations[annRefName] == ir.key {
				found = true
				continue
			}
			out = append(out, d)
		}
		idx.Manifests = out
		return found
	})
	if err != nil {
		return imgErr(ir.named, err)
	}
	if !found {
		return imgErr(ir.named, ErrNotCached)
	}
	return nil
}
