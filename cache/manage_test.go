package cache

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/kptr-dev/kptr/imageref"
)

func TestPullPoliciesAndOffline(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/p:v1"
	d1 := push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "one")), ref)
	dir := t.TempDir()
	pushed := reg.requestCount()

	// Never and offline on an empty cache fail naming the image and why.
	for _, tc := range []struct {
		opt  Option
		want string
	}{{WithPullPolicy(PullNever), "Never"}, {WithOffline(true), "offline"}} {
		_, err := openTest(t, dir, tc.opt).Resolve(ctx, ref)
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ref) {
			t.Fatalf("%s: %v", tc.want, err)
		}
	}
	if reg.requestCount() != pushed {
		t.Fatalf("Never/offline touched the registry")
	}
	if _, err := openTest(t, dir).Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	// The tag moves on: IfNotPresent keeps the recorded digest, Always follows.
	d2 := push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "two")), ref)
	if b, _ := openTest(t, dir).Resolve(ctx, ref); b.Digest != d1 {
		t.Fatalf("IfNotPresent re-resolved: %s", b.Digest)
	}
	b, err := openTest(t, dir, WithPullPolicy(PullAlways)).Resolve(ctx, ref)
	if err != nil || b.Digest != d2 || readFile(t, filepath.Join(b.Rootfs, "arch")) != "two" {
		t.Fatalf("Always: %v %s", err, b.Digest)
	}
	// A tag the registry does not have.
	_, err = openTest(t, dir).Resolve(ctx, ref[:strings.LastIndex(ref, ":")]+":nope")
	if err == nil || !strings.Contains(err.Error(), ":nope") || !strings.Contains(err.Error(), "MANIFEST_UNKNOWN") {
		t.Fatalf("404: %v", err)
	}
	// Registry gone: cached images still resolve without the network.
	reg.Close()
	for _, o := range []Option{WithOffline(true), WithPullPolicy(PullIfNotPresent), WithPullPolicy(PullNever)} {
		if b, err := openTest(t, dir, o).Resolve(ctx, ref); err != nil || b.Digest != d2 {
			t.Fatalf("offline resolve: %v", err)
		}
	}
	_, err = openTest(t, dir, WithOffline(true)).Resolve(ctx, reg.Host+"/fn/other:v1")
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "fn/other:v1") {
		t.Fatalf("offline miss: %v", err)
	}
	// IfNotPresent miss against a dead registry: one line, exit code 3.
	_, err = openTest(t, dir, WithTimeout(2*time.Second)).Resolve(ctx, reg.Host+"/fn/other:v1")
	var ce *Error
	if !errors.As(err, &ce) || ce.ExitCode() != 3 || strings.Contains(err.Error(), "\n") {
		t.Fatalf("dead registry: %v", err)
	}
}

func TestConcurrentResolversFetchEachBlobOnce(t *testing.T) {
	reg := newTestRegistry(t)
	ls := []entry{}
	for i := 0; i < 3; i++ {
		ls = append(ls, file("f"+string(rune('a'+i)), strings.Repeat("x", 100000+i)))
	}
	img := image(t, false, HostPlatform().Architecture, gzipLayer(t, ls[0]), gzipLayer(t, ls[1]), gzipLayer(t, ls[2]))
	ref := reg.Host + "/fn/conc:v1"
	push(t, img, ref)
	dir := t.TempDir()
	var wg sync.WaitGroup
	roots := make([]string, 8)
	errs := make([]error, 8)
	for i := range roots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate Cache values: the cross-process locks do the work, not
			// the shared single-flight.
			c, err := Open(dir)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			b, err := c.Resolve(ctx, ref)
			roots[i], errs[i] = b.Rootfs, err
		}()
	}
	wg.Wait()
	for i := range roots {
		if errs[i] != nil || roots[i] != roots[0] {
			t.Fatalf("resolver %d: %v %s", i, errs[i], roots[i])
		}
	}
	layers, _ := img.Layers()
	for _, l := range layers {
		d, _ := l.Digest()
		if n := reg.blobGets(d); n != 1 {
			t.Fatalf("blob %s fetched %d times", d, n)
		}
	}
	cfg, _ := img.ConfigName()
	if n := reg.blobGets(cfg); n != 1 {
		t.Fatalf("config fetched %d times", n)
	}

	// One Cache, many goroutines: single-flight.
	img2 := image(t, false, HostPlatform().Architecture, gzipLayer(t, file("g", strings.Repeat("g", 300000))))
	ref2 := reg.Host + "/fn/conc2:v1"
	push(t, img2, ref2)
	c := openTest(t, "")
	for i := range roots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := c.Resolve(ctx, ref2)
			roots[i], errs[i] = b.Rootfs, err
		}()
	}
	wg.Wait()
	for i := range roots {
		if errs[i] != nil || roots[i] != roots[0] {
			t.Fatalf("goroutine %d: %v %s", i, errs[i], roots[i])
		}
	}
	l2, _ := img2.Layers()
	d2, _ := l2[0].Digest()
	if n := reg.blobGets(d2); n != 1 {
		t.Fatalf("single-flight: layer fetched %d times", n)
	}
}

func TestPruneAndHolds(t *testing.T) {
	reg := newTestRegistry(t)
	dir := t.TempDir()
	var refs []string
	for _, s := range []string{"a", "b", "c"} {
		ref := reg.Host + "/fn/" + s + ":v1"
		push(t, image(t, false, HostPlatform().Architecture, gzipLayer(t, file("big", strings.Repeat(s, 200000))), layerWith(t, s)), ref)
		c := openTest(t, dir)
		if _, err := c.Resolve(ctx, ref); err != nil {
			t.Fatal(err)
		}
		c.Close()
		refs = append(refs, ref)
	}
	// b is in use by a "running process" (this Cache, never closed here).
	holder := openTest(t, dir)
	if _, err := holder.Resolve(ctx, refs[1]); err != nil {
		t.Fatal(err)
	}
	c := openTest(t, dir)
	for i, ref := range refs { // age them apart: a oldest
		old := time.Now().Add(-time.Duration(3-i) * time.Hour)
		os.Chtimes(c.metaPath(mustLookup(t, c, ref)), old, old)
	}
	list, _ := c.List(ctx)
	if len(list) != 3 {
		t.Fatalf("list: %+v", list)
	}
	var inUse int
	for _, im := range list {
		if im.InUse {
			inUse++
		}
	}
	if inUse != 1 {
		t.Fatalf("%d images in use, want 1", inUse)
	}
	// Older than 90 minutes: a and b; b is held, so only a goes.
	rep, err := c.Prune(ctx, PruneOptions{MaxAge: 90 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || rep.Removed[0].Refs[0] != refs[0] || len(rep.KeptInUse) != 1 || rep.FreedBytes < 200000 {
		t.Fatalf("prune: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(holderRoot(t, holder, refs[1]), "big")); err != nil {
		t.Fatalf("held image damaged: %v", err)
	}
	// By size: everything not held goes.
	rep, err = c.Prune(ctx, PruneOptions{MaxBytes: 1})
	if err != nil || len(rep.Removed) != 1 || rep.Removed[0].Refs[0] != refs[2] {
		t.Fatalf("prune by size: %+v %v", rep, err)
	}
	holder.Close()
	rep, err = c.Prune(ctx, PruneOptions{All: true})
	if err != nil || len(rep.Removed) != 1 {
		t.Fatalf("prune all: %+v %v", rep, err)
	}
	if n := dirEntries(c.path(blobsDir)); len(n) != 0 {
		t.Fatalf("blobs left: %v", n)
	}
	if n := dirEntries(c.path(rootfsDir)); len(n) != 0 {
		t.Fatalf("rootfs left: %v", n)
	}
	// And the cache works again afterwards.
	if _, err := openTest(t, dir).Resolve(ctx, refs[0]); err != nil {
		t.Fatal(err)
	}
}

func mustLookup(t *testing.T, c *Cache, ref string) string {
	d, _, ok := c.lookup(ref, HostPlatform())
	if !ok {
		t.Fatalf("%s not recorded", ref)
	}
	return d.Digest.Hex
}

func holderRoot(t *testing.T, c *Cache, ref string) string {
	return c.path(rootfsDir, mustLookup(t, c, ref), "rootfs")
}

func TestVerifyFindsAndRepairsCorruption(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/v:v1"
	img := image(t, false, HostPlatform().Architecture, gzipLayer(t, file("etc/a", "a"), file("etc/b", "b")))
	push(t, img, ref)
	c := openTest(t, "")
	b, err := c.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	rep, err := c.Verify(ctx, false)
	if err != nil || len(rep.Corrupt) != 0 || rep.Blobs != 3 || rep.Rootfs != 1 {
		t.Fatalf("clean cache: %+v %v", rep, err)
	}
	// Debris of a killed pull (its pid is gone) is stale, not corrupt.
	debris := c.path(tmpDir, "blob-0123456789ab-999999999-deadbeef")
	os.WriteFile(debris, []byte("half a blob"), 0o644)
	if rep, _ := c.Verify(ctx, false); len(rep.Stale) != 0 {
		t.Fatalf("debris of a minute ago is not yet stale (a writer in another pid namespace): %+v", rep)
	}
	old := time.Now().Add(-2 * time.Minute)
	os.Chtimes(debris, old, old)
	if rep, _ := c.Verify(ctx, false); len(rep.Stale) != 1 || len(rep.Corrupt) != 0 {
		t.Fatalf("debris: %+v", rep)
	}
	if _, err := c.Prune(ctx, PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(debris); !os.IsNotExist(err) {
		t.Fatalf("prune left debris: %v", err)
	}
	c2 := openTest(t, c.Dir())
	if b2, err := c2.Resolve(ctx, ref); err != nil || b2.Rootfs != b.Rootfs {
		t.Fatalf("prune without limits removed an image: %v", err)
	}
	c2.Close()
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	os.WriteFile(c.blobPath(ld), []byte("garbage"), 0o644)
	os.WriteFile(filepath.Join(b.Rootfs, "etc/a"), []byte("tampered"), 0o644)
	rep, _ = c.Verify(ctx, false)
	if len(rep.Corrupt) != 2 || !strings.Contains(strings.Join(rep.Corrupt, "\n"), ld.String()) {
		t.Fatalf("corruption not found: %+v", rep)
	}
	rep, _ = c.Verify(ctx, true)
	if len(rep.Repaired) != 2 {
		t.Fatalf("repair: %+v", rep)
	}
	if rep, _ = c.Verify(ctx, false); len(rep.Corrupt) != 0 {
		t.Fatalf("after repair: %+v", rep)
	}
	// The next resolve fetches what was removed.
	b, err = openTest(t, c.Dir()).Resolve(ctx, ref)
	if err != nil || readFile(t, filepath.Join(b.Rootfs, "etc/a")) != "a" {
		t.Fatalf("after repair resolve: %v", err)
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/x:v1"
	d := push(t, image(t, true, HostPlatform().Architecture, gzipLayer(t, file("x", "x")), zstdLayer(t, file("y", "y"))), ref)
	src := openTest(t, "")
	if _, err := src.Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := src.Export(ctx, []string{ref}, filepath.Join(out, "layout"), false, nil); err != nil {
		t.Fatal(err)
	}
	// A second image exported into the same layout joins the first.
	ref2 := reg.Host + "/fn/y:v1"
	d2 := push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "second")), ref2)
	if _, err := src.Resolve(ctx, ref2); err != nil {
		t.Fatal(err)
	}
	if err := src.Export(ctx, []string{ref2}, filepath.Join(out, "layout"), false, nil); err != nil {
		t.Fatal(err)
	}
	if err := src.Export(ctx, []string{ref}, filepath.Join(out, "img.tar"), true, nil); err != nil {
		t.Fatal(err)
	}
	reg.Close()
	for _, p := range []string{"layout", "img.tar"} {
		dst := openTest(t, "", WithOffline(true))
		refs, err := dst.Import(ctx, filepath.Join(out, p))
		if err != nil || len(refs) < 1 || refs[0] != ref {
			t.Fatalf("%s: import %v %v", p, refs, err)
		}
		if p == "layout" {
			if len(refs) != 2 || refs[1] != ref2 {
				t.Fatalf("layout import: %v", refs)
			}
			if b, err := dst.Resolve(ctx, ref2); err != nil || b.Digest != d2 {
				t.Fatalf("second image: %v", err)
			}
		}
		b, err := dst.Resolve(ctx, ref)
		if err != nil || b.Digest != d || readFile(t, filepath.Join(b.Rootfs, "y")) != "y" {
			t.Fatalf("%s: resolve after import: %v %s", p, err, b.Digest)
		}
	}
	if err := src.Export(ctx, []string{reg.Host + "/fn/missing:v1"}, filepath.Join(out, "m"), false, nil); !errors.Is(err, ErrNotCached) {
		t.Fatalf("export of a missing image: %v", err)
	}
}

// A registry behind basic auth: credentials come from the keychain and never
// appear in errors.
func TestKeychainAuthAndNoCredentialsInErrors(t *testing.T) {
	inner := newTestRegistry(t)
	ref := inner.Host + "/fn/private:v1"
	push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "secret")), ref)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != "robot" || p != "s3cr3t-pass" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		inner.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	mirror := WithMirrors(imageref.Mirror{From: inner.Host, To: host})
	good := authn.NewMultiKeychain(staticKeychain{host, "robot", "s3cr3t-pass"})
	if _, err := openTest(t, "", mirror, WithKeychain(good)).Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	bad := staticKeychain{host, "robot", "wr0ng-pass"}
	_, err := openTest(t, "", mirror, WithKeychain(bad)).Resolve(ctx, ref)
	if err == nil || strings.Contains(err.Error(), "wr0ng-pass") || !strings.Contains(err.Error(), "UNAUTHORIZED") ||
		!strings.HasPrefix(err.Error(), ref+": ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("401: %v", err)
	}
	_, err = openTest(t, "", mirror).Resolve(ctx, ref)
	if err == nil || !strings.Contains(err.Error(), ref) {
		t.Fatalf("anonymous: %v", err)
	}
}

type staticKeychain struct{ host, user, pass string }

func (k staticKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() != k.host {
		return authn.Anonymous, nil
	}
	return &authn.Basic{Username: k.user, Password: k.pass}, nil
}

var _ = name.ParseReference
var _ = remote.Write
