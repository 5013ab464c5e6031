package landlock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

var (
	llOnce sync.Once
	ll     *Sandbox
	llErr  error
)

// landlock is the landlock tier shared by the tests (skipped where the
// kernel has no Landlock).
func landlock(t testing.TB) *Sandbox {
	llOnce.Do(func() { ll, llErr = New() })
	if llErr != nil {
		if landlockABI() == 0 {
			t.Skipf("no Landlock here: %v", llErr)
		}
		t.Fatalf("NewLandlock: %v", llErr)
	}
	return ll
}

// glibcRootfs is an image with the host's dynamically linked cat and echo,
// their libc and interpreter at the paths the binaries name, a symlink to
// echo under another name, and a "#!" script run by the image's busybox.
func glibcRootfs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testTmp, "glibc-rootfs")
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	for _, f := range []string{"/usr/bin/cat", "/usr/bin/echo", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"} {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Skipf("no %s here: %v", f, err)
		}
		must(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		copyFile(t, real, filepath.Join(dir, f), 0o755)
	}
	must(t, os.Symlink("/usr/bin/echo", filepath.Join(dir, "usr/bin/say")))
	must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	copyFile(t, "/bin/busybox", filepath.Join(dir, "bin/busybox"), 0o755)
	must(t, os.Symlink("busybox", filepath.Join(dir, "bin/sh")))
	must(t, os.WriteFile(filepath.Join(dir, "usr/bin/script"), []byte("#!/bin/sh -e\necho \"script: $1 $0\"\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "etc-data"), []byte("x"), 0o644))
	return dir
}

// Entrypoints start from the image: a dynamically linked one through the
// image's own interpreter and libc, under the name it was called by; a
// script through its interpreter from the image.
func TestLandlockDynamicEntrypoints(t *testing.T) {
	if goruntime.GOARCH != "amd64" {
		t.Skip("the fixture image copies x86-64 glibc")
	}
	rootfs := glibcRootfs(t)
	for _, tc := range []struct {
		entry []string
		stdin string
		want  string
	}{
		{[]string{"/usr/bin/cat"}, "kind: ResourceList\n", "kind: ResourceList\n"},
		{[]string{"say", "hello"}, "", "hello\n"},
		{[]string{"/usr/bin/script", "arg"}, "", "script: arg "},
	} {
		b := bundle.Bundle{Ref: "example.test/glibc:v1", Rootfs: rootfs, Config: v1.Config{Entrypoint: tc.entry, Env: []string{imagePath}}}
		res, err := landlock(t).Run(context.Background(), b, runtime.Invocation{Stdin: strings.NewReader(tc.stdin)})
		if err != nil || res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), tc.want) {
			t.Errorf("%v: %v exit %d stdout %q stderr %q", tc.entry, err, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
}

// Images whose entrypoint cannot start without the image as the root fail
// with an error naming the image and the reason; so does a function that
// reads its own image's files by absolute path (what this tier cannot give).
func TestLandlockEntrypointErrors(t *testing.T) {
	broken := filepath.Join(testTmp, "broken-rootfs")
	must(t, os.MkdirAll(filepath.Join(broken, "bin"), 0o755))
	must(t, os.WriteFile(filepath.Join(broken, "bin/garbage"), []byte("\x7fELF garbage"), 0o755))
	must(t, os.WriteFile(filepath.Join(broken, "bin/text"), []byte("just text\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(broken, "bin/relscript"), []byte("#!sh\n"), 0o755))
	if goruntime.GOARCH == "amd64" {
		copyFile(t, "/usr/bin/cat", filepath.Join(broken, "bin/nointerp"), 0o755) // its /lib64/ld-linux-x86-64.so.2 is not in the image
	}
	for entry, want := range map[string]string{
		"/bin/garbage":   "exec format error",
		"/bin/text":      "exec format error",
		"/bin/relscript": `interpreter "sh" is not absolute`,
		"/bin/nointerp":  "interpreter /lib64/ld-linux-x86-64.so.2 is not an executable file in the image",
	} {
		if _, err := os.Stat(filepath.Join(broken, entry)); err != nil {
			continue
		}
		b := bundle.Bundle{Ref: "example.test/broken:v1", Rootfs: broken, Config: v1.Config{Entrypoint: []string{entry}}}
		_, err := landlock(t).Run(context.Background(), b, runtime.Invocation{})
		if err == nil || !strings.HasPrefix(err.Error(), "example.test/broken:v1: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want an error naming the image and %q, got %v", entry, want, err)
		}
	}
	_, err := landlock(t).Run(context.Background(), testBundle(t, "noread"), runtime.Invocation{Mounts: []runtime.Mount{{Source: testTmp, Target: "/work"}}})
	if !errors.Is(err, ErrMounts) {
		t.Errorf("mounts: %v", err)
	}
	// The documented limit: /etc/hostname of the image is not the
	// function's /etc/hostname.
	res, err := landlock(t).Run(context.Background(), testBundle(t, "read", "/etc/hostname"), runtime.Invocation{})
	if f := facts(string(res.Stdout)); err != nil || !strings.Contains(f["/etc/hostname"], "permission denied") {
		t.Errorf("absolute path of an image file: %v %q", err, res.Stdout)
	}
}

// When kptr is SIGKILLed mid-run, the launcher (parent-death signal) ends
// every process of the run, also a child in its own session that ignores
// SIGTERM.
func TestLandlockFunctionDiesWithKptr(t *testing.T) {
	diesWithKptr(t, "TestLandlockFunctionDiesWithKptr", func(marker string) {
		_, err := landlock(t).Run(context.Background(), testBundle(t, "forksleep", marker), runtime.Invocation{Timeout: time.Minute})
		t.Fatalf("the run ended: %v", err)
	})
}

// A networked run resolves names by the host's configuration (as the
// namespace tier binds the host's resolv.conf); without the network it is
// denied like every host file.
func TestLandlockResolverConfigOnlyWithNetwork(t *testing.T) {
	if _, err := os.Stat("/etc/resolv.conf"); err != nil {
		t.Skip("no /etc/resolv.conf here")
	}
	for _, network := range []bool{false, true} {
		res, err := landlock(t).Run(context.Background(), testBundle(t, "read", "/etc/resolv.conf"), runtime.Invocation{Network: network})
		got := facts(string(res.Stdout))["/etc/resolv.conf"]
		if err != nil || strings.HasPrefix(got, "readable") != network {
			t.Errorf("network %v: %v %q", network, err, got)
		}
	}
}
