package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Blob downloads. A blob is fetched into tmp/partial-<hex>, never more than
// its declared size, hashed on the way, and renamed into blobs/ only when
// its digest matches. A download that stops (connection cut, stall, kill -9,
// Ctrl-C) leaves the partial file behind: it is a prefix of at most the
// declared size, and the next download of the blob continues it with an HTTP
// Range request (a registry that ignores Range sends it all again). A partial
// that proves wrong (longer than declared, a wrong digest at the end, a
// registry answering another range) is removed; prune and verify --repair
// remove every partial (they run only while no pull does).
const partialPrefix = "partial-"

// checkDeclared refuses, before any blob is fetched, a manifest whose
// declared sizes break the limits: a config over maxConfigBytes, more than
// maxLayers layers, or layers that together declare more than the
// extraction limit (no layer can be extracted into less than its
// compressed size, give or take gzip's framing).
func (c *Cache) checkDeclared(registry string, manifest v1.Hash, mf *v1.Manifest) error {
	fail := func(format string, a ...any) error {
		return &registryError{host: registry, msg: "manifest " + manifest.String() + " " + fmt.Sprintf(format, a...)}
	}
	if mf.Config.Size < 0 || mf.Config.Size > maxConfigBytes {
		return fail("declares a %d byte config, over the %s limit", mf.Config.Size, sizeString(maxConfigBytes))
	}
	if len(mf.Layers) > maxLayers {
		return fail("has %d layers, over the limit of %d", len(mf.Layers), maxLayers)
	}
	limit, total := c.s.limits.MaxBytes, int64(0)
	for i, l := range mf.Layers {
		if l.Size < 0 || l.Size > limit-total {
			before := ""
			if total > 0 {
				before = fmt.Sprintf(" (after %d bytes of layers before it)", total)
			}
			return fail("declares layer %d of %d bytes%s, over the %s extraction limit", i+1, l.Size, before, sizeString(limit))
		}
		total += l.Size
	}
	return nil
}

// ensureBlob makes sure blob h (declared size bytes) is in the store,
// downloading it from repo at most once across goroutines (single-flight)
// and processes (blob lock). track, when not nil, is called once the
// download knows where it starts (a resumed partial) and gets its bytes.
func (c *Cache) ensureBlob(ctx context.Context, repo name.Repository, h v1.Hash, size int64, track func(resumed int64) LayerProgress) error {
	if c.hasBlob(h) {
		return nil
	}
	if c.s.offline {
		return fmt.Errorf("blob %s: %w (offline)", h, ErrNotCached)
	}
	_, err, _ := c.sf.Do("blob:"+h.Hex, func() (any, error) {
		l, err := c.lock(ctx, "blob-"+h.Hex+".lock", false)
		if err != nil {
			return nil, err
		}
		defer unlock(l)
		if c.hasBlob(h) {
			return nil, nil
		}
		return nil, c.download(ctx, repo, h, size, track)
	})
	return err
}

// badPartial marks a download error that proves the partial file wrong.
type badPartial struct{ error }

func (b badPartial) Unwrap() error { return b.error }

// download fetches blob h under its blob lock (see the comment at the top).
func (c *Cache) download(ctx context.Context, repo name.Repository, h v1.Hash, size int64, track func(int64) LayerProgress) (err error) {
	if h.Algorithm != "sha256" {
		return fmt.Errorf("blob %s: unsupported digest algorithm", h)
	}
	if size < 0 {
		return fmt.Errorf("blob %s: no declared size", h)
	}
	start := time.Now()
	p := &partial{path: c.path(tmpDir, partialPrefix+h.Hex), size: size}
	if err := p.open(); err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	defer func() {
		var bad badPartial
		p.close(errors.As(err, &bad))
	}()
	resumed := p.off
	var lp LayerProgress
	if track != nil {
		lp = track(resumed)
		defer func() { lp.Done(err) }()
	}
	for attempt := 0; p.off < size; attempt++ {
		before := p.off
		err := c.fetchInto(ctx, repo, h, p, lp)
		if err == nil {
			break
		}
		var bad badPartial
		if errors.As(err, &bad) || ctx.Err() != nil || p.off == before || attempt == maxResumes || isStall(err) {
			return fmt.Errorf("blob %s: %w", h, err)
		}
		c.s.logger.Debug("resuming blob", "digest", h.String(), "at", p.off, "of", size, "after", err)
	}
	if got := hex.EncodeToString(p.hash.Sum(nil)); got != h.Hex {
		msg := "content does not match its digest (got sha256:" + got + ")"
		if resumed > 0 {
			msg += fmt.Sprintf("; the download continued an earlier one at byte %d, removed now", resumed)
		}
		return badPartial{fmt.Errorf("blob %s: %w", h, &registryError{host: repo.RegistryStr(), msg: msg})}
	}
	if err := p.commit(c.blobPath(h)); err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	c.s.logger.Debug("fetched blob", "digest", h.String(), "bytes", size, "resumed", resumed, "duration", time.Since(start))
	return nil
}

func isStall(err error) bool {
	var re *registryError
	return errors.As(err, &re) && strings.Contains(re.msg, "--registry-timeout")
}

// fetchInto requests the rest of blob h (from p.off) and appends what comes,
// at most up to the declared size.
func (c *Cache) fetchInto(ctx context.Context, repo name.Repository, h v1.Hash, p *partial, lp LayerProgress) error {
	resp, err := c.getBlob(ctx, repo, h, p.off)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	host := repo.RegistryStr()
	switch {
	case resp.StatusCode == http.StatusOK && p.off > 0:
		// The registry ignored the Range header: start over.
		if err := p.reset(); err != nil {
			return err
		}
	case resp.StatusCode == http.StatusPartialContent:
		var from, to, total int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &from, &to, &total); err != nil || from != p.off || to != p.size-1 || total != p.size {
			return badPartial{&registryError{host: host, msg: fmt.Sprintf("answered a request for bytes %d- of a %d byte blob with range %q", p.off, p.size, resp.Header.Get("Content-Range"))}}
		}
	}
	want := p.size - p.off
	if resp.ContentLength >= 0 && resp.ContentLength != want {
		return badPartial{&registryError{host: host, msg: fmt.Sprintf("sends %d bytes where the manifest declares %d", resp.ContentLength, want)}}
	}
	var w io.Writer = p
	if lp != nil {
		w = &progressWriter{w: p, on: lp.Add}
	}
	n, err := io.CopyBuffer(w, io.LimitReader(resp.Body, want), make([]byte, 128<<10))
	if err != nil {
		return err
	}
	if n < want {
		return &registryError{host: host, msg: fmt.Sprintf("blob ended after %d of %d bytes", p.off, p.size), temporary: true}
	}
	return nil
}

// partial is tmp/partial-<hex>: a prefix of a blob, never longer than the
// declared size, and the running hash of what it holds.
type partial struct {
	path string
	size int64
	f    *os.File
	off  int64
	hash hash.Hash
}

// open opens (or creates) the partial file and hashes what it holds; one
// longer than the declared size is emptied.
func (p *partial) open() error {
	f, err := os.OpenFile(p.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	p.f, p.hash = f, sha256.New()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() > p.size {
		return p.reset()
	}
	n, err := io.CopyBuffer(p.hash, io.NewSectionReader(f, 0, st.Size()), make([]byte, 128<<10))
	if err != nil {
		return err
	}
	p.off = n
	_, err = f.Seek(n, io.SeekStart)
	return err
}

func (p *partial) reset() error {
	if err := p.f.Truncate(0); err != nil {
		return err
	}
	p.off = 0
	p.hash.Reset()
	_, err := p.f.Seek(0, io.SeekStart)
	return err
}

// Write appends, refusing to grow past the declared size.
func (p *partial) Write(b []byte) (int, error) {
	if int64(len(b)) > p.size-p.off {
		return 0, badPartial{fmt.Errorf("more than the declared %d bytes", p.size)}
	}
	n, err := p.f.Write(b)
	p.hash.Write(b[:n])
	p.off += int64(n)
	return n, err
}

// commit syncs the complete blob and renames it to dst.
func (p *partial) commit(dst string) error {
	if err := p.f.Sync(); err != nil {
		return err
	}
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return err
	}
	return os.Rename(p.path, dst)
}

// close closes the file; it is removed when it proved wrong or holds nothing.
func (p *partial) close(wrong bool) {
	if p.f == nil {
		return // committed
	}
	p.f.Close()
	p.f = nil
	if wrong || p.off == 0 {
		os.Remove(p.path)
	}
}
