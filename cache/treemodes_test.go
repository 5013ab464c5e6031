package cache

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/bundle"
)

// looseModes is an image whose layers carry what distroless, alpine and
// many other images carry: a 1777 /tmp and /var/tmp, a world-writable
// directory with a world-writable file in it, a 0777 program, a setgid
// group-writable directory, a sticky file.
func looseModes() []entry {
	return []entry{
		{name: "tmp", typ: tar.TypeDir, mode: 0o1777},
		{name: "var/tmp", typ: tar.TypeDir, mode: 0o1777},
		{name: "data", typ: tar.TypeDir, mode: 0o777},
		{name: "data/conf", body: "image's own", typ: tar.TypeReg, mode: 0o666},
		{name: "usr/bin/tool", body: "#!/bin/sh\n", typ: tar.TypeReg, mode: 0o777},
		{name: "shared", typ: tar.TypeDir, mode: 0o2775},
		{name: "sticky", body: "s", typ: tar.TypeReg, mode: 0o1644},
	}
}

// looseTree lists every entry under root (links aside, whose mode means
// nothing) that group or others may write, or that keeps a setuid,
// setgid or sticky bit.
func looseTree(t *testing.T, root string) []string {
	t.Helper()
	var loose []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m := fi.Mode()
		if m&os.ModeSymlink == 0 && (m.Perm()&0o022 != 0 || m&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0) {
			loose = append(loose, strings.TrimPrefix(p, root)+" "+m.String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return loose
}

// traversableCache is a cache directory other users can reach, as a
// cache root shares with the sidecar (a pre-warmed /var/cache/kptr) is.
func traversableCache(t *testing.T) string {
	top := t.TempDir()
	for _, d := range []string{filepath.Dir(top), top} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(top, "cache")
}

// An extracted image tree keeps nothing another user could write: root
// extracts an image with a 1777 /tmp and a 0777 directory, uid 999 tries
// to plant files in them and to rewrite the image's files, and root's
// next resolve hands out the image as it was extracted. Before the fix
// the tree kept the image's modes: uid 999's files were in the tree
// root's next run was given, and data/conf said what uid 999 wrote.
func TestExtractedTreeWritableByNoOtherUser(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/loose:v1"
	push(t, image(t, false, HostPlatform().Architecture, gzipLayer(t, looseModes()...)), ref)
	dir := traversableCache(t)
	b, err := openTest(t, dir).Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if loose := looseTree(t, b.Rootfs); len(loose) > 0 {
		t.Errorf("extracted entries others may write, or with a special bit:\n%s", strings.Join(loose, "\n"))
	}
	if os.Geteuid() != 0 {
		return // the attack needs another uid
	}
	planted := []string{"tmp/planted", "var/tmp/planted", "data/planted"}
	script := `cd "$1" && for p in tmp var/tmp data; do echo planted >"$p/planted"; done; echo uid999 >data/conf; echo uid999 >usr/bin/tool; mv data/conf data/moved; true`
	out, err := exec.Command("setpriv", "--reuid=999", "--regid=999", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
		"sh", "-c", script, "sh", b.Rootfs).CombinedOutput()
	if err != nil {
		t.Fatalf("setpriv: %v\n%s", err, out)
	}
	again, err := openTest(t, dir, WithOffline(true)).Resolve(ctx, ref)
	if err != nil {
		t.Fatalf("root's next resolve: %v", err)
	}
	for _, p := range planted {
		if _, err := os.Lstat(filepath.Join(again.Rootfs, p)); err == nil {
			t.Errorf("uid 999 planted %s in the tree root's next run is given", p)
		}
	}
	for p, want := range map[string]string{"data/conf": "image's own", "usr/bin/tool": "#!/bin/sh\n"} {
		if got, err := os.ReadFile(filepath.Join(again.Rootfs, p)); err != nil || string(got) != want {
			t.Errorf("%s in root's next run: %q %v, want the image's %q", p, got, err, want)
		}
	}
}

// asOlderKptr turns the extracted tree of manifest hex back into what an
// older kptr left: the image's own modes, no format in meta.json, and a
// file another user planted in the 1777 /tmp.
func asOlderKptr(t *testing.T, dir, hex string) {
	t.Helper()
	img := filepath.Join(dir, rootfsDir, hex)
	mp := filepath.Join(img, "meta.json")
	var m map[string]any
	if err := json.Unmarshal([]byte(readFile(t, mp)), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["format"]; !ok {
		t.Fatalf("meta.json has no format: %s", readFile(t, mp))
	}
	delete(m, "format")
	b, _ := json.Marshal(m)
	if err := os.WriteFile(mp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"tmp": 0o777 | os.ModeSticky, "data": 0o777} {
		if err := os.Chmod(filepath.Join(img, "rootfs", p), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(img, "rootfs", "tmp", "planted"), []byte("another user's"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A tree an older kptr extracted kept the image's modes, so anyone may
// have written into it: it is never handed out. A cache its user can
// write extracts it again from the blobs (what was planted goes with it);
// a read-only one refuses it naming the fix; verify reports it and
// --repair removes it, as it reports an entry of a tree made writable
// since its extraction.
func TestLooseTreeOfAnOlderKptr(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/older:v1"
	d := push(t, image(t, false, HostPlatform().Architecture, gzipLayer(t, looseModes()...)), ref)
	dir := t.TempDir()
	// each resolve lets its hold go, for verify --repair to remove the tree
	resolve := func(t *testing.T, opts ...Option) bundle.Bundle {
		t.Helper()
		c := openTest(t, dir, opts...)
		defer c.Close()
		b, err := c.Resolve(ctx, ref)
		if err != nil {
			t.Fatalf("resolving: %v", err)
		}
		return b
	}
	resolve(t)
	img := filepath.Join(dir, rootfsDir, d.Hex)

	asOlderKptr(t, dir, d.Hex)
	ro := openTest(t, dir, WithOffline(true))
	ro.readOnly = true
	_, err := ro.Resolve(ctx, ref)
	ro.Close()
	var ce *Error
	if err == nil || !errors.As(err, &ce) || ce.ExitCode() != 3 || !strings.Contains(err.Error(), img+": extracted by an older kptr") || !strings.Contains(err.Error(), "kptr cache verify --repair") {
		t.Errorf("read-only cache with an older kptr's tree: want refused (exit 3) naming it and the fix, got %v", err)
	}
	rep, err := openTest(t, dir).Verify(ctx, false)
	if err != nil || len(rep.Corrupt) != 1 || !strings.Contains(rep.Corrupt[0], "extracted by an older kptr") {
		t.Errorf("verify of an older kptr's tree: %+v %v", rep, err)
	}
	b := resolve(t, WithOffline(true))
	if _, err := os.Lstat(filepath.Join(b.Rootfs, "tmp", "planted")); err == nil {
		t.Error("the planted file is in the tree handed out: it was not extracted again")
	}
	if loose := looseTree(t, b.Rootfs); len(loose) > 0 {
		t.Errorf("extracted again with loose modes:\n%s", strings.Join(loose, "\n"))
	}
	if rep, err := openTest(t, dir).Verify(ctx, false); err != nil || len(rep.Corrupt) != 0 {
		t.Errorf("verify after the tree was extracted again: %+v %v", rep, err)
	}

	// verify --repair removes an older kptr's tree, and one the owner
	// opened to others since, or handed an entry of to another uid
	spoils := map[string]func(){
		"extracted by an older kptr": func() { asOlderKptr(t, dir, d.Hex) },
		"data has mode drwxrwxrwx":   func() { chmodFor(t, filepath.Join(img, "rootfs", "data"), 0o022) },
	}
	if os.Geteuid() == 0 {
		spoils["is owned by uid 999"] = func() {
			if err := os.Lchown(filepath.Join(img, "rootfs", "data", "conf"), 999, 999); err != nil {
				t.Fatal(err)
			}
		}
	}
	for says, spoil := range spoils {
		spoil()
		c := openTest(t, dir)
		rep, err := c.Verify(ctx, true)
		if err != nil || len(rep.Corrupt) != 1 || !strings.Contains(rep.Corrupt[0], says) || len(rep.Repaired) != 1 || !strings.Contains(rep.Repaired[0], "removed rootfs") {
			t.Errorf("verify --repair, want %q: %+v %v", says, rep, err)
		}
		if _, err := os.Lstat(img); err == nil {
			t.Error("verify --repair left the tree")
		}
		resolve(t, WithOffline(true))
	}
}
