// Package runtimetest holds what the sandbox tiers' test suites share: the
// hand-built test image with the hostile fixture, bundles of it, and the
// checks on the host (processes left, a tree unchanged). Test code only.
package runtimetest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// ImagePath is the test image's PATH, as its Env holds it.
const ImagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ImageTmpFile is a file in the test image's own /tmp: no run's /tmp shows it.
const ImageTmpFile = "from-image"

var (
	rootfsOnce sync.Once
	rootfsDir  string
	directDir  string
)

// DirectRootfs is Rootfs with the mount points catalog images have (/proc,
// /dev), so that the namespace tier uses it directly as its root.
func DirectRootfs(t testing.TB, tmp string) string {
	Rootfs(t, tmp)
	return directDir
}

// Rootfs is a catalog-shaped root filesystem, built by hand once per test
// binary below tmp: busybox with /bin/sh, /etc/passwd with root and nobody (home
// /home/nobody), /tmp 0755 holding a file (as the cache extracts every
// image: its 1777 /tmp is the run's own, cache.treeMode), the hostile
// fixture as /usr/local/bin/function and a setuid copy of it as
// /usr/local/bin/suid.
func Rootfs(t testing.TB, testTmp string) string {
	rootfsOnce.Do(func() {
		bin := fnimage.Binary(t, "hostile")
		dir := filepath.Join(testTmp, "cache", "rootfs")
		files := map[string]string{
			"etc/passwd":      "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home/nobody:/bin/false\nfn:x:1234:2345:fn:/:/bin/sh\n",
			"etc/group":       "root:x:0:\nnobody:x:65534:\nfngroup:x:3456:\n",
			"etc/resolv.conf": "nameserver 192.0.2.1\n",
			"etc/hostname":    "image\n",
		}
		for _, d := range []string{"bin", "etc", "root", "home/nobody", "usr/local/bin", "usr/bin", "var/empty", "work"} {
			Must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
		}
		Must(t, os.Chmod(filepath.Join(dir, "root"), 0o700))
		Must(t, os.Mkdir(filepath.Join(dir, "tmp"), 0o755))
		Must(t, os.Chmod(filepath.Join(dir, "tmp"), 0o755))
		Must(t, os.WriteFile(filepath.Join(dir, "tmp", ImageTmpFile), []byte("image"), 0o644))
		for p, c := range files {
			Must(t, os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644))
		}
		CopyFile(t, "/bin/busybox", filepath.Join(dir, "bin/busybox"), 0o755)
		for _, a := range []string{"sh", "cat", "ls", "id", "sleep", "echo", "env", "true", "touch", "mkdir", "wc"} {
			Must(t, os.Symlink("busybox", filepath.Join(dir, "bin", a)))
		}
		Must(t, os.Symlink("/bin/busybox", filepath.Join(dir, "usr/bin/abs-busybox")))
		CopyFile(t, bin, filepath.Join(dir, "usr/local/bin/function"), 0o755)
		CopyFile(t, bin, filepath.Join(dir, "usr/local/bin/suid"), 0o755)
		Must(t, os.Chmod(filepath.Join(dir, "usr/local/bin/suid"), 0o4755))
		Must(t, os.Symlink("usr/bin", filepath.Join(dir, "sbin")))
		rootfsDir = dir
		// The same image with the mount points catalog images have (/proc,
		// /dev), so the sandbox uses it directly as its root.
		direct := filepath.Join(testTmp, "cache", "rootfs-direct")
		if out, err := exec.Command("cp", "-a", dir, direct).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		Must(t, os.Mkdir(filepath.Join(direct, "proc"), 0o755))
		Must(t, os.Mkdir(filepath.Join(direct, "dev"), 0o755))
		directDir = direct
	})
	if rootfsDir == "" {
		t.Fatal("test rootfs could not be built")
	}
	return rootfsDir
}

// Bundle is the test image running the hostile fixture with cmd.
func Bundle(t testing.TB, tmp string, cmd ...string) bundle.Bundle {
	return bundle.Bundle{
		Ref:    "example.test/hostile:v1",
		Rootfs: Rootfs(t, tmp),
		Config: v1.Config{Entrypoint: []string{"function"}, Cmd: cmd, Env: []string{ImagePath, "IMAGE_VAR=from-image"}},
	}
}

// Facts parses the hostile fixture's "key: value" lines.
func Facts(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k] = v
		}
	}
	return m
}

// Must fails the test on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CopyFile copies src to dst with mode.
func CopyFile(t testing.TB, src, dst string, mode os.FileMode) {
	b, err := os.ReadFile(src)
	Must(t, err)
	Must(t, os.WriteFile(dst, b, mode))
	Must(t, os.Chmod(dst, mode))
}

// Snapshot hashes paths, modes, owners, sizes, times and contents.
func Snapshot(t testing.TB, root string) string {
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d %v\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	Must(t, err)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// ProcessesWith lists host pids whose command line contains marker.
func ProcessesWith(marker string) []string {
	var out []string
	des, _ := os.ReadDir("/proc")
	for _, d := range des {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if bytes.Contains(b, []byte(marker)) {
			out = append(out, d.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// BlockingReader never returns from Read: a stdin that is never closed.
type BlockingReader struct{}

func (BlockingReader) Read([]byte) (int, error) { select {} }
