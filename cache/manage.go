package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/internal/lazyre"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Image is one cached image (a platform manifest) as List reports it.
type Image struct {
	Digest   v1.Hash
	Refs     []string  // recorded references (ref.name annotations)
	Platform string    // e.g. linux/amd64, when unpacked
	Unpacked bool      // a committed rootfs exists
	Bytes    int64     // rootfs bytes plus the image's blob bytes
	LastUsed time.Time // last Resolve (or unpack/record time): prune's LRU order
	LastRun  time.Time // last function run that used it (MarkRun); zero: none since it was unpacked
	Resolved time.Time // latest time one of Refs was resolved to this digest
	InUse    bool      // a running kptr process holds it
	// Signatures is how many signatures the cache holds for it (fetched
	// under a signature policy); -1 when none were ever fetched.
	Signatures int
}

type imageInfo struct {
	Image
	blobs   []v1.Hash // manifest, config, layers (those known), signature sets
	rootfs  int64
	sigsets []v1.Hash
}

// images gathers every image known from index.json and rootfs/.
func (c *Cache) images() (map[string]*imageInfo, error) {
	idx, err := c.readIndex()
	if err != nil {
		return nil, err
	}
	out := map[string]*imageInfo{}
	get := func(h v1.Hash) *imageInfo {
		if ii, ok := out[h.Hex]; ok {
			return ii
		}
		ii := &imageInfo{Image: Image{Digest: h}}
		out[h.Hex] = ii
		return ii
	}
	for _, d := range idx.Manifests {
		ii := get(d.Digest)
		if n := d.Annotations[annRefName]; n != "" {
			ii.Refs = append(ii.Refs, n)
		}
		if s, err := v1.NewHash(d.Annotations[annSignatures]); err == nil {
			ii.sigsets = append(ii.sigsets, s)
		}
		if t, err := time.Parse(time.RFC3339Nano, d.Annotations[annResolved]); err == nil && t.After(ii.Resolved) {
			ii.Resolved = t
			if t.After(ii.LastUsed) {
				ii.LastUsed = t
			}
		}
	}
	ents, _ := os.ReadDir(c.path(rootfsDir))
	for _, e := range ents {
		h, err := v1.NewHash("sha256:" + e.Name())
		if err != nil {
			continue
		}
		ii := get(h)
		m, _ := c.readMeta(h.Hex) // a loose tree (errLooseTree) still takes its space
		if m == nil {
			continue
		}
		ii.Unpacked, ii.Platform, ii.rootfs = true, m.Platform, m.Bytes
		// The marker's mtime is touched by every Resolve: the true last use.
		if st, err := os.Stat(c.metaPath(h.Hex)); err == nil {
			ii.LastUsed = st.ModTime()
		}
		ii.LastRun = c.lastRun(h.Hex)
	}
	for _, ii := range out {
		ii.blobs = c.imageBlobs(ii.Digest)
		for _, s := range ii.sigsets {
			ii.blobs = append(ii.blobs, c.sigsetBlobs(s, c.readStored)...)
		}
		ii.Signatures = -1
		if len(ii.sigsets) > 0 {
			ii.Signatures = c.signatureCount(ii.Digest)
		}
		ii.Bytes = ii.rootfs
		for _, b := range ii.blobs {
			if st, err := os.Stat(c.blobPath(b)); err == nil {
				ii.Bytes += st.Size()
			}
		}
		sort.Strings(ii.Refs)
	}
	return out, nil
}

// imageBlobs lists the blobs an image manifest references (itself first).
func (c *Cache) imageBlobs(h v1.Hash) []v1.Hash {
	out := []v1.Hash{h}
	f, err := os.Open(c.blobPath(h))
	if err != nil {
		return out
	}
	defer f.Close()
	m, err := v1.ParseManifest(f)
	if err != nil {
		return out
	}
	out = append(out, m.Config.Digest)
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

// tryExclusive reports whether no process holds image hex. When it is free,
// the image's hold lock is held exclusively until release is called, so no
// Resolve can start using it meanwhile.
func (c *Cache) tryExclusive(hex string) (free bool, release func()) {
	if c.readOnly {
		return true, func() {}
	}
	l := flock.New(c.path(locksDir, "hold-"+hex+".lock"))
	ok, err := l.TryLock()
	if err != nil || !ok {
		l.Close()
		return false, func() {}
	}
	return true, func() { unlock(l) }
}

// List reports the cached images, most recently used first.
func (c *Cache) List(ctx context.Context) ([]Image, error) {
	all, err := c.images()
	if err != nil {
		return nil, &Error{Err: err}
	}
	var out []Image
	for _, ii := range all {
		free, release := c.tryExclusive(ii.Digest.Hex)
		release()
		ii.InUse = !free
		out = append(out, ii.Image)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.After(out[j].LastUsed) })
	return out, nil
}

// WasmBundles are the bundles of the unpacked wasm function images, for
// what keeps their compiled code (runtime/wasm's PruneCompiled). Nothing is
// held: the caller reads each module beneath its rootfs, which a prune may
// remove meanwhile.
func (c *Cache) WasmBundles() ([]bundle.Bundle, error) {
	ents, err := os.ReadDir(c.path(rootfsDir))
	if err != nil && !os.IsNotExist(err) {
		return nil, &Error{Err: err}
	}
	var out []bundle.Bundle
	for _, e := range ents {
		h, err := v1.NewHash("sha256:" + e.Name())
		if err != nil {
			continue
		}
		if m, err := c.readMeta(h.Hex); err == nil && m.Wasm != "" {
			out = append(out, c.bundleOf(imageRef{}, h, m))
		}
	}
	return out, nil
}

// PruneOptions say what Prune removes. With neither MaxBytes nor MaxAge nor
// All set, Prune only clears debris (stale temporaries, unreferenced blobs).
type PruneOptions struct {
	MaxBytes int64         // remove least recently used images until the cache is at most this big
	MaxAge   time.Duration // remove images not used for longer than this
	All      bool          // remove every image not in use
	DryRun   bool
}

// PruneReport says what Prune removed (or would have, for a dry run).
type PruneReport struct {
	Removed    []Image
	KeptInUse  []Image // would have gone but a running process holds them
	FreedBytes int64
	TotalBytes int64 // after pruning
}

// Prune removes images by age and/or total size, least recently used first,
// then blobs no remaining image references and stale temporaries. It waits
// for running pulls to finish and never removes an image a process holds.
func (c *Cache) Prune(ctx context.Context, o PruneOptions) (PruneReport, error) {
	var rep PruneReport
	gl, err := c.lock(ctx, gcLock, false)
	if err != nil {
		return rep, &Error{Err: err}
	}
	defer unlock(gl)
	all, err := c.images()
	if err != nil {
		return rep, &Error{Err: err}
	}
	refs := map[string]int{}
	var list []*imageInfo
	for _, ii := range all {
		list = append(list, ii)
		for _, b := range ii.blobs {
			refs[b.Hex]++
		}
	}
	blobSize := func(h v1.Hash) int64 {
		if st, err := os.Stat(c.blobPath(h)); err == nil {
			return st.Size()
		}
		return 0
	}
	var total int64
	for _, ii := range list {
		total += ii.rootfs
	}
	ents, _ := os.ReadDir(c.path(blobsDir))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			total += fi.Size()
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].LastUsed.Before(list[j].LastUsed) })
	now := time.Now()
	accounted := map[string]bool{} // blobs whose size is already subtracted
	for _, ii := range list {
		doomed := o.All || (o.MaxAge > 0 && now.Sub(ii.LastUsed) > o.MaxAge) || (o.MaxBytes > 0 && total > o.MaxBytes)
		if !doomed {
			continue
		}
		free, release := c.tryExclusive(ii.Digest.Hex)
		if !free {
			ii.InUse = true
			rep.KeptInUse = append(rep.KeptInUse, ii.Image)
			continue
		}
		freed := ii.rootfs
		for _, b := range ii.blobs {
			if refs[b.Hex]--; refs[b.Hex] == 0 && !accounted[b.Hex] {
				accounted[b.Hex] = true
				freed += blobSize(b)
			}
		}
		if !o.DryRun {
			err = c.removeImage(ctx, ii.Digest)
		}
		release()
		if err != nil {
			return rep, &Error{Err: fmt.Errorf("removing %s: %w", ii.Digest, err)}
		}
		total -= freed
		rep.FreedBytes += freed
		rep.Removed = append(rep.Removed, ii.Image)
	}
	// Blobs nothing references any more (also debris of failed pulls).
	for _, e := range ents {
		if refs[e.Name()] > 0 {
			continue
		}
		if fi, err := e.Info(); err == nil && !accounted[e.Name()] {
			rep.FreedBytes += fi.Size()
			total -= fi.Size()
		}
		if !o.DryRun {
			os.Remove(filepath.Join(c.path(blobsDir), e.Name()))
		}
	}
	if !o.DryRun {
		c.cleanTmp(false, true)
		c.clearVerdicts()
	}
	rep.TotalBytes = total
	return rep, nil
}

// removeImage deletes an image's rootfs and its index entries. The caller
// holds the gc lock and the image's hold lock exclusively.
func (c *Cache) removeImage(ctx context.Context, h v1.Hash) error {
	if err := c.updateIndex(ctx, func(idx *v1.IndexManifest) bool {
		out := idx.Manifests[:0]
		for _, d := range idx.Manifests {
			if d.Digest != h {
				out = append(out, d)
			}
		}
		changed := len(out) != len(idx.Manifests)
		idx.Manifests = out
		return changed
	}); err != nil {
		return err
	}
	dir := c.path(rootfsDir, h.Hex)
	if _, err := os.Lstat(dir); err != nil {
		return nil
	}
	// Rename first so a crash mid-delete leaves debris in tmp/, never a
	// half-deleted rootfs that looks committed.
	trash := c.tempPath("trash")
	if err := os.Rename(dir, trash); err != nil {
		return err
	}
	return removeTree(trash)
}

// tempName matches the names the cache gives what it writes in tmp/
// (tempPath's kind-pid-token, Open's probe-N, a download's partial-<hex>):
// the only entries staleTmp may list.
var tempName = lazyre.New(`^((file|trash|debris|unpack|import|blob-[0-9a-f]{12})-[0-9]+-[0-9a-f]+|probe-[0-9]+|partial-[0-9a-f]{64})$`)

// staleTmp lists tmp/ entries whose writer is gone. Under the exclusive gc
// lock no pull runs anywhere (pulls hold it shared, in any pid namespace),
// so everything not written by this process is debris. Otherwise an entry
// is stale when the pid in its name is not running here and it has not
// changed for a minute (a writer in another pid namespace sharing the cache
// is not seen in /proc), or after a day; one without a pid (a download's
// partial file, which the next pull resumes) only after a day.
func (c *Cache) staleTmp(exclusive bool) []string {
	var out []string
	ents, _ := os.ReadDir(c.path(tmpDir))
	for _, e := range ents {
		if !tempName().MatchString(e.Name()) {
			continue // not written by a cache (tempPath, Open's probe): never removed
		}
		parts := strings.Split(e.Name(), "-")
		pid := -1
		if len(parts) >= 3 {
			if n, err := strconv.Atoi(parts[len(parts)-2]); err == nil {
				pid = n
			}
		}
		stale := true
		age := time.Duration(0)
		if fi, err := e.Info(); err == nil {
			age = time.Since(fi.ModTime())
		}
		switch {
		case pid == os.Getpid():
			stale = false
		case !exclusive && pid > 0:
			_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			stale = err != nil && age > time.Minute || age > 24*time.Hour
		case !exclusive:
			stale = age > 24*time.Hour
		}
		if stale {
			out = append(out, filepath.Join(c.path(tmpDir), e.Name()))
		}
	}
	return out
}

// cleanTmp removes (unless dry) and returns the stale tmp/ entries.
func (c *Cache) cleanTmp(dry, exclusive bool) []string {
	stale := c.staleTmp(exclusive)
	if !dry {
		for _, p := range stale {
			removeTree(p)
		}
	}
	return stale
}

// VerifyReport lists what Verify found. Corrupt entries are damage; Stale
// ones are leftovers of interrupted runs (never used, only wasting space).
type VerifyReport struct {
	Blobs, Rootfs int      // how many were checked
	Corrupt       []string // one line each: what and why
	Stale         []string
	Repaired      []string
}

// Verify re-hashes every blob and every rootfs against its marker. With
// repair it removes what is corrupt (a held rootfs is reported, not removed)
// and stale temporaries; the next Resolve fetches them again.
func (c *Cache) Verify(ctx context.Context, repair bool) (VerifyReport, error) {
	var rep VerifyReport
	// Reading alone may run beside pulls (they only add, by rename);
	// repairing removes, so it excludes them like prune.
	gl, err := c.lock(ctx, gcLock, !repair)
	if err != nil {
		return rep, &Error{Err: err}
	}
	defer unlock(gl)
	ents, _ := os.ReadDir(c.path(blobsDir))
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Blobs++
		p := filepath.Join(c.path(blobsDir), e.Name())
		got, err := hashFile(p, nil)
		if err == nil && got == e.Name() {
			continue
		}
		why := "content hashes to sha256:" + got
		if err != nil {
			why = err.Error()
		}
		rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("blob sha256:%s: %s", e.Name(), why))
		if repair && os.Remove(p) == nil {
			rep.Repaired = append(rep.Repaired, "removed blob sha256:"+e.Name())
		}
	}
	dirs, _ := os.ReadDir(c.path(rootfsDir))
	for _, e := range dirs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		rep.Rootfs++
		hex := e.Name()
		var why string
		if m, err := c.readMeta(hex); errors.Is(err, errLooseTree) {
			why = errLooseTree.Error() + "; --repair removes it, the next run extracts it again"
		} else if isUntrusted(err) {
			why = err.Error()
		} else if err != nil {
			why = "no readable marker: " + err.Error()
		} else if ts, err := treeHash(c.path(rootfsDir, hex, "rootfs"), nil); err != nil {
			why = err.Error()
		} else if ts.loose != "" {
			why = ts.loose
		} else if ts.hash != m.Tree {
			why = "content differs from its marker (" + ts.hash + ", marker " + m.Tree + ")"
		} else {
			continue
		}
		rep.Corrupt = append(rep.Corrupt, fmt.Sprintf("rootfs sha256:%s: %s", hex, why))
		if !repair {
			continue
		}
		h := v1.Hash{Algorithm: "sha256", Hex: hex}
		free, release := c.tryExclusive(hex)
		if !free {
			rep.Repaired = append(rep.Repaired, "rootfs sha256:"+hex+" is in use, not removed")
			continue
		}
		dir := c.path(rootfsDir, h.Hex)
		trash := c.tempPath("trash")
		if os.Rename(dir, trash) == nil {
			removeTree(trash)
			rep.Repaired = append(rep.Repaired, "removed rootfs sha256:"+hex)
		}
		release()
	}
	rep.Stale = c.cleanTmp(!repair, repair)
	return rep, nil
}
