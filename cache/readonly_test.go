package cache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A pre-warmed cache on a read-only volume still resolves what it holds.
func TestReadOnlyCacheResolves(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/ro:v1"
	d := push(t, image(t, false, HostPlatform().Architecture, layerWith(t, "ro")), ref)
	dir := t.TempDir()
	c := openTest(t, dir)
	if _, err := c.Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	c.Close()
	reg.Close()

	ro := dir
	if os.Geteuid() == 0 {
		ro = t.TempDir()
		if err := syscall.Mount(dir, ro, "", syscall.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount: %v", err)
		}
		t.Cleanup(func() { syscall.Unmount(ro, syscall.MNT_DETACH) })
		if err := syscall.Mount("", ro, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
			t.Fatalf("remount read-only: %v", err)
		}
	} else {
		// every directory of the cache but the image's own tree, whose
		// modes its marker holds (verify below hashes them)
		filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				if filepath.Base(p) == "rootfs" && filepath.Dir(filepath.Dir(p)) == filepath.Join(dir, rootfsDir) {
					return filepath.SkipDir
				}
				os.Chmod(p, 0o555)
			}
			return nil
		})
		t.Cleanup(func() {
			filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.IsDir() {
					os.Chmod(p, 0o755)
				}
				return nil
			})
		})
	}
	rc := openTest(t, ro)
	if !rc.readOnly {
		t.Fatal("read-only cache not detected")
	}
	b, err := rc.Resolve(ctx, ref)
	if err != nil || b.Digest != d || readFile(t, filepath.Join(b.Rootfs, "arch")) != "ro" {
		t.Fatalf("read-only resolve: %v", err)
	}
	if _, err := rc.Resolve(ctx, reg.Host+"/fn/missing:v1"); err == nil {
		t.Fatal("miss on a read-only cache resolved")
	}
	if rep, err := rc.Verify(ctx, false); err != nil || len(rep.Corrupt) != 0 {
		t.Fatalf("verify read-only: %+v %v", rep, err)
	}
}
