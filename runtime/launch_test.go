package runtime

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/cache"
)

// launcherOf sets up (without starting) the sandbox of one run of b and
// says which launcher would start it.
func launcherOf(t *testing.T, s *Sandbox, b cache.Bundle, inv Invocation) string {
	t.Helper()
	st, err := s.setup(b, inv)
	must(t, err)
	defer st.destroy(s.log)
	return st.ct.kind()
}

// defaultLauncher is what this test binary's sandboxes use: nsinit, unless
// the suite runs again with KPTR_LAUNCHER=libcontainer (make test).
func defaultLauncher() string {
	if os.Getenv("KPTR_LAUNCHER") == LauncherLibcontainer {
		return LauncherLibcontainer
	}
	return LauncherNsinit
}

// Runs start through nsinit by default, both ways the root is built;
// WithLauncher (KPTR_LAUNCHER) picks libcontainer; a bad name is refused.
func TestLauncherChoice(t *testing.T) {
	bothRootfs(t, func(t *testing.T, rootfs string) {
		b := bundle(t)
		b.Rootfs = rootfs
		if got := launcherOf(t, sandbox(t), b, Invocation{}); got != defaultLauncher() {
			t.Errorf("launcher %s, want %s", got, defaultLauncher())
		}
	})
	lc, err := New(WithStateDir(filepath.Join(testTmp, "state-launcher")), WithLauncher(LauncherLibcontainer))
	must(t, err)
	defer lc.Close()
	if got := launcherOf(t, lc, bundle(t), Invocation{}); got != LauncherLibcontainer {
		t.Errorf("WithLauncher(libcontainer): launcher %s", got)
	}
	if _, err := New(WithLauncher("crun")); err == nil || !strings.Contains(err.Error(), `unknown sandbox launcher "crun"`) {
		t.Errorf("bad launcher name: %v", err)
	}
}

// A mount target below a symbolic link of the image ($HOME in /usr/hl/fn,
// where /usr/hl links to ../var/home): nsinit refuses to cross any link, so
// such a run goes to libcontainer, which resolves the link inside the root,
// and works: $HOME is its own writable tmpfs.
func TestLauncherHomeBelowImageLink(t *testing.T) {
	dir := filepath.Join(testTmp, "cache", "rootfs-linked-home")
	if out, err := exec.Command("cp", "-a", directRootfs(t), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	must(t, os.MkdirAll(filepath.Join(dir, "var/home/fn"), 0o755))
	must(t, os.Symlink("../var/home", filepath.Join(dir, "usr/hl")))
	must(t, os.WriteFile(filepath.Join(dir, "etc/passwd"),
		[]byte("root:x:0:0:root:/usr/hl/fn:/bin/sh\nnobody:x:65534:65534:nobody:/usr/hl/fn:/bin/false\n"), 0o644))
	b := bundle(t)
	b.Rootfs = dir
	b.Config.Entrypoint = []string{"/bin/sh", "-c", `echo "home: $HOME"; touch "$HOME/x" && echo "wrote: yes"`}
	if got := launcherOf(t, sandbox(t), b, Invocation{}); got != LauncherLibcontainer {
		t.Errorf("launcher %s for a $HOME below an image link, want libcontainer", got)
	}
	res, err := sandbox(t).Run(context.Background(), b, Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
	}
	if f := facts(string(res.Stdout)); f["home"] != "/usr/hl/fn" || f["wrote"] != "yes" {
		t.Fatalf("got %q", res.Stdout)
	}
}

// As root, an image below a directory the run's uids cannot traverse (a
// cache in /root): nsinit attaches it into the run's mount namespace from a
// mount tree kptr opened, both ways the root is built; the run sees the
// image, the host sees no mount and the image is unchanged.
func TestLauncherStagedImage(t *testing.T) {
	if !canMapRange() {
		t.Skip("as root only: unprivileged, a run's uid is kptr's own")
	}
	private := filepath.Join(testTmp, "private")
	must(t, os.MkdirAll(private, 0o700))
	must(t, os.Chmod(private, 0o700))
	for name, src := range map[string]string{"bound": testRootfs(t), "direct": directRootfs(t)} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(private, name)
			if out, err := exec.Command("cp", "-a", src, dir).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			before := snapshot(t, dir)
			b := bundle(t, "read", "/etc/hostname")
			b.Rootfs = dir
			if got := launcherOf(t, sandbox(t), b, Invocation{}); got != defaultLauncher() {
				t.Errorf("launcher %s, want %s", got, defaultLauncher())
			}
			_, f := runIn(t, dir, Invocation{}, "read", "/etc/hostname")
			if f["/etc/hostname"] != "readable 6 bytes" {
				t.Errorf("the image's /etc/hostname: %q", f["/etc/hostname"])
			}
			mi, err := os.ReadFile("/proc/self/mountinfo")
			must(t, err)
			if strings.Contains(string(mi), ".img ") {
				t.Errorf("an image mount point is mounted on the host:\n%s", mi)
			}
			if after := snapshot(t, dir); after != before {
				t.Error("the image changed")
			}
		})
	}
}
