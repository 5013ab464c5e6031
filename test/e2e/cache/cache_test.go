package cache_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// A user pulls a catalog-style function through a mirror, lists it, verifies
// the cache, and reads it with skopeo: the cache is a standard OCI layout.
func TestPullLsVerifyAndSkopeoReadsTheCache(t *testing.T) {
	reg := registry.Start(t)
	img := fnimage.Build(t, "cat")
	fnimage.Push(t, img, reg.Addr+"/kpt-fn/cat:v1.0.0")
	cacheDir := t.TempDir()

	r := kptr(t, cacheDir, "cache", "pull", "--mirror", "gcr.io="+reg.Addr, "gcr.io/kpt-fn/cat:v1.0.0").must(t)
	if want := "gcr.io/kpt-fn/cat:v1.0.0 " + digestOf(t, img) + "\n"; r.stdout != want {
		t.Fatalf("pull printed %q, want %q", r.stdout, want)
	}
	if !strings.Contains(r.stderr, "fetched layer") {
		t.Fatalf("no progress lines on stderr: %s", r.stderr)
	}
	rootfs := filepath.Join(cacheDir, "rootfs", strings.TrimPrefix(digestOf(t, img), "sha256:"), "rootfs")
	if fi, err := os.Stat(filepath.Join(rootfs, "usr/local/bin/function")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("function binary: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(rootfs, "bin/sh")); err != nil || target != "busybox" {
		t.Fatalf("bin/sh: %q %v", target, err)
	}

	ls := kptr(t, cacheDir, "cache", "ls").must(t)
	if !strings.Contains(ls.stdout, "gcr.io/kpt-fn/cat:v1.0.0") || !strings.Contains(ls.stdout, "unpacked") {
		t.Fatalf("ls: %s", ls.stdout)
	}
	var list []struct{ Refs []string }
	if err := json.Unmarshal([]byte(kptr(t, cacheDir, "cache", "ls", "--json").must(t).stdout), &list); err != nil || len(list) != 1 {
		t.Fatalf("ls --json: %v %v", list, err)
	}
	v := kptr(t, cacheDir, "cache", "verify").must(t)
	if !strings.Contains(v.stdout, "0 corrupt") {
		t.Fatalf("verify: %s", v.stdout)
	}

	// crane's library reads the Docker v2 image from the layout.
	lp, err := layout.FromPath(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := v1.NewHash(digestOf(t, img))
	li, err := lp.Image(h)
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := li.Layers(); err != nil || len(ls) != 2 {
		t.Fatalf("layout image: %d layers, %v", len(ls), err)
	}
	// skopeo (1.9) reads OCI-typed images of the layout by their reference.
	ociImg := mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	fnimage.Push(t, ociImg, reg.Addr+"/kpt-fn/cat:oci")
	kptr(t, cacheDir, "cache", "pull", reg.Addr+"/kpt-fn/cat:oci").must(t)
	out, err := exec.Command("skopeo", "inspect", "--raw", "oci:"+cacheDir+":"+reg.Addr+"/kpt-fn/cat:oci").CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo cannot read the cache: %v\n%s", err, out)
	}
	var m v1.Manifest
	if err := json.Unmarshal(out, &m); err != nil || len(m.Layers) != 2 {
		t.Fatalf("skopeo manifest: %s", out)
	}
	// And can copy the image out of it, blobs and all.
	if out, err := exec.Command("skopeo", "copy", "oci:"+cacheDir+":"+reg.Addr+"/kpt-fn/cat:oci", "oci:"+t.TempDir()+":x").CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy from the cache: %v\n%s", err, out)
	}
}

// The shapes real function images have, from a real registry.
func TestRealImageShapes(t *testing.T) {
	reg := registry.Start(t)
	host := v1.Platform{OS: "linux", Architecture: "amd64"}
	other := v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	hostImg := fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"arch": "amd64"})))
	otherImg := mutate.MediaType(fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"arch": "arm64"}))), types.DockerManifestSchema2)

	list := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.DockerManifestList),
		mutate.IndexAddendum{Add: otherImg, Descriptor: v1.Descriptor{Platform: &other}},
		mutate.IndexAddendum{Add: hostImg, Descriptor: v1.Descriptor{Platform: &host}})
	fnimage.PushIndex(t, list, reg.Addr+"/fn/list:v1")

	ociHost := mutate.ConfigMediaType(mutate.MediaType(hostImg, types.OCIManifestSchema1), types.OCIConfigJSON)
	att := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	buildx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: att, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{"vnd.docker.reference.type": "attestation-manifest"}}},
		mutate.IndexAddendum{Add: ociHost, Descriptor: v1.Descriptor{Platform: &host}})
	fnimage.PushIndex(t, buildx, reg.Addr+"/fn/buildx:v1")

	armOnly := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: att, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"}}},
		mutate.IndexAddendum{Add: otherImg, Descriptor: v1.Descriptor{Platform: &other}})
	fnimage.PushIndex(t, armOnly, reg.Addr+"/fn/armonly:v1")

	fnimage.Push(t, hostImg, reg.Addr+"/fn/single:v1")

	// Several layers: the catalog base, a zstd layer with whiteouts (a file
	// of the base, and an opaque directory), an uncompressed layer.
	zl, err := tarball.LayerFromOpener(tarOpener(t,
		tarEntry{name: "bin/.wh.cat"}, tarEntry{name: "etc/", dir: true}, tarEntry{name: "etc/.wh..wh..opq"},
		tarEntry{name: "etc/motd", body: "zstd"}), tarball.WithCompression(compression.ZStd))
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	rc, _ := tarOpener(t, tarEntry{name: "data/plain", body: "uncompressed"})()
	plain.ReadFrom(rc)
	layered := fnimage.Build(t, "cat", fnimage.WithLayers(zl, static.NewLayer(plain.Bytes(), types.OCIUncompressedLayer)))
	fnimage.Push(t, layered, reg.Addr+"/fn/layers:v1")

	cacheDir := t.TempDir()
	r := kptr(t, cacheDir, "cache", "pull", reg.Addr+"/fn/layers:v1").must(t)
	if !strings.Contains(r.stdout, digestOf(t, layered)) {
		t.Fatalf("layers: %s", r.stdout)
	}
	root := filepath.Join(cacheDir, "rootfs", strings.TrimPrefix(digestOf(t, layered), "sha256:"), "rootfs")
	for p, want := range map[string]bool{"bin/cat": false, "bin/sh": true, "etc/passwd": false, "etc/motd": true, "data/plain": true, "usr/local/bin/function": true} {
		if _, err := os.Lstat(filepath.Join(root, p)); (err == nil) != want {
			t.Errorf("%s: present=%v, want %v", p, err == nil, want)
		}
	}

	for _, r := range []string{"list:v1", "buildx:v1", "single:v1"} {
		kptr(t, cacheDir, "cache", "pull", reg.Addr+"/fn/"+r).must(t)
		// Same image every time: the amd64 one.
		if !strings.Contains(kptr(t, cacheDir, "cache", "pull", reg.Addr+"/fn/"+r).stdout, digestOf(t, hostImg)) &&
			!strings.Contains(kptr(t, cacheDir, "cache", "pull", reg.Addr+"/fn/"+r).stdout, digestOf(t, ociHost)) {
			t.Fatalf("%s: not the amd64 image", r)
		}
	}
	r = kptr(t, cacheDir, "cache", "pull", reg.Addr+"/fn/armonly:v1")
	if r.code != 3 || !strings.Contains(r.stderr, "linux/arm64") || strings.Contains(r.stderr, "unknown/unknown") ||
		len(errorLines(r.stderr)) != 1 {
		t.Fatalf("arm-only index: exit %d: %s", r.code, r.stderr)
	}
}

// 16 processes resolve one uncached image at once: each blob is served once
// and all get the same rootfs.
func TestSixteenProcessesFetchEachBlobOnce(t *testing.T) {
	reg := registry.Start(t)
	img := bigImage(t, 16, 2<<20)
	ref := reg.Addr + "/fn/shared:v1"
	fnimage.Push(t, img, ref)
	cacheDir := t.TempDir()
	var wg sync.WaitGroup
	res := make([]result, 16)
	for i := range res {
		wg.Add(1)
		go func() { defer wg.Done(); res[i] = kptr(t, cacheDir, "cache", "pull", ref) }()
	}
	wg.Wait()
	for i, r := range res {
		if r.code != 0 || r.stdout != res[0].stdout {
			t.Fatalf("process %d: exit %d %q %s", i, r.code, r.stdout, r.stderr)
		}
	}
	for _, b := range blobsOf(t, img) {
		if n := reg.BlobGets(b); n != 1 {
			t.Fatalf("blob %s served %d times", b, n)
		}
	}
	if n := countEntries(filepath.Join(cacheDir, "rootfs")); n != 1 {
		t.Fatalf("%d rootfs dirs", n)
	}
}

// Registry down: cached images resolve under IfNotPresent and --offline; a
// miss names the image and the policy. A plain `cache pull` asks the
// registry again, as docker pull does, and so fails naming the cause.
func TestOfflineWithRegistryStopped(t *testing.T) {
	reg := registry.Start(t)
	img := fnimage.Build(t, "cat")
	ref := reg.Addr + "/kpt-fn/cat:v1"
	fnimage.Push(t, img, ref)
	cacheDir := t.TempDir()
	kptr(t, cacheDir, "cache", "pull", ref).must(t)
	reg.Stop()
	if r := kptr(t, cacheDir, "cache", "pull", ref); r.code != 3 || !strings.Contains(r.stderr, "connection refused") {
		t.Fatalf("cache pull with the registry down: exit %d: %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"--image-pull-policy", "IfNotPresent"}, {"--offline"}, {"--image-pull-policy", "Never"}} {
		r := kptr(t, cacheDir, append(append([]string{"cache", "pull"}, args...), ref)...).must(t)
		if !strings.Contains(r.stdout, digestOf(t, img)) {
			t.Fatalf("%v: %s", args, r.stdout)
		}
	}
	miss := reg.Addr + "/kpt-fn/other:v1"
	for _, tc := range []struct {
		args []string
		want string
	}{{[]string{"--offline"}, "offline"}, {[]string{"--image-pull-policy", "Never"}, "Never"}, {nil, "connection refused"}} {
		r := kptr(t, cacheDir, append(append([]string{"cache", "pull"}, tc.args...), miss)...)
		if r.code != 3 || !strings.Contains(r.stderr, miss) || !strings.Contains(r.stderr, tc.want) || len(errorLines(r.stderr)) != 1 {
			t.Fatalf("%v: exit %d: %q", tc.args, r.code, r.stderr)
		}
	}
	if r := kptr(t, cacheDir, "cache", "pull", "Not A Ref"); r.code != 2 {
		t.Fatalf("bad reference: exit %d %s", r.code, r.stderr)
	}
	kptr(t, cacheDir, "cache", "verify").must(t)
}

// Images move between caches as OCI layout tarballs and docker archives,
// digests preserved, usable offline.
func TestExportImport(t *testing.T) {
	reg := registry.Start(t)
	img := fnimage.Build(t, "cat")
	ref := reg.Addr + "/kpt-fn/cat:v1"
	fnimage.Push(t, img, ref)
	src := t.TempDir()
	kptr(t, src, "cache", "pull", ref).must(t)
	out := t.TempDir()
	// A layout skopeo wrote names the image by tag only; --repository names it
	// (without it: the user's input to fix, exit 2).
	skopeoDir := filepath.Join(out, "skopeo")
	if b, err := exec.Command("skopeo", "copy", "-q", "--src-tls-verify=false", "docker://"+ref, "oci:"+skopeoDir+":v7").CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy: %v\n%s", err, b)
	}
	reg.Stop()
	sk := t.TempDir()
	if r := kptr(t, sk, "cache", "import", skopeoDir); r.code != 2 || !strings.Contains(r.stderr, "--repository") {
		t.Fatalf("tag-only layout without --repository: %d %s", r.code, r.stderr)
	}
	kptr(t, sk, "cache", "import", "--repository", "registry.corp/kpt-fn/cat", skopeoDir).must(t)
	kptr(t, sk, "cache", "pull", "--offline", "registry.corp/kpt-fn/cat:v7").must(t)

	kptr(t, src, "cache", "export", "--tar", "-o", filepath.Join(out, "fn.tar"), ref).must(t)
	kptr(t, src, "cache", "export", "-o", filepath.Join(out, "layout"), ref).must(t)
	for _, p := range []string{"fn.tar", "layout"} {
		dst := t.TempDir()
		if r := kptr(t, dst, "cache", "import", filepath.Join(out, p)).must(t); r.stdout != "imported "+ref+"\n" {
			t.Fatalf("import %s: %q", p, r.stdout)
		}
		if r := kptr(t, dst, "cache", "pull", "--offline", ref).must(t); !strings.Contains(r.stdout, digestOf(t, img)) {
			t.Fatalf("%s: digest not preserved: %s", p, r.stdout)
		}
	}
	// docker save format.
	tag, _ := name.NewTag("registry.corp/kpt-fn/cat:v2")
	if err := tarball.WriteToFile(filepath.Join(out, "docker.tar"), tag, img); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	kptr(t, dst, "cache", "import", filepath.Join(out, "docker.tar")).must(t)
	r := kptr(t, dst, "cache", "pull", "--offline", "registry.corp/kpt-fn/cat:v2").must(t)
	if !strings.Contains(r.stdout, "registry.corp/kpt-fn/cat:v2") {
		t.Fatalf("docker archive: %s", r.stdout)
	}
	kptr(t, dst, "cache", "verify").must(t)
}

type tarEntry struct {
	name, body string
	dir        bool
}

// tarOpener returns an opener of a tar stream holding entries.
func tarOpener(t *testing.T, entries ...tarEntry) tarball.Opener {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.dir {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	tw.Close()
	b := buf.Bytes()
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}
