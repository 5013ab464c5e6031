package cache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/test/hostileregistry"
)

// startHostile runs a hostile registry for one test.
func startHostile(t *testing.T, o hostileregistry.Options) *hostileregistry.Server {
	t.Helper()
	s, err := hostileregistry.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// bounded runs f and checks that it took at most d and allocated at most
// maxAlloc bytes in all (TotalAlloc: every allocation counts, even those
// already collected, so it bounds the peak too).
func bounded(t *testing.T, d time.Duration, maxAlloc uint64, f func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*d)
	defer cancel()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	start := time.Now()
	err := f(ctx)
	took := time.Since(start)
	goruntime.ReadMemStats(&after)
	if took > d {
		t.Errorf("took %v, want at most %v (%v)", took, d, err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > maxAlloc {
		t.Errorf("allocated %d MiB, want at most %d MiB", a>>20, maxAlloc>>20)
	}
	return err
}

// wantRegistryError checks a failed Resolve: one line, exit code 3, naming
// the image, the registry and the cause.
func wantRegistryError(t *testing.T, err error, image, host, cause string) {
	t.Helper()
	t.Log(err)
	var ce *Error
	if err == nil || !errors.As(err, &ce) || ce.ExitCode() != 3 {
		t.Fatalf("want a cache error with exit code 3, got %v", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || (image != "" && !strings.HasPrefix(msg, image+": ")) || !strings.Contains(msg, "registry "+host) || !strings.Contains(msg, cause) {
		t.Fatalf("error %q: want one line naming %s, registry %s and %q", msg, image, host, cause)
	}
}

// partials checks the cache's temporary area after a failed pull: nothing
// but partial downloads, each at most max bytes; it returns their sizes.
func partials(t *testing.T, c *Cache, max int64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range dirEntries(c.path(tmpDir)) {
		st, err := os.Stat(c.path(tmpDir, n))
		if err != nil || !strings.HasPrefix(n, partialPrefix) || st.Size() > max {
			t.Fatalf("tmp/%s left behind (%v bytes, at most %d allowed)", n, st.Size(), max)
		}
		out[n] = st.Size()
	}
	if n := dirEntries(c.path(rootfsDir)); len(n) != 0 {
		t.Fatalf("rootfs committed: %v", n)
	}
	return out
}

// A manifest that declares a 1 TiB layer is refused before a byte of the
// layer is requested (issue 9: 61 GB written in 150 s).
func TestHostileRegistryHugeLayerRefusedBeforeFetching(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{})
	c := openTest(t, "")
	err := bounded(t, 5*time.Second, 64<<20, func(ctx context.Context) error {
		_, err := c.Resolve(ctx, s.Ref(hostileregistry.Huge))
		return err
	})
	wantRegistryError(t, err, s.Ref(hostileregistry.Huge), s.Host, "declares layer 1 of 1099511627776 bytes")
	if !strings.Contains(err.Error(), "4 GiB extraction limit") {
		t.Errorf("error does not name the limit: %v", err)
	}
	if n := len(s.Ranges(hostileregistry.Huge)); n != 0 || s.BlobBytes(hostileregistry.Huge) != 0 {
		t.Fatalf("layer requested %d times, %d bytes sent", n, s.BlobBytes(hostileregistry.Huge))
	}
	partials(t, c, 0)
	if len(dirEntries(c.path(tmpDir))) != 0 {
		t.Fatal("partial left")
	}
}

// An endless blob is read up to its declared size and no further; the
// digest check then fails and the partial is removed.
func TestHostileRegistryEndlessBlobCutAtDeclaredSize(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{})
	c := openTest(t, "")
	err := bounded(t, 10*time.Second, 64<<20, func(ctx context.Context) error {
		_, err := c.Resolve(ctx, s.Ref(hostileregistry.Endless))
		return err
	})
	wantRegistryError(t, err, s.Ref(hostileregistry.Endless), "", "content does not match its digest")
	if got := partials(t, c, s.LayerSize(hostileregistry.Endless)); len(got) != 0 {
		t.Fatalf("wrong partial kept: %v", got)
	}
	if n := dirEntries(c.path(blobsDir)); len(n) != 2 { // manifest and config only
		t.Fatalf("blobs: %v", n)
	}
}

// A blob longer than declared: the declared bytes are right, the rest is
// never read, the pull succeeds with exactly the declared blob.
func TestHostileRegistryLongerBlobReadOnlyToDeclaredSize(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{})
	c := openTest(t, "")
	var b bundle.Bundle
	err := bounded(t, 10*time.Second, 64<<20, func(ctx context.Context) (err error) {
		b, err = c.Resolve(ctx, s.Ref(hostileregistry.Longer))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(b.Rootfs, "hello")); !strings.Contains(got, "hostile registry") {
		t.Fatalf("rootfs: %q", got)
	}
	for _, n := range dirEntries(c.path(blobsDir)) {
		st, _ := os.Stat(c.path(blobsDir, n))
		if st.Size() > s.LayerSize(hostileregistry.Longer) && st.Size() > 4096 {
			t.Fatalf("blob %s has %d bytes", n, st.Size())
		}
	}
	if n := dirEntries(c.path(tmpDir)); len(n) != 0 {
		t.Fatalf("tmp: %v", n)
	}
}

// Manifests are capped at 4 MiB, whether the registry declares more or just
// keeps sending.
func TestHostileRegistryManifestCapped(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{})
	for _, tc := range []struct{ repo, cause string }{
		{hostileregistry.BigManifest, "manifest larger than the 4 MiB limit"},
		{hostileregistry.BigManifestDeclared, "manifest of 1073741824 bytes is over the 4 MiB limit"},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			c := openTest(t, "")
			err := bounded(t, 10*time.Second, 48<<20, func(ctx context.Context) error {
				_, err := c.Resolve(ctx, s.Ref(tc.repo))
				return err
			})
			wantRegistryError(t, err, s.Ref(tc.repo), s.Host, tc.cause)
			partials(t, c, 0)
		})
	}
}

// Ten million tags (issue 9: 2.26 GB) fail fast, paginated or not, for a
// Kptfile `tag:` constraint.
func TestHostileRegistryTagListCapped(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{})
	c := openTest(t, "")
	for _, tc := range []struct{ repo, cause string }{
		{hostileregistry.ManyTags, "has more than 100000 tags"},
		{hostileregistry.ManyTagsFlat, "tag list larger than the 8 MiB limit"},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			err := bounded(t, 20*time.Second, 256<<20, func(ctx context.Context) error {
				_, err := c.ResolveConstraint(ctx, s.Repository(tc.repo), "~0.5")
				return err
			})
			wantRegistryError(t, err, s.Repository(tc.repo), s.Host, tc.cause)
			if pages := s.TagPages(tc.repo); pages > maxTags/100+2 {
				t.Errorf("%d pages read", pages)
			}
		})
	}
}

// Registries that stall: one that accepts connections and never answers,
// one that never answers a manifest request, one that trickles the manifest
// and one that trickles a layer, a byte every 2s. Each fails within a few
// timeouts (1s here), naming the registry; a trickled layer leaves at most
// a partial no longer than its declared size.
func TestHostileRegistryStallsTimeOut(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{TrickleEvery: 2 * time.Second})
	for _, tc := range []struct{ ref, host, cause string }{
		{s.Blackhole + "/fn/x:v1", s.Blackhole, "no answer within 1s (--registry-timeout)"},
		{s.Ref(hostileregistry.Stall), s.Host, "no answer within 1s (--registry-timeout)"},
		{s.Ref(hostileregistry.Trickle), s.Host, "stalled: less than 1 KiB of the manifest in 1s (--registry-timeout)"},
		{s.Ref(hostileregistry.TrickleBlob), s.Host, "stalled: less than 1 KiB of the blob in 1s (--registry-timeout)"},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			c := openTest(t, "", WithTimeout(time.Second))
			err := bounded(t, 8*time.Second, 64<<20, func(ctx context.Context) error {
				_, err := c.Resolve(ctx, tc.ref)
				return err
			})
			wantRegistryError(t, err, tc.ref, tc.host, tc.cause)
			partials(t, c, s.LayerSize(hostileregistry.TrickleBlob))
		})
	}
}

// A layer download cut after 256 KiB continues where it stopped (HTTP
// Range), within the same pull; progress says where it resumed.
func TestHostileRegistryCutDownloadResumes(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{CutAfter: 256 << 10})
	p := newCountingProgress()
	c := openTest(t, "", WithProgress(p))
	b, err := c.Resolve(ctx, s.Ref(hostileregistry.Throttled))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Ranges(hostileregistry.Throttled); len(got) != 2 || got[0] != "" || got[1] != "bytes=262144-" {
		t.Fatalf("layer requests: %q, want a full one then bytes=262144-", got)
	}
	if b.Pulled <= 0 {
		t.Fatalf("Pulled = %v for a pull", b.Pulled)
	}
	size := s.LayerSize(hostileregistry.Throttled)
	for d, n := range p.bytes {
		if n != size || p.resumed[d] != 0 {
			t.Fatalf("progress: %d of %d bytes, resumed at %d", n, size, p.resumed[d])
		}
	}
	if n := dirEntries(c.path(tmpDir)); len(n) != 0 {
		t.Fatalf("tmp: %v", n)
	}
	// Cached now: no pull time.
	if b, err := c.Resolve(ctx, s.Ref(hostileregistry.Throttled)); err != nil || b.Pulled != 0 {
		t.Fatalf("second resolve: Pulled %v, %v", b.Pulled, err)
	}
}

// A partial left by an interrupted pull (kill -9) is continued by the next
// one; a partial that is not a prefix of the blob fails the digest check,
// is removed, and the pull after that starts over and succeeds.
func TestInterruptedDownloadResumesAcrossRuns(t *testing.T) {
	s := startHostile(t, hostileregistry.Options{CutAfter: 1 << 30}) // no cuts
	layer := layerOf(t, s, hostileregistry.Throttled)
	blob := fetchLayer(t, s, hostileregistry.Throttled, layer)

	dir := t.TempDir()
	c := openTest(t, dir)
	part := c.path(tmpDir, partialPrefix+layer.Hex)
	if err := os.WriteFile(part, blob[:300000], 0o644); err != nil {
		t.Fatal(err)
	}
	p := newCountingProgress()
	c = openTest(t, dir, WithProgress(p))
	if _, err := c.Resolve(ctx, s.Ref(hostileregistry.Throttled)); err != nil {
		t.Fatal(err)
	}
	if got := s.Ranges(hostileregistry.Throttled); len(got) != 2 || got[1] != "bytes=300000-" {
		t.Fatalf("layer requests %q: want the resumed one to ask for bytes=300000-", got)
	}
	if p.resumed[layer.String()] != 300000 || p.bytes[layer.String()] != int64(len(blob))-300000 {
		t.Fatalf("progress: resumed at %d, %d bytes", p.resumed[layer.String()], p.bytes[layer.String()])
	}

	// A wrong prefix: removed at the digest check, then a clean pull.
	dir = t.TempDir()
	c = openTest(t, dir)
	junk := append([]byte(nil), blob[:300000]...)
	junk[100] ^= 0xff
	os.WriteFile(c.path(tmpDir, partialPrefix+layer.Hex), junk, 0o644)
	_, err := c.Resolve(ctx, s.Ref(hostileregistry.Throttled))
	wantRegistryError(t, err, s.Ref(hostileregistry.Throttled), "", "content does not match its digest")
	if got := partials(t, c, 0); len(got) != 0 {
		t.Fatalf("wrong partial kept: %v", got)
	}
	if _, err := c.Resolve(ctx, s.Ref(hostileregistry.Throttled)); err != nil {
		t.Fatal(err)
	}
	// A partial longer than the declared size is never continued.
	dir = t.TempDir()
	c = openTest(t, dir)
	os.WriteFile(c.path(tmpDir, partialPrefix+layer.Hex), append(blob, 'x'), 0o644)
	if _, err := c.Resolve(ctx, s.Ref(hostileregistry.Throttled)); err != nil {
		t.Fatal(err)
	}
}

// Prune and verify --repair remove partial downloads.
func TestPruneAndRepairRemovePartials(t *testing.T) {
	for _, name := range []string{"prune", "verify --repair"} {
		t.Run(name, func(t *testing.T) {
			c := openTest(t, "")
			part := c.path(tmpDir, partialPrefix+strings.Repeat("ab", 32))
			if err := os.WriteFile(part, []byte("half a blob"), 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			if name == "prune" {
				_, err = c.Prune(ctx, PruneOptions{})
			} else {
				_, err = c.Verify(ctx, true)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(part); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("partial survived %s: %v", name, err)
			}
		})
	}
}

// A cache that someone else owns, or that others can write, is refused
// (issue 9: with HOME unset every user shared /tmp/kptr-cache).
func TestCacheDirectoryOwnership(t *testing.T) {
	open := func(dir string) error {
		c, err := Open(dir)
		if err == nil {
			c.Close()
		}
		return err
	}
	shared := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(shared, 0o755)
	os.Chmod(shared, 0o777)
	err := open(shared)
	var ce *Error
	if err == nil || !errors.As(err, &ce) || ce.ExitCode() != 3 || !strings.Contains(err.Error(), shared+" is writable by group or others (mode 0777)") {
		t.Fatalf("world-writable cache: %v", err)
	}
	if n := dirEntries(shared); len(n) != 0 {
		t.Fatalf("wrote into a refused cache: %v", n)
	}
	// A layout directory someone else could write is refused too.
	own := t.TempDir()
	if err := open(own); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(own, "rootfs"), 0o775)
	if err := open(own); err == nil || !strings.Contains(err.Error(), "rootfs is writable by group or others") {
		t.Fatalf("group-writable rootfs/: %v", err)
	}
	os.Chmod(filepath.Join(own, "rootfs"), 0o755)

	if os.Geteuid() != 0 {
		t.Skip("handing a directory to another user needs root")
	}
	other := filepath.Join(t.TempDir(), "other")
	os.Mkdir(other, 0o755)
	if err := os.Chown(other, 999, 999); err != nil {
		t.Fatal(err)
	}
	if err := open(other); err == nil || !strings.Contains(err.Error(), "owned by uid 999, not by the current user (uid 0) or root") {
		t.Fatalf("cache of uid 999 opened by root: %v", err)
	}
}

// layerOf is the digest of repository r's layer.
func layerOf(t *testing.T, s *hostileregistry.Server, r string) v1.Hash {
	t.Helper()
	c := openTest(t, "", WithOffline(false))
	d, err := c.remoteManifest(ctx, mustRef(t, c, s.Ref(r)))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := v1.ParseManifest(strings.NewReader(readFile(t, c.blobPath(d.Digest))))
	if err != nil {
		t.Fatal(err)
	}
	return mf.Layers[0].Digest
}

func mustRef(t *testing.T, c *Cache, ref string) imageRef {
	t.Helper()
	ir, err := c.parseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	return ir
}

// fetchLayer downloads r's layer through a throwaway cache.
func fetchLayer(t *testing.T, s *hostileregistry.Server, r string, h v1.Hash) []byte {
	t.Helper()
	c := openTest(t, "")
	if _, err := c.Resolve(ctx, s.Ref(r)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(c.blobPath(h))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
