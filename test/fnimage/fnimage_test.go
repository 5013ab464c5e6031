package fnimage_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// The image has the catalog shape and its function really transforms a
// ResourceList; pushing it to the real registry and reading it back keeps
// digests, and the registry log counts the blob GETs.
func TestBuildPushPull(t *testing.T) {
	img := fnimage.Build(t, "set-labels", fnimage.WithEnv("A=1"))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Entrypoint, " "); got != "function" {
		t.Errorf("entrypoint %q, want function", got)
	}
	if cf.Config.Env[0] != fnimage.DefaultPath || cf.Config.Env[1] != "A=1" {
		t.Errorf("env %q", cf.Config.Env)
	}
	layers, _ := img.Layers()
	if len(layers) != 2 {
		t.Fatalf("%d layers, want base + function", len(layers))
	}
	again := fnimage.Build(t, "set-annotations")
	l0, _ := layers[0].Digest()
	a, _ := again.Layers()
	a0, _ := a[0].Digest()
	if l0 != a0 {
		t.Errorf("base layers differ: %s vs %s", l0, a0)
	}

	files := map[string]bool{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = true
	}
	for _, f := range []string{"bin/busybox", "bin/sh", "etc/passwd", "tmp", "usr/local/bin/function"} {
		if !files[f] {
			t.Errorf("image lacks %s", f)
		}
	}

	in := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: x\n  data:\n    app: demo\n"
	cmd := exec.Command(fnimage.Binary(t, "set-labels"))
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("labels:\n        app: demo")) && !bytes.Contains(out, []byte("labels:\n      app: demo")) {
		t.Errorf("set-labels did not label:\n%s", out)
	}

	reg := registry.Start(t)
	ref := reg.Addr + "/kpt-fn/set-labels:v0.1.5"
	fnimage.Push(t, img, ref)
	r, _ := name.ParseReference(ref, name.Insecure)
	got, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	gd, _ := got.Digest()
	wd, _ := img.Digest()
	if gd != wd {
		t.Errorf("pulled %s, pushed %s", gd, wd)
	}
	gl, _ := got.Layers()
	rc, err := gl[1].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	ld, _ := gl[1].Digest()
	if n := reg.BlobGets(ld.String()); n != 1 {
		t.Errorf("registry served the function layer %d times, want 1; requests:\n%s", n, strings.Join(reg.Requests(), "\n"))
	}
	reg.Stop()
	if _, err := remote.Image(r); err == nil {
		t.Error("registry still answers after Stop")
	}
	reg.Start()
	if _, err := remote.Image(r); err != nil {
		t.Errorf("after restart: %v", err)
	}
}

// The Makefile prebuilds the legacy js modules for the uid-999 suite with
// the toolchain and fixtures the tests build them with.
func TestMakefileLegacyJS(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile") // the package's directory is test/fnimage
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mk), "\nLEGACY_JS_GO := "+fnimage.LegacyJSToolchain+"\n") {
		t.Errorf("the Makefile's LEGACY_JS_GO is not %s", fnimage.LegacyJSToolchain)
	}
	if !strings.Contains(string(mk), "for f in "+strings.Join(fnimage.LegacyJSFixtures, " ")+"; do m=") {
		t.Errorf("the Makefile does not prebuild %v", fnimage.LegacyJSFixtures)
	}
}
