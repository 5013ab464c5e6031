package cache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/test/cosigner"
)

// tamper is one way another user gets hold of a cache entry: a mode that
// lets group or others write it, another uid as owner (as root only), or
// a link in its place. Each returns a function that undoes it.
var tampers = map[string]func(t *testing.T, p string) (undo func()){
	"writable by group":  func(t *testing.T, p string) func() { return chmodFor(t, p, 0o020) },
	"writable by others": func(t *testing.T, p string) func() { return chmodFor(t, p, 0o002) },
	"owned by uid 999": func(t *testing.T, p string) func() {
		if os.Geteuid() != 0 {
			return nil
		}
		if err := os.Lchown(p, 999, 999); err != nil {
			t.Fatal(err)
		}
		return func() { os.Lchown(p, 0, 0) }
	},
	"a symbolic link": func(t *testing.T, p string) func() {
		if err := os.Rename(p, p+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(p)+".real", p); err != nil {
			t.Fatal(err)
		}
		return func() { os.Remove(p); os.Rename(p+".real", p) }
	},
}

func chmodFor(t *testing.T, p string, bits os.FileMode) func() {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, fi.Mode().Perm()|bits); err != nil {
		t.Fatal(err)
	}
	return func() { os.Chmod(p, fi.Mode().Perm()) }
}

// Open refuses a cache any entry of whose layout another user could have
// written (issue 30: wasm/ and verdicts/ were not checked), naming the
// entry; the list is Layout, the one the check walks, so a name added to
// the layout is tested here the day it is added.
func TestOpenChecksEveryLayoutEntry(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir).Close()
	for _, name := range Layout() {
		rel, isDir := strings.CutSuffix(name, "/")
		p := filepath.Join(dir, rel)
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			if !isDir {
				t.Fatalf("Open did not make %s", name)
			}
			if err := os.Mkdir(p, 0o755); err != nil { // made on first use (verdicts/, wasm/, memo/)
				t.Fatal(err)
			}
		}
		if _, err := Open(dir); err != nil {
			t.Fatalf("%s as kptr makes it refused: %v", name, err)
		}
		for how, tamper := range tampers {
			undo := tamper(t, p)
			if undo == nil {
				continue
			}
			_, err := Open(dir)
			undo()
			var ce *Error
			if err == nil || !errors.As(err, &ce) || ce.ExitCode() != 3 || !strings.Contains(err.Error(), p+" ") {
				t.Errorf("%s %s: want Open refused (exit 3) naming it, got %v", name, how, err)
			}
		}
	}
	if _, err := Open(dir); err != nil {
		t.Fatalf("after the cases: %v", err)
	}
}

// What lies beneath the layout is checked where it is read: an unpacked
// image's directory, its rootfs/ and meta.json before its bundle is handed
// out, a blob when it is opened.
func TestResolveChecksWhatItReads(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/owned:v1"
	d := push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "x")), ref)
	dir := t.TempDir()
	if _, err := openTest(t, dir).Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, rootfsDir, d.Hex)
	for _, p := range []string{img, filepath.Join(img, "rootfs"), filepath.Join(img, "meta.json")} {
		for how, tamper := range tampers {
			undo := tamper(t, p)
			if undo == nil {
				continue
			}
			_, err := openTest(t, dir, WithOffline(true)).Resolve(ctx, ref)
			undo()
			var ce *Error
			if err == nil || !errors.As(err, &ce) || ce.ExitCode() != 3 || !strings.Contains(err.Error(), p+" ") {
				t.Errorf("%s %s: want the resolve refused (exit 3) naming it, got %v", p, how, err)
			}
		}
	}
	// a blob: the manifest, read again when the image is unpacked anew
	if err := os.RemoveAll(img); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, blobsDir, d.Hex)
	undo := tampers["writable by others"](t, blob)
	_, err := openTest(t, dir, WithOffline(true)).Resolve(ctx, ref)
	undo()
	if err == nil || !strings.Contains(err.Error(), blob+" ") {
		t.Errorf("manifest blob writable by others: want the resolve refused naming it, got %v", err)
	}
	if b, err := openTest(t, dir, WithOffline(true)).Resolve(ctx, ref); err != nil || b.Digest != d {
		t.Fatalf("after the cases: %v", err)
	}
}

// A verdict is a file whose presence says "allowed": it counts only if the
// rule holds for it. A verdict for an image the policy refuses, planted
// where the policy would find it, is ignored (the policy decides again,
// and refuses) unless it is the user's own, private file: that control
// proves the planted file is where a verdict is looked up.
func TestVerdictCountsOnlyWhenTheOwners(t *testing.T) {
	reg := newTestRegistry(t)
	ref, d, p, _ := signedFixture(t, reg, "fn/verdict")
	dir := t.TempDir()
	if _, err := openTest(t, dir, WithSignaturePolicy(p)).Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	other := policyFor(t, reg.Host, cosigner.NewKey(t))
	c := openTest(t, dir, WithSignaturePolicy(other), WithOffline(true))
	ir, err := c.parseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	set, ok := c.sigsetFor(ir.key, d)
	if !ok {
		t.Fatal("no signature set recorded")
	}
	forged := c.verdictPath(other, ir, d, set)
	plant := func(t *testing.T) {
		t.Helper()
		os.Remove(forged)
		if err := os.WriteFile(forged, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for how, tamper := range tampers {
		plant(t)
		if tamper(t, forged) == nil {
			continue
		}
		_, err := openTest(t, dir, WithSignaturePolicy(other), WithOffline(true)).Resolve(ctx, ref)
		if !RefusedBySignaturePolicy(err) {
			t.Errorf("a verdict %s counted: %v", how, err)
		}
	}
	plant(t)
	if _, err := openTest(t, dir, WithSignaturePolicy(other), WithOffline(true)).Resolve(ctx, ref); err != nil {
		t.Fatalf("control: the user's own verdict did not count: %v", err)
	}
}
