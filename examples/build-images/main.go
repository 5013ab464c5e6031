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

	"github.com/kptr-dev/kptr/test/fnimage"
)

// images are the demo's functions: reference → fixture under test/fixtures.
var images = []fnimage.Named{
	{Ref: "gcr.io/kpt-fn/set-labels:v0.1.5", Fixture: "set-labels"},
	{Ref: "gcr.io/kpt-fn/set-annotations:v0.1.4", Fixture: "set-annotations"},
	{Ref: "gcr.io/kpt-fn/generator:v0.1.0", Fixture: "generator"},
}

func main() {
	out := flag.String("out", "out/demo-images", "OCI layout directory to (re)create")
	flag.Parse()
	digests, err := fnimage.WriteLayout(*out, images, fnimage.WithMinimalBase(), fnimage.WithOCIMediaTypes())
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-images:", err)
		os.Exit(1)
	}
	for i, im := range images {
		fmt.Printf("built %s (%s) from test/fixtures/%s\n", im.Ref, digests[i], im.Fixture)
	}
}
