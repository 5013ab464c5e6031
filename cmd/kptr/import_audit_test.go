package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/kptr-dev/kptr/cache"
)

// `kptr cache import -` reads the tarball that `kptr cache export --tar -o -`
// (or `prewarm --export -`) writes, so the two can be piped; "-" used to be
// taken as a file name ("stat -: no such file or directory").
func TestCacheImportFromStdin(t *testing.T) {
	const ref = "example.com/fn/x:v1"
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	p := cache.HostPlatform()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	lp, err := layout.Write(src, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		t.Fatal(err)
	}
	a, b := t.TempDir(), t.TempDir()
	if code, _, errs := runIn(t, "kptr", "cache", "import", "--cache-dir", a, src); code != 0 {
		t.Fatalf("import of the layout: %d %s", code, errs)
	}
	var tarball, errb bytes.Buffer
	if code := run([]string{"kptr", "cache", "export", "--cache-dir", a, "--tar", "-o", "-", ref}, nil, &tarball, &errb); code != 0 || tarball.Len() == 0 {
		t.Fatalf("export to stdout: %d %s", code, errb.String())
	}
	var out bytes.Buffer
	errb.Reset()
	if code := run([]string{"kptr", "cache", "import", "--cache-dir", b, "-"}, &tarball, &out, &errb); code != 0 || out.String() != "imported "+ref+"\n" {
		t.Fatalf("import from stdin: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	c, err := cache.Open(b, cache.WithOffline(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want, _ := img.Digest()
	if bd, err := c.Resolve(t.Context(), ref); err != nil || bd.Digest != want {
		t.Fatalf("resolve after import from stdin: %v %v, want %v", err, bd.Digest, want)
	}
	// Garbage on stdin: the message names "-", not a temporary file; it is
	// the user's input, not an image archive: exit 2 (it was 3).
	errb.Reset()
	code := run([]string{"kptr", "cache", "import", "--cache-dir", b, "-"}, strings.NewReader("garbage"), &out, &errb)
	if code != exitUsage || !strings.HasPrefix(errb.String(), "kptr cache import: import -: not a complete tarball") {
		t.Errorf("garbage: exit %d, stderr %q", code, errb.String())
	}
}
