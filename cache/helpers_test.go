package cache

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
)

// testRegistry is go-containerregistry's in-process registry behind a handler
// that counts blob GETs and can tamper with chosen blobs.
type testRegistry struct {
	*httptest.Server
	Host string

	mu       sync.Mutex
	gets     map[string]int                 // digest → blob GETs
	requests int                            // all requests
	tamper   map[string]func([]byte) []byte // digest → rewrite of the body
}

func newTestRegistry(t testing.TB) *testRegistry {
	r := &testRegistry{gets: map[string]int{}, tamper: map[string]func([]byte) []byte{}}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests++
		var tf func([]byte) []byte
		if i := strings.Index(req.URL.Path, "/blobs/sha256:"); i >= 0 && req.Method == http.MethodGet {
			d := req.URL.Path[i+len("/blobs/"):]
			r.gets[d]++
			tf = r.tamper[d]
		}
		r.mu.Unlock()
		if tf == nil {
			h.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := tf(rec.Body.Bytes())
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	t.Cleanup(r.Close)
	r.Host = strings.TrimPrefix(r.URL, "http://")
	return r
}

func (r *testRegistry) blobGets(d v1.Hash) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[d.String()]
}

func (r *testRegistry) requestCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// entry is one tar entry of a handmade layer.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func file(name, body string) entry {
	return entry{name: name, body: body, typ: tar.TypeReg, mode: 0o644}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, to string) entry {
	return entry{name: name, link: to, typ: tar.TypeSymlink, mode: 0o777}
}
func hardlink(name, to string) entry {
	return entry{name: name, link: to, typ: tar.TypeLink, mode: 0o644}
}

func tarBytes(t testing.TB, ents ...entry) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			io.WriteString(tw, e.body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rawLayer is a layer given by its exact blob bytes and diff ID.
type rawLayer struct {
	blob, tar []byte
	mt        types.MediaType
}

func (l *rawLayer) Digest() (v1.Hash, error) { return sha(l.blob), nil }
func (l *rawLayer) DiffID() (v1.Hash, error) { return sha(l.tar), nil }
func (l *rawLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.blob)), nil
}
func (l *rawLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.tar)), nil
}
func (l *rawLayer) Size() (int64, error)                { return int64(len(l.blob)), nil }
func (l *rawLayer) MediaType() (types.MediaType, error) { return l.mt, nil }

func gzipLayer(t testing.TB, ents ...entry) v1.Layer {
	tb := tarBytes(t, ents...)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(tb)
	zw.Close()
	return &rawLayer{blob: buf.Bytes(), tar: tb, mt: types.DockerLayer}
}

func zstdLayer(t testing.TB, ents ...entry) v1.Layer {
	tb := tarBytes(t, ents...)
	zw, _ := zstd.NewWriter(nil)
	return &rawLayer{blob: zw.EncodeAll(tb, nil), tar: tb, mt: types.OCILayerZStd}
}

func plainLayer(t testing.TB, ents ...entry) v1.Layer {
	tb := tarBytes(t, ents...)
	return &rawLayer{blob: tb, tar: tb, mt: types.OCIUncompressedLayer}
}

// image builds an image from layers. oci selects OCI media types (else Docker v2).
func image(t testing.TB, oci bool, arch string, layers ...v1.Layer) v1.Image {
	t.Helper()
	base := empty.Image
	if oci {
		base = mutate.MediaType(base, types.OCIManifestSchema1)
		base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	}
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config.Entrypoint = []string{"function"}
	cf.Config.Env = []string{"PATH=/usr/local/bin:/bin"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t testing.TB, img v1.Image, ref string) v1.Hash {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return d
}

func pushIndex(t testing.TB, idx v1.ImageIndex, ref string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
}

func openTest(t testing.TB, dir string, opts ...Option) *Cache {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	c, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dirEntries lists names under dir (empty when missing).
func dirEntries(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

var _ = context.Background
var _ = filepath.Join
