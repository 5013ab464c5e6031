package cache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/kptr-dev/kptr/imageref"
)

var ctx = context.Background()

func TestResolvePullsUnpacksAndRecords(t *testing.T) {
	reg := newTestRegistry(t)
	base := gzipLayer(t, dir("bin"), file("bin/sh", "shell"), dir("etc"), file("etc/passwd", "root:x:0:0::/:/bin/sh\n"))
	fn := gzipLayer(t, dir("usr/local/bin"), entry{name: "usr/local/bin/function", body: "#!fn", typ: '0', mode: 0o755})
	img := image(t, false, "amd64", base, fn)
	ref := reg.Host + "/fn/set-labels:v1"
	want := push(t, img, ref)

	c := openTest(t, "")
	b, err := c.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if b.Digest != want || b.Ref != ref {
		t.Fatalf("bundle %s %s, want %s %s", b.Ref, b.Digest, ref, want)
	}
	if got := readFile(t, filepath.Join(b.Rootfs, "usr/local/bin/function")); got != "#!fn" {
		t.Fatalf("function content %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(b.Rootfs, "usr/local/bin/function")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("function mode %v", fi.Mode())
	}
	// Mount points exist, so no runtime ever has to create one in the cache.
	for _, m := range []string{"proc", "dev", "sys", "tmp"} {
		if fi, err := os.Lstat(filepath.Join(b.Rootfs, m)); err != nil || !fi.IsDir() {
			t.Fatalf("mount point /%s: %v", m, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(b.Rootfs, "tmp")); fi.Mode() != os.ModeDir|0o755 {
		t.Fatalf("/tmp mode %v, want 0755 (each run's /tmp is its sandbox's own)", fi.Mode())
	}
	if len(b.Config.Entrypoint) != 1 || b.Config.Entrypoint[0] != "function" {
		t.Fatalf("config %+v", b.Config)
	}
	// Everything came once; a second resolve does not touch the registry.
	for _, l := range []v1.Layer{base, fn} {
		d, _ := l.Digest()
		if n := reg.blobGets(d); n != 1 {
			t.Fatalf("layer %s fetched %d times", d, n)
		}
	}
	before := reg.requestCount()
	c2 := openTest(t, c.Dir())
	b2, err := c2.Resolve(ctx, ref)
	if err != nil || b2.Rootfs != b.Rootfs {
		t.Fatalf("second resolve: %v %s", err, b2.Rootfs)
	}
	if reg.requestCount() != before {
		t.Fatalf("cached resolve made %d registry requests", reg.requestCount()-before)
	}
	// The cache is an OCI layout go-containerregistry reads, with the ref annotated.
	lp, err := layout.FromPath(c.Dir())
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, _ := ii.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[annRefName] != ref || im.Manifests[0].Digest != want {
		t.Fatalf("index.json %+v", im.Manifests)
	}
	li, err := lp.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := li.Layers(); err != nil || len(ls) != 2 {
		t.Fatalf("layout image layers %v %v", len(ls), err)
	}
	if _, at, ok := c.lookup(ref, HostPlatform()); !ok || at.IsZero() {
		t.Fatalf("resolution time not recorded")
	}
	if l, err := c.List(ctx); err != nil || len(l) != 1 || l[0].Resolved.IsZero() || l[0].Refs[0] != ref || !l[0].Unpacked || !l[0].InUse {
		t.Fatalf("list: %+v %v", l, err)
	}
	if ents := dirEntries(c.path(tmpDir)); len(ents) != 0 {
		t.Fatalf("tmp not empty: %v", ents)
	}
}

func TestSharedLayersStoredOnce(t *testing.T) {
	reg := newTestRegistry(t)
	base := gzipLayer(t, file("etc/os-release", "base"))
	a := image(t, false, "amd64", base, gzipLayer(t, file("a", "a")))
	b := image(t, false, "amd64", base, gzipLayer(t, file("b", "b")))
	push(t, a, reg.Host+"/fn/a:v1")
	push(t, b, reg.Host+"/fn/b:v1")
	c := openTest(t, "")
	for _, r := range []string{"a:v1", "b:v1"} {
		if _, err := c.Resolve(ctx, reg.Host+"/fn/"+r); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := base.Digest()
	if n := reg.blobGets(d); n != 1 {
		t.Fatalf("shared base layer fetched %d times", n)
	}
	// 2 manifests + 2 configs + 3 layers.
	if n := len(dirEntries(c.path(blobsDir))); n != 7 {
		t.Fatalf("%d blobs stored, want 7", n)
	}
}

func TestPrefixDigestAndMirrors(t *testing.T) {
	reg := newTestRegistry(t)
	img := image(t, true, "amd64", gzipLayer(t, file("x", "1")))
	d := push(t, img, reg.Host+"/kpt-fn/set-labels:v0.1.5")

	// Bare name → prefix.
	c := openTest(t, "", WithImagePrefix(reg.Host+"/kpt-fn/"))
	b, err := c.Resolve(ctx, "set-labels:v0.1.5")
	if err != nil || b.Digest != d || b.Ref != reg.Host+"/kpt-fn/set-labels:v0.1.5" {
		t.Fatalf("prefix: %v %+v", err, b)
	}
	// Digest reference used as is.
	b, err = c.Resolve(ctx, reg.Host+"/kpt-fn/set-labels@"+d.String())
	if err != nil || b.Digest != d {
		t.Fatalf("digest: %v %+v", err, b)
	}
	// Upstream names rewritten by mirrors: host-only and path-prefix forms.
	for _, m := range []string{"gcr.io=" + reg.Host, "gcr.io/kpt-fn=" + reg.Host + "/kpt-fn"} {
		mm, err := imageref.ParseMirror(m)
		if err != nil {
			t.Fatal(err)
		}
		c := openTest(t, "", WithMirrors(mm))
		b, err := c.Resolve(ctx, "gcr.io/kpt-fn/set-labels:v0.1.5")
		if err != nil || b.Digest != d || b.Ref != "gcr.io/kpt-fn/set-labels:v0.1.5" {
			t.Fatalf("mirror %s: %v %+v", m, err, b)
		}
		if _, _, ok := c.lookup("gcr.io/kpt-fn/set-labels:v0.1.5", HostPlatform()); !ok {
			t.Fatalf("mirror %s: resolution not recorded under the upstream name", m)
		}
	}
	if _, err := imageref.ParseMirror("gcr.io"); err == nil {
		t.Fatal("mirror without = accepted")
	}
}

func TestUnparsableReferenceIsUsageError(t *testing.T) {
	c := openTest(t, "")
	_, err := c.Resolve(ctx, "gcr.io/kpt-fn/Bad Name:v1")
	var ce *Error
	if !errors.As(err, &ce) || ce.ExitCode() != 2 || !strings.Contains(err.Error(), "Bad Name") {
		t.Fatalf("got %v", err)
	}
}

func layerWith(t *testing.T, content string) v1.Layer {
	return gzipLayer(t, file("arch", content))
}

func TestImageShapes(t *testing.T) {
	reg := newTestRegistry(t)
	host := HostPlatform()
	other := "arm64"
	if host.Architecture == "arm64" {
		other = "amd64"
	}
	hostImg := func(oci bool) v1.Image { return image(t, oci, host.Architecture, layerWith(t, "host")) }
	otherImg := func(oci bool) v1.Image { return image(t, oci, other, layerWith(t, "other")) }

	// Docker manifest list amd64 + arm64.
	dl := mutate.IndexMediaType(empty.Index, types.DockerManifestList)
	dl = mutate.AppendManifests(dl,
		mutate.IndexAddendum{Add: otherImg(false), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}},
		mutate.IndexAddendum{Add: hostImg(false), Descriptor: v1.Descriptor{Platform: &host}})
	pushIndex(t, dl, reg.Host+"/fn/list:v1")

	// OCI index with buildx attestation entries (unknown/unknown).
	att := image(t, true, "unknown", layerWith(t, "attestation"))
	oi := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	oi = mutate.AppendManifests(oi,
		mutate.IndexAddendum{Add: att, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{"vnd.docker.reference.type": "attestation-manifest"}}},
		mutate.IndexAddendum{Add: hostImg(true), Descriptor: v1.Descriptor{Platform: &host}},
		mutate.IndexAddendum{Add: otherImg(true), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}})
	pushIndex(t, oi, reg.Host+"/fn/buildx:v1")

	// Only another platform plus an attestation: error lists the real platforms only.
	oo := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: att, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}},
		mutate.IndexAddendum{Add: otherImg(true), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}})
	pushIndex(t, oo, reg.Host+"/fn/foreign:v1")

	push(t, hostImg(false), reg.Host+"/fn/single:v1")

	// Several layers with whiteouts, an opaque directory, zstd and plain layers.
	l1 := gzipLayer(t, dir("etc"), file("etc/keep", "k"), file("etc/gone", "g"), dir("opq"), file("opq/lower", "l"), dir("opq/sub"), file("opq/sub/deep", "d"), symlink("link", "etc/keep"))
	l2 := zstdLayer(t, file("etc/.wh.gone", ""), dir("opq"), file("opq/.wh..wh..opq", ""), file("opq/upper", "u"), file(".wh.link", ""))
	l3 := plainLayer(t, file("etc/added", "a"), dir("opq/sub"), file("opq/sub/new", "n"))
	push(t, image(t, true, host.Architecture, l1, l2, l3), reg.Host+"/fn/layers:v1")

	c := openTest(t, "")
	for _, r := range []string{"list:v1", "buildx:v1", "single:v1"} {
		b, err := c.Resolve(ctx, reg.Host+"/fn/"+r)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if got := readFile(t, filepath.Join(b.Rootfs, "arch")); got != "host" {
			t.Fatalf("%s: picked the %q image", r, got)
		}
	}
	// Another platform on request, recorded beside the host's.
	oc := openTest(t, c.Dir(), WithPlatform(v1.Platform{OS: "linux", Architecture: other}))
	for _, r := range []string{"list:v1", "buildx:v1"} {
		b, err := oc.Resolve(ctx, reg.Host+"/fn/"+r)
		if err != nil || readFile(t, filepath.Join(b.Rootfs, "arch")) != "other" {
			t.Fatalf("%s for %s: %v", r, other, err)
		}
		if b, _ := c.Resolve(ctx, reg.Host+"/fn/"+r); readFile(t, filepath.Join(b.Rootfs, "arch")) != "host" {
			t.Fatalf("%s: host resolution lost after the %s one", r, other)
		}
	}
	if _, err := oc.Resolve(ctx, reg.Host+"/fn/single:v1"); err == nil {
		t.Fatalf("single-arch host image resolved for %s", other)
	}
	_, err := c.Resolve(ctx, reg.Host+"/fn/foreign:v1")
	if err == nil || !strings.Contains(err.Error(), "linux/"+other) || strings.Contains(err.Error(), "unknown/unknown") ||
		!strings.Contains(err.Error(), "fn/foreign:v1") {
		t.Fatalf("foreign-only index: %v", err)
	}

	b, err := c.Resolve(ctx, reg.Host+"/fn/layers:v1")
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Lstat(filepath.Join(b.Rootfs, p)); return err == nil }
	for _, p := range []string{"etc/keep", "etc/added", "opq/upper", "opq/sub/new"} {
		if !exists(p) {
			t.Errorf("%s missing", p)
		}
	}
	for _, p := range []string{"etc/gone", "opq/lower", "opq/sub/deep", "link", "etc/.wh.gone", "opq/.wh..wh..opq"} {
		if exists(p) {
			t.Errorf("%s should be gone", p)
		}
	}
}

func TestForeignSingleArchImageRefused(t *testing.T) {
	reg := newTestRegistry(t)
	push(t, image(t, false, "s390x", layerWith(t, "x")), reg.Host+"/fn/s390x:v1")
	c := openTest(t, "")
	if _, err := c.Resolve(ctx, reg.Host+"/fn/s390x:v1"); err == nil || !strings.Contains(err.Error(), "linux/s390x") {
		t.Fatalf("got %v", err)
	}
	if n := len(dirEntries(c.path(rootfsDir))); n != 0 {
		t.Fatalf("rootfs committed")
	}
}

var _ = name.ParseReference
