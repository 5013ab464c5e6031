package hostile

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kptr-dev/kptr/test/fnimage"
)

// looseLayer is what distroless, alpine and many images carry: a 1777 /tmp
// and a world-writable directory with a world-writable file in it.
func looseLayer(t *testing.T) v1.Layer {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name, body string
		mode       int64
	}{{"tmp/", "", 0o1777}, {"data/", "", 0o777}, {"data/conf", "the image's own", 0o666}} {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeDir}
		if !strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Another local user writes into the extracted tree of an image in a cache
// they can reach (a cache shared with the sidecar, /var/cache/kptr): they
// replace a file of the image in its 0777 directory and plant one in its
// 1777 /tmp. The owner's next render runs the image as it was pulled, and
// kptr cache verify finds the tree whole. Before the fix the tree kept the
// image's modes: the second render printed what the intruder wrote.
func TestPlantedInAnImageTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another uid")
	}
	forIdentities(t, sidecarIdentities(), func(t *testing.T, h *harness) {
		ref := "example.test/loose:v1"
		h.importImage(t, ref, fnimage.Build(t, "kptr-fx", fnimage.WithLayers(looseLayer(t))))
		if err := os.Chmod(h.cache, 0o755); err != nil { // reachable by others, as a shared cache is
			t.Fatal(err)
		}
		if h.id.uid < 0 {
			os.Chmod(h.tmp, 0o711) // as root, the run's uid reaches its run-state directory (importFixture)
		}
		// a relative path: the landlock tier runs the function in its image
		// without making it the root
		pkg := h.pkg(t, "app", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + ref +
				"\n    configMap:\n      op: readfile\n      path: data/conf\n      key: conf\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		})
		render := call{args: []string{"fn", "render", pkg, "-o", "stdout"}}
		if r := h.kptr(t, render).exits(t, 0); !strings.Contains(r.stdout, "conf: the image's own") {
			t.Fatalf("the function did not read its image's file:\n%s", r.stdout)
		}
		trees, _ := filepath.Glob(filepath.Join(h.cache, "rootfs", "*", "rootfs"))
		if len(trees) != 1 {
			t.Fatalf("extracted trees: %v", trees)
		}
		script := `cd "$1" || exit 9; echo intruder >data/conf; echo intruder >data/new && mv -f data/new data/conf; echo intruder >tmp/planted; true`
		out, err := exec.Command("setpriv", "--reuid", fmt.Sprint(h.intruder()), "--regid", fmt.Sprint(h.intruder()), "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", "sh", "-c", script, "sh", trees[0]).CombinedOutput()
		if err != nil {
			t.Fatalf("the intruder could not reach the tree: %v\n%s", err, out)
		}
		if r := h.kptr(t, render).exits(t, 0); !strings.Contains(r.stdout, "conf: the image's own") {
			t.Errorf("the owner's next render ran what uid %d wrote into the image:\n%s", h.intruder(), r.stdout)
		}
		if _, err := os.Lstat(filepath.Join(trees[0], "tmp", "planted")); err == nil {
			t.Errorf("uid %d planted a file in the image's /tmp", h.intruder())
		}
		h.kptr(t, call{args: []string{"cache", "verify"}}).exits(t, 0)
	})
}
