package runtime

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/test/fnimage"
)

var testTmp string

func TestMain(m *testing.M) {
	HandleInit()
	ReexecSealed()
	var err error
	if testTmp, err = os.MkdirTemp("", "kptr-runtime-test-"); err != nil {
		panic(err)
	}
	os.Chmod(testTmp, 0o755) // a function's mapped uid must reach the rootfs
	code := m.Run()
	if n := nsinitFallbacks.Load(); n > 0 && code == 0 {
		// Here nsinit must start every run it is given: a fallback to
		// libcontainer would hide its failure behind a passing suite.
		fmt.Fprintf(os.Stderr, "FAIL: nsinit failed to start %d run(s) and libcontainer started them (last: %v)\n", n, nsinitLastFail.Load())
		code = 1
	}
	os.RemoveAll(testTmp)
	os.Exit(code)
}

const imagePath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

var (
	rootfsOnce sync.Once
	rootfsDir  string
	directDir  string
)

// directRootfs is testRootfs with /proc and /dev mount points.

// bothRootfs runs f against each way the sandbox builds its root.
func bothRootfs(t *testing.T, f func(t *testing.T, rootfs string)) {
	t.Run("bound", func(t *testing.T) { f(t, testRootfs(t)) })
	t.Run("direct", func(t *testing.T) { f(t, directRootfs(t)) })
}

func directRootfs(t testing.TB) string {
	testRootfs(t)
	return directDir
}

// testRootfs is a catalog-shaped root filesystem, built by hand once per test
// binary: busybox with /bin/sh, /etc/passwd with root and nobody (home
// /home/nobody), /tmp 1777, the hostile fixture as /usr/local/bin/function
// and a setuid copy of it as /usr/local/bin/suid.
func testRootfs(t testing.TB) string {
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
			must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
		}
		must(t, os.Chmod(filepath.Join(dir, "root"), 0o700))
		must(t, os.Mkdir(filepath.Join(dir, "tmp"), 0o755))
		must(t, os.Chmod(filepath.Join(dir, "tmp"), 0o1777))
		for p, c := range files {
			must(t, os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644))
		}
		copyFile(t, "/bin/busybox", filepath.Join(dir, "bin/busybox"), 0o755)
		for _, a := range []string{"sh", "cat", "ls", "id", "sleep", "echo", "env", "true", "touch", "mkdir", "wc"} {
			must(t, os.Symlink("busybox", filepath.Join(dir, "bin", a)))
		}
		must(t, os.Symlink("/bin/busybox", filepath.Join(dir, "usr/bin/abs-busybox")))
		copyFile(t, bin, filepath.Join(dir, "usr/local/bin/function"), 0o755)
		copyFile(t, bin, filepath.Join(dir, "usr/local/bin/suid"), 0o755)
		must(t, os.Chmod(filepath.Join(dir, "usr/local/bin/suid"), 0o4755))
		must(t, os.Symlink("usr/bin", filepath.Join(dir, "sbin")))
		rootfsDir = dir
		// The same image with the mount points catalog images have (/proc,
		// /dev), so the sandbox uses it directly as its root.
		direct := filepath.Join(testTmp, "cache", "rootfs-direct")
		if out, err := exec.Command("cp", "-a", dir, direct).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		must(t, os.Mkdir(filepath.Join(direct, "proc"), 0o755))
		must(t, os.Mkdir(filepath.Join(direct, "dev"), 0o755))
		directDir = direct
	})
	if rootfsDir == "" {
		t.Fatal("test rootfs could not be built")
	}
	return rootfsDir
}

func bundle(t testing.TB, cmd ...string) cache.Bundle {
	return cache.Bundle{
		Ref:    "example.test/hostile:v1",
		Rootfs: testRootfs(t),
		Config: v1.Config{Entrypoint: []string{"function"}, Cmd: cmd, Env: []string{imagePath, "IMAGE_VAR=from-image"}},
	}
}

var (
	sbOnce sync.Once
	sb     *Sandbox
	sbErr  error
)

func sandbox(t testing.TB) *Sandbox {
	sbOnce.Do(func() { sb, sbErr = New() })
	if sbErr != nil {
		t.Fatalf("New: %v", sbErr)
	}
	return sb
}

// run runs the hostile fixture with args and returns its output as
// "key: value" facts.
func run(t *testing.T, inv Invocation, args ...string) (Result, map[string]string) {
	t.Helper()
	return runIn(t, testRootfs(t), inv, args...)
}

// runIn is run with another rootfs (directRootfs: the sandbox's root is
// the cached rootfs itself rather than a directory of binds).
func runIn(t *testing.T, rootfs string, inv Invocation, args ...string) (Result, map[string]string) {
	t.Helper()
	b := bundle(t, args...)
	b.Rootfs = rootfs
	res, err := sandbox(t).Run(context.Background(), b, inv)
	if err != nil {
		t.Fatalf("run %v: %v (stderr %q)", args, err, res.Stderr)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %v: exit %d, stderr %q", args, res.ExitCode, res.Stderr)
	}
	return res, facts(string(res.Stdout))
}

func facts(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k] = v
		}
	}
	return m
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.WriteFile(dst, b, mode))
	must(t, os.Chmod(dst, mode))
}
