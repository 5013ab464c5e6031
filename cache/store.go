package cache

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Names inside the cache directory. The first three are the OCI image layout;
// the rest are kptr's and sit beside it (the layout spec allows that).
const (
	layoutFile  = "oci-layout"
	indexFile   = "index.json"
	blobsDir    = "blobs/sha256"
	rootfsDir   = "rootfs" // rootfs/<manifest hex>/{rootfs/, meta.json}
	locksDir    = "locks"
	tmpDir      = "tmp"
	gcLock      = "gc.lock"
	indexLock   = "index.lock"
	annRefName  = "org.opencontainers.image.ref.name"
	annResolved = "dev.kptr.resolved-at"
)

func (c *Cache) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

func (c *Cache) blobPath(h v1.Hash) string { return c.path(blobsDir, h.Hex) }

func (c *Cache) hasBlob(h v1.Hash) bool {
	st, err := os.Stat(c.blobPath(h))
	return err == nil && st.Mode().IsRegular()
}

// tempPath returns a fresh path under tmp/ (same filesystem as the cache, so
// rename commits atomically).
func (c *Cache) tempPath(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return c.path(tmpDir, fmt.Sprintf("%s-%d-%s", kind, os.Getpid(), hex.EncodeToString(b[:])))
}

func (c *Cache) initLayout() error {
	for _, d := range []string{blobsDir, rootfsDir, locksDir, tmpDir} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	if _, err := os.Stat(c.path(layoutFile)); errors.Is(err, os.ErrNotExist) {
		if err := c.writeFileAtomic(layoutFile, []byte(`{"imageLayoutVersion": "1.0.0"}`)); err != nil {
			return err
		}
	}
	if _, err := os.Stat(c.path(indexFile)); errors.Is(err, os.ErrNotExist) {
		return c.updateIndex(context.Background(), func(*v1.IndexManifest) bool { return true })
	}
	return nil
}

// writeFileAtomic writes rel via a temporary file and a rename.
func (c *Cache) writeFileAtomic(rel string, data []byte) error {
	tmp := c.tempPath("file")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.path(rel))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// lock takes the named cross-process lock, shared or exclusive, waiting until
// ctx is done. Lock files are never deleted: unlinking a lock file while
// another process waits on it would split the lock in two.
func (c *Cache) lock(ctx context.Context, rel string, shared bool) (*flock.Flock, error) {
	if c.readOnly {
		return nil, nil
	}
	l := flock.New(c.path(locksDir, rel))
	var ok bool
	var err error
	if shared {
		ok, err = l.TryRLockContext(ctx, 10*time.Millisecond)
	} else {
		ok, err = l.TryLockContext(ctx, 10*time.Millisecond)
	}
	if err != nil || !ok {
		l.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("locking %s: %w", rel, err)
	}
	return l, nil
}

func unlock(l *flock.Flock) {
	if l != nil {
		l.Unlock()
		l.Close()
	}
}

// readIndex reads index.json; it is only ever replaced by rename, so reading
// without a lock sees a whole file.
func (c *Cache) readIndex() (*v1.IndexManifest, error) {
	f, err := openChecked(c.path(indexFile))
	if errors.Is(err, os.ErrNotExist) {
		return &v1.IndexManifest{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json"}, nil
	}
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("cache index %s: %w", c.path(indexFile), err)
	}
	return &idx, nil
}

// updateIndex runs fn on index.json under the index lock and writes the
// result back atomically when fn reports a change.
func (c *Cache) updateIndex(ctx context.Context, fn func(*v1.IndexManifest) bool) error {
	l, err := c.lock(ctx, indexLock, false)
	if err != nil {
		return err
	}
	defer unlock(l)
	idx, err := c.readIndex()
	if err != nil {
		return err
	}
	if !fn(idx) {
		if _, err := os.Stat(c.path(indexFile)); err == nil {
			return nil
		}
	}
	idx.SchemaVersion = 2
	idx.MediaType = "application/vnd.oci.image.index.v1+json"
	if idx.Manifests == nil {
		idx.Manifests = []v1.Descriptor{}
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	return c.writeFileAtomic(indexFile, b)
}

// record notes that key (a canonical reference) resolved to desc now.
// A signature set given in desc's annotations (annSignatures) is recorded
// with it; without one, the set already recorded for key at the same digest
// is kept.
func (c *Cache) record(ctx context.Context, key string, desc v1.Descriptor) error {
	set := desc.Annotations[annSignatures]
	desc.Annotations = map[string]string{annRefName: key, annResolved: time.Now().UTC().Format(time.RFC3339Nano)}
	desc.URLs = nil
	return c.updateIndex(ctx, func(idx *v1.IndexManifest) bool {
		out := idx.Manifests[:0]
		if set == "" {
			for _, d := range idx.Manifests {
				if d.Annotations[annRefName] == key && d.Digest == desc.Digest && d.Annotations[annSignatures] != "" {
					set = d.Annotations[annSignatures]
				}
			}
		}
		if set != "" {
			desc.Annotations[annSignatures] = set
		}
		for _, d := range idx.Manifests {
			if d.Annotations[annRefName] != key || !(d.Platform == nil || desc.Platform == nil || samePlatform(d.Platform, desc.Platform)) {
				out = append(out, d)
			}
		}
		idx.Manifests = append(out, desc)
		return true
	})
}

// lookup finds the recorded resolution of key for platform p; with wasm
// allowed a wasm resolution comes first, as Resolve picks wasm entries first.
func (c *Cache) lookup(key string, p v1.Platform) (v1.Descriptor, time.Time, bool) {
	idx, err := c.readIndex()
	if err != nil {
		return v1.Descriptor{}, time.Time{}, false
	}
	found := -1
	for i, d := range idx.Manifests {
		if d.Annotations[annRefName] != key {
			continue
		}
		if c.s.wasm && d.Platform != nil && isWasmPlatform(*d.Platform) {
			found = i
			break
		}
		if found < 0 && (d.Platform == nil || platformMatches(*d.Platform, p)) {
			found = i
		}
	}
	if found < 0 {
		return v1.Descriptor{}, time.Time{}, false
	}
	d := idx.Manifests[found]
	t, _ := time.Parse(time.RFC3339Nano, d.Annotations[annResolved])
	return d, t, true
}

// cachedTags lists the tags recorded for repo (canonical repository name).
func (c *Cache) cachedTags(repo string) []string {
	idx, err := c.readIndex()
	if err != nil {
		return nil
	}
	var tags []string
	for _, d := range idx.Manifests {
		n := d.Annotations[annRefName]
		if t, ok := strings.CutPrefix(n, repo+":"); ok && !strings.Contains(t, "@") {
			tags = append(tags, t)
		}
	}
	return tags
}

func samePlatform(a, b *v1.Platform) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.OS == b.OS && a.Architecture == b.Architecture && a.Variant == b.Variant
}

// commitBlob streams r into the blob store as h: written to a temporary file,
// hashed on the way, checked against h and size (size < 0: unknown), synced,
// then renamed into place. On any error nothing is left behind.
func (c *Cache) commitBlob(r io.Reader, h v1.Hash, size int64, onWrite func(int)) (err error) {
	if h.Algorithm != "sha256" {
		return fmt.Errorf("unsupported digest algorithm %q", h.Algorithm)
	}
	tmp := c.tempPath("blob-" + h.Hex[:12])
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			os.Remove(tmp)
		}
	}()
	hs := sha256.New()
	limit := size
	if limit < 0 {
		limit = 1 << 40
	}
	w := &progressWriter{w: io.MultiWriter(f, hs), on: onWrite}
	n, err := io.CopyBuffer(w, io.LimitReader(r, limit+1), make([]byte, 128<<10))
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("blob %s: got %d bytes, want %d (truncated or oversized)", h, n, size)
	}
	if got := hex.EncodeToString(hs.Sum(nil)); got != h.Hex {
		return fmt.Errorf("blob %s: content does not match its digest (got sha256:%s)", h, got)
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		f = nil
		return err
	}
	f = nil
	return os.Rename(tmp, c.blobPath(h))
}

// commitBytes stores a small blob already in memory (manifests, configs).
func (c *Cache) commitBytes(b []byte, h v1.Hash) error {
	if c.hasBlob(h) {
		return nil
	}
	return c.commitBlob(bytes.NewReader(b), h, int64(len(b)), nil)
}

type progressWriter struct {
	w  io.Writer
	on func(int)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if p.on != nil && n > 0 {
		p.on(n)
	}
	return n, err
}

// hashFile returns the sha256 of a file's content.
func hashFile(path string, h hash.Hash) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if h == nil {
		h = sha256.New()
	}
	if _, err := io.CopyBuffer(h, f, make([]byte, 128<<10)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
