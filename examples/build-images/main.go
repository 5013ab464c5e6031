// Command build-images builds the demo's function images from the test
// fixtures without a container daemon and writes them to an OCI image layout
// whose index names each image by its full reference, ready for
// `kptr cache import`. Each image is laid out as the catalog's are: a base
// layer (/etc/passwd and /etc/group with root and nobody, /tmp 1777) and a
// layer with the statically linked function at /usr/local/bin/function;
// config Entrypoint ["function"], linux/amd64.
//
//	go run ./examples/build-images -out out/demo-images
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// images are the demo's functions: reference → fixture under test/fixtures.
var images = []struct{ ref, fixture string }{
	{"gcr.io/kpt-fn/set-labels:v0.1.5", "set-labels"},
	{"gcr.io/kpt-fn/set-annotations:v0.1.4", "set-annotations"},
	{"gcr.io/kpt-fn/generator:v0.1.0", "generator"},
}

func main() {
	out := flag.String("out", "out/demo-images", "OCI layout directory to (re)create")
	root := flag.String("root", ".", "repository root (holds test/fixtures)")
	flag.Parse()
	if err := run(*out, *root); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

func run(out, root string) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	base, err := layer([]file{
		{name: "etc/", dir: true}, {name: "tmp/", dir: true, mode: 0o1777},
		{name: "usr/", dir: true}, {name: "usr/local/", dir: true}, {name: "usr/local/bin/", dir: true},
		{name: "etc/passwd", data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{name: "etc/group", data: []byte("root:x:0:\nnobody:x:65534:\n")},
	})
	if err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "kptr-demo-fn-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	for _, im := range images {
		exe := filepath.Join(bin, im.fixture)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", exe, "./test/fixtures/"+im.fixture)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goruntime.GOARCH)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("compile %s: %w", im.fixture, err)
		}
		b, err := os.ReadFile(exe)
		if err != nil {
			return err
		}
		fn, err := layer([]file{{name: "usr/local/bin/function", data: b, mode: 0o755}})
		if err != nil {
			return err
		}
		img, err := mutate.AppendLayers(empty.Image, base, fn)
		if err != nil {
			return err
		}
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture = "linux", goruntime.GOARCH
		cf.Config.Entrypoint = []string{"function"}
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": im.ref,
		})); err != nil {
			return err
		}
		d, _ := img.Digest()
		fmt.Printf("built %s (%s) from test/fixtures/%s\n", im.ref, d, im.fixture)
	}
	return nil
}

type file struct {
	name string
	data []byte
	mode int64
	dir  bool
}

// layer builds an uncompressed-then-gzipped layer from files, reproducibly.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
			if h.Mode == 0 {
				h.Mode = 0o644
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
