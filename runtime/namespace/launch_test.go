package namespace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"golang.org/x/sys/unix"
)

// launcherOf sets up (without starting) the sandbox of one run of b and
// says which launcher would start it.
func launcherOf(t *testing.T, s *Sandbox, b bundle.Bundle, inv runtime.Invocation) string {
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
		b := testBundle(t)
		b.Rootfs = rootfs
		if got := launcherOf(t, sandbox(t), b, runtime.Invocation{}); got != defaultLauncher() {
			t.Errorf("launcher %s, want %s", got, defaultLauncher())
		}
	})
	lc, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-launcher")), WithLauncher(LauncherLibcontainer))
	must(t, err)
	defer lc.Close()
	if got := launcherOf(t, lc, testBundle(t), runtime.Invocation{}); got != LauncherLibcontainer {
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
	b := testBundle(t)
	b.Rootfs = dir
	b.Config.Entrypoint = []string{"/bin/sh", "-c", `echo "home: $HOME"; touch "$HOME/x" && echo "wrote: yes"`}
	if got := launcherOf(t, sandbox(t), b, runtime.Invocation{}); got != LauncherLibcontainer {
		t.Errorf("launcher %s for a $HOME below an image link, want libcontainer", got)
	}
	res, err := sandbox(t).Run(context.Background(), b, runtime.Invocation{})
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
	if !runtime.CanMapRange() {
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
			b := testBundle(t, "read", "/etc/hostname")
			b.Rootfs = dir
			if got := launcherOf(t, sandbox(t), b, runtime.Invocation{}); got != defaultLauncher() {
				t.Errorf("launcher %s, want %s", got, defaultLauncher())
			}
			_, f := runIn(t, dir, runtime.Invocation{}, "read", "/etc/hostname")
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

// seccompChild names the case the child process of TestLauncherUnderSeccomp
// runs.
const seccompChild = "KPTR_TEST_SECCOMP_CHILD"

// The namespace tier under seccomp profiles that refuse calls only nsinit
// makes (ENOSYS, as a profile that predates a call refuses it), in a child
// process each (a filter cannot be unloaded):
//   - mount_setattr (CRI-O's default profile): nsinit makes each read-only
//     path read-only by a remount instead, as libcontainer does; no
//     fallback, and /proc/sys stays read-only;
//   - openat2, with which nsinit resolves every mount target (libcontainer
//     walks paths without it): libcontainer starts that run and every later
//     one of the Sandbox, and the runs succeed.
func TestLauncherUnderSeccomp(t *testing.T) {
	if defaultLauncher() != LauncherNsinit {
		t.Skip("nsinit is not the launcher of this run of the suite")
	}
	refused := map[string]uint32{"mount_setattr": unix.SYS_MOUNT_SETATTR, "openat2": unix.SYS_OPENAT2}
	name := os.Getenv(seccompChild)
	if name == "" {
		for name := range refused {
			t.Run(name, func(t *testing.T) {
				cmd := exec.Command(os.Args[0], "-test.run", "^TestLauncherUnderSeccomp$", "-test.v", "-test.count=1")
				cmd.Env = append(os.Environ(), seccompChild+"="+name)
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), "--- PASS: TestLauncherUnderSeccomp") {
					t.Fatalf("child: %v\n%s", err, out)
				}
			})
		}
		return
	}
	// Every thread (TSYNC): nsinit's first process is forked from one of
	// the spawn threads.
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: refused[name], Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	must(t, unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		t.Fatalf("seccomp: %v", e)
	}
	s, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-seccomp-"+name)))
	must(t, err)
	defer s.Close()
	if got := launcherOf(t, s, testBundle(t), runtime.Invocation{}); got != LauncherNsinit {
		t.Fatalf("first run planned for %s, want nsinit", got)
	}
	for i := range 2 {
		res, err := s.Run(context.Background(), testBundle(t, "write", "/proc/sys/kernel/hostname"), runtime.Invocation{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run %d: %v %d %s", i, err, res.ExitCode, res.Stderr)
		}
		if f := facts(string(res.Stdout)); !strings.Contains(f["/proc/sys/kernel/hostname"], "read-only file system") {
			t.Errorf("run %d: /proc/sys writable: %q", i, f["/proc/sys/kernel/hostname"])
		}
	}
	want, wantAfter := int64(0), LauncherNsinit
	if name == "openat2" {
		want, wantAfter = 1, LauncherLibcontainer
	}
	if n := NsinitFallbacks.Swap(0); n != want {
		t.Errorf("%d fallbacks to libcontainer, want %d", n, want)
	}
	if got := launcherOf(t, s, testBundle(t), runtime.Invocation{}); got != wantAfter {
		t.Errorf("then: %s, want %s", got, wantAfter)
	}
}

// kernelAtLeast reads a release as uname gives it; tmpfs's user xattrs,
// which an in-memory upper layer needs, came with 6.6.
func TestKernelAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{
		"6.18.44-fc-v782": true, "6.6.0": true, "6.10": true, "7.0.1": true,
		"6.5.13-generic": false, "5.15.0-91-generic": false, "": false, "x.y": false,
	} {
		if got := kernelAtLeast(rel, 6, 6); got != want {
			t.Errorf("kernelAtLeast(%q, 6, 6) = %v, want %v", rel, got, want)
		}
	}
}
