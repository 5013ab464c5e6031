package fnimage_test

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/kptr-dev/kptr/test/fnimage"
)

// A catalog-shaped image has alpine's top-level directories and a few
// hundred files, a 20–40 MB dynamically linked function whose loader (by
// its PT_INTERP path, through the link) and C library are in the image, and
// the same digest when built again. The starlark validator runs its policy
// program from the functionConfig.
func TestCatalogShape(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("catalog-shaped fixtures are built with cgo: no C compiler here")
	}
	img := fnimage.Build(t, "cat", fnimage.WithCatalogShape())
	again := fnimage.Build(t, "cat", fnimage.WithCatalogShape())
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("digests differ: %s, %s", d1, d2)
	}
	type file struct {
		typ  byte
		link string
		data []byte
	}
	files := map[string]file{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f := file{typ: h.Typeflag, link: h.Linkname}
		if h.Typeflag == tar.TypeReg && (strings.HasPrefix(h.Name, "usr/local/bin/") || strings.HasPrefix(h.Name, "lib")) {
			f.data, _ = io.ReadAll(tr)
		}
		files[strings.TrimSuffix(h.Name, "/")] = f
	}
	for _, d := range []string{"bin", "dev", "etc", "home", "lib", "media", "mnt", "opt", "proc", "root", "run", "sbin", "srv", "sys", "tmp", "usr", "var"} {
		if files[d].typ != tar.TypeDir {
			t.Errorf("no top-level directory /%s", d)
		}
	}
	regular := 0
	for _, f := range files {
		if f.typ == tar.TypeReg {
			regular++
		}
	}
	if regular < 300 {
		t.Errorf("%d regular files, want a few hundred", regular)
	}
	fn := files["usr/local/bin/function"].data
	if n := len(fn); n < 20<<20 || n > 40<<20 {
		t.Errorf("function is %d bytes, want 20–40 MB", n)
	}
	ef, err := elf.NewFile(bytes.NewReader(fn))
	if err != nil {
		t.Fatal(err)
	}
	var interp string
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if interp == "" {
		t.Fatal("the function is statically linked")
	}
	resolve := func(p string) file {
		p = strings.TrimPrefix(p, "/")
		for range 8 {
			f := files[p]
			if f.typ != tar.TypeSymlink {
				return f
			}
			p = path.Clean(path.Join(path.Dir(p), f.link))
		}
		return file{}
	}
	if f := resolve(interp); f.typ != tar.TypeReg || len(f.data) == 0 {
		t.Errorf("the loader %s is not in the image", interp)
	}
	if f := files["etc/ld.so.cache"]; f.typ != tar.TypeReg {
		t.Error("no /etc/ld.so.cache")
	}
	libs, _ := ef.ImportedLibraries()
	if len(libs) == 0 {
		t.Error("the function needs no shared library")
	}
	for _, l := range libs {
		found := false
		for name, f := range files {
			if path.Base(name) == l && f.typ == tar.TypeReg {
				found = true
			}
		}
		if !found {
			t.Errorf("%s is not in the image", l)
		}
	}
}
