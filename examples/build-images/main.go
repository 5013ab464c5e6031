// Command build-images builds the demo's function images from the test
// fixtures without a container daemon and writes them to an OCI image layout
// whose index names each image by its full reference, ready for
// `kptr cache import`. The images are built by test/fnimage, the same code the
// tests use, laid out as the catalog's are (a base layer, then the statically
// linked function at /usr/local/bin/function, ENTRYPOINT ["function"]), with a
// base layer that needs nothing from the host (no busybox) and OCI media types.
//
//	go run ./examples/build-images -out out/demo-images
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/kptr-dev/kptr/test/fnimage"
)

// images are the demo's functions: reference → fixture under test/fixtures.
var images = []struct{ ref, fixture string }{
	{"gcr.io/kpt-fn/set-labels:v0.1.5", "set-labels"},
	{"gcr.io/kpt-fn/set-annotations:v0.1.4", "set-annotations"},
	{"gcr.io/kpt-fn/generator:v0.1.0", "generator"},
}

func main() {
	out := flag.String("out", "out/demo-images", "OCI layout directory to (re)create")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	for _, im := range images {
		img, err := fnimage.New(im.fixture, fnimage.WithMinimalBase(), fnimage.WithOCIMediaTypes())
		if err != nil {
			return fmt.Errorf("%s: %w", im.ref, err)
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
