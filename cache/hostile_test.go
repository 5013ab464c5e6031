package cache

import (
	"archive/tar"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// snapshot records every path, mode and content under dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			v += ":" + string(b)
		}
		out[p] = v
		return nil
	})
	return out
}

func TestHostileImages(t *testing.T) {
	reg := newTestRegistry(t)
	// The sentinel tree sits beside the cache, at a depth the ../ chains reach.
	top := t.TempDir()
	sentinel := filepath.Join(top, "sentinel")
	os.MkdirAll(sentinel, 0o755)
	os.WriteFile(filepath.Join(sentinel, "file"), []byte("precious"), 0o644)
	cacheDir := filepath.Join(top, "cache")
	up := strings.Repeat("../", 12) // more than enough to leave any root
	absSentinel := strings.TrimPrefix(sentinel, "/")

	zeros := strings.Repeat("\x00", 32<<20)
	many := []entry{}
	for i := 0; i < 50; i++ {
		many = append(many, file("f"+strings.Repeat("x", i), "x"))
	}
	cases := []struct {
		name   string
		layers []v1.Layer
		tamper func([]byte) []byte // applied to the last layer's blob
		want   string
	}{
		{"dotdot", []v1.Layer{gzipLayer(t, file(up+absSentinel+"/pwned", "x"))}, nil, "escapes the root"},
		{"absolute path", []v1.Layer{gzipLayer(t, file("/"+absSentinel+"/pwned", "x"))}, nil, "absolute path"},
		{"relative symlink then write through", []v1.Layer{gzipLayer(t, symlink("evil", up+absSentinel), file("evil/pwned", "x"))}, nil, "outside the root"},
		{"symlink in lower layer then write through", []v1.Layer{gzipLayer(t, symlink("evil", up+absSentinel)), gzipLayer(t, file("evil/file", "overwritten"))}, nil, "outside the root"},
		{"hard link to outside", []v1.Layer{gzipLayer(t, hardlink("link", up+absSentinel+"/file"))}, nil, "outside the root"},
		{"hard link through symlink to outside", []v1.Layer{gzipLayer(t, symlink("evil", up+absSentinel), hardlink("link", "evil/file"))}, nil, "outside the root"},
		{"bare whiteout", []v1.Layer{gzipLayer(t, file("etc/x", "x")), gzipLayer(t, file("etc/.wh.", ""))}, nil, "bare or invalid whiteout"},
		{"whiteout naming a path outside", []v1.Layer{gzipLayer(t, file(up+absSentinel+"/.wh.file", ""))}, nil, "escapes the root"},
		{"whiteout through symlink outside", []v1.Layer{gzipLayer(t, symlink("evil", up+absSentinel), file("evil/.wh.file", ""))}, nil, "outside the root"},
		{"gzip bomb over the limit", []v1.Layer{gzipLayer(t, file("bomb", zeros))}, nil, "size limit"},
		{"too many files", []v1.Layer{gzipLayer(t, many...)}, nil, "file limit"},
		{"blob content does not match digest", []v1.Layer{gzipLayer(t, file("a", "a"))}, func(b []byte) []byte {
			c := append([]byte(nil), b...)
			c[len(c)/2] ^= 0xff
			return c
		}, "sha256"},
		{"truncated blob", []v1.Layer{gzipLayer(t, file("a", strings.Repeat("a", 4096)))}, func(b []byte) []byte { return b[:len(b)/2] }, "blob"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, sentinel)
			ref := reg.Host + "/hostile/case:" + string(rune('a'+i))
			img := image(t, false, HostPlatform().Architecture, tc.layers...)
			push(t, img, ref)
			if tc.tamper != nil {
				d, _ := tc.layers[len(tc.layers)-1].Digest()
				reg.mu.Lock()
				reg.tamper[d.String()] = tc.tamper
				reg.mu.Unlock()
			}
			c := openTest(t, cacheDir, WithLimits(Limits{MaxBytes: 8 << 20, MaxFiles: 20}))
			_, err := c.Resolve(ctx, ref)
			if err == nil {
				t.Fatal("hostile image resolved")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ref) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line naming %s and %q", err, ref, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.ExitCode() != 3 {
				t.Fatalf("exit code: %v", err)
			}
			if n := dirEntries(c.path(rootfsDir)); len(n) != 0 {
				t.Fatalf("rootfs committed: %v", n)
			}
			if n := dirEntries(c.path(tmpDir)); len(n) != 0 {
				t.Fatalf("temporary debris left: %v", n)
			}
			if _, _, ok := c.lookup(ref, HostPlatform()); ok {
				t.Fatal("resolution recorded for a failed image")
			}
			after := snapshot(t, sentinel)
			if len(after) != len(before) {
				t.Fatalf("sentinel tree changed: %v", after)
			}
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("sentinel %s changed: %q → %q", k, v, after[k])
				}
			}
		})
	}
}

// Inputs that are not errors but must be neutralised.
func TestUnpackSanitises(t *testing.T) {
	reg := newTestRegistry(t)
	top := t.TempDir()
	sentinel := filepath.Join(top, "sentinel")
	os.MkdirAll(sentinel, 0o755)
	os.WriteFile(filepath.Join(sentinel, "file"), []byte("precious"), 0o644)
	abs := "/" + strings.TrimPrefix(sentinel, "/")
	l := gzipLayer(t,
		entry{name: "dev/evil", typ: tar.TypeChar, mode: 0o666},
		entry{name: "dev/blk", typ: tar.TypeBlock, mode: 0o666},
		entry{name: "fifo", typ: tar.TypeFifo, mode: 0o666},
		entry{name: "bin/su", body: "suid", typ: tar.TypeReg, mode: 0o4755},
		entry{name: "bin/sg", body: "sgid", typ: tar.TypeReg, mode: 0o2755},
		entry{name: "tmp", typ: tar.TypeDir, mode: 0o1777},
		// An absolute symlink resolves inside the root, as under chroot.
		symlink("abs", abs),
		file("abs/file", "inside"),
		symlink("dangling", "/proc/self/root"),
	)
	ref := reg.Host + "/fn/sanitise:v1"
	push(t, image(t, false, HostPlatform().Architecture, l), ref)
	c := openTest(t, filepath.Join(top, "cache"))
	b, err := c.Resolve(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"dev/evil", "dev/blk", "fifo"} {
		if _, err := os.Lstat(filepath.Join(b.Rootfs, p)); err == nil {
			t.Errorf("%s created", p)
		}
	}
	for _, p := range []string{"bin/su", "bin/sg"} {
		fi, err := os.Stat(filepath.Join(b.Rootfs, p))
		if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s mode %v %v", p, fi.Mode(), err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(b.Rootfs, "tmp")); fi.Mode() != os.ModeDir|0o755 {
		t.Errorf("tmp mode %v, want 0755: the image's 1777 is for the run's own /tmp (TestExtractedTreeWritableByNoOtherUser)", fi.Mode())
	}
	if got := readFile(t, filepath.Join(b.Rootfs, sentinel, "file")); got != "inside" {
		t.Errorf("absolute symlink write-through landed elsewhere: %q", got)
	}
	if got := readFile(t, filepath.Join(sentinel, "file")); got != "precious" {
		t.Fatalf("sentinel overwritten: %q", got)
	}
}
