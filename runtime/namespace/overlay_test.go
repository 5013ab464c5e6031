package namespace

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"golang.org/x/sys/unix"
)

// overlaySandbox is a Sandbox with its own state directory (so the test can
// see every per-run directory) and overlay on or forced off.
func overlaySandbox(t *testing.T, on bool) (*Sandbox, string) {
	t.Helper()
	dir := filepath.Join(testTmp, fmt.Sprintf("state-overlay-%v", on))
	s, err := New(runtime.WithStateDir(dir), runtime.WithOverlay(on))
	must(t, err)
	t.Cleanup(func() { s.Close() })
	if on && !s.Overlay() {
		_, feat := Probe()
		if feat.Overlay {
			t.Fatalf("the probe says overlay works, yet the sandbox does not use it")
		}
		t.Skip("overlayfs in a user namespace refused here (kptr doctor says why); the read-only view is tested by TestOverlayForcedOff")
	}
	if !on && s.Overlay() {
		t.Fatal("runtime.WithOverlay(false) ignored")
	}
	return s, dir
}

// rwDirs lists the per-run overlay directories left in a state directory.
func rwDirs(t *testing.T, dir string) []string {
	des, err := os.ReadDir(dir)
	must(t, err)
	var out []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".rw") || strings.Contains(de.Name(), "overlay-probe") {
			out = append(out, de.Name())
		}
	}
	return out
}

// writableRootfs is the test image as the run's container root owns it:
// unprivileged, the cache belongs to the invoking uid, which is container
// root; as root the cache belongs to host root, which no run maps, so a
// copy shifted to the run's container root (host uid 1<<30) stands for an
// image whose files container root owns.
var (
	shiftedOnce sync.Once
	shiftedDir  string
)

func writableRootfs(t *testing.T) []string {
	if os.Geteuid() != 0 {
		return []string{testRootfs(t), directRootfs(t)}
	}
	shiftedOnce.Do(func() {
		d := filepath.Join(testTmp, "cache", "rootfs-shifted")
		if out, err := exec.Command("cp", "-a", directRootfs(t), d).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		id := fmt.Sprint(runtime.RootHostIDBase)
		if out, err := exec.Command("chown", "-hR", id+":"+id, d).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
		must(t, os.Chmod(filepath.Join(d, "usr/local/bin/suid"), 0o755))
		shiftedDir = d
	})
	return []string{shiftedDir}
}

func shBundle(rootfs, script string, args ...string) bundle.Bundle {
	return bundle.Bundle{Ref: "example.test/sh:v1", Rootfs: rootfs,
		Config: v1.Config{Entrypoint: append([]string{"/bin/sh", "-c", script, "sh"}, args...), Env: []string{imagePath}}}
}

// With an overlay a function writes anywhere its uid may, reads it back,
// changes and removes image files; the cached rootfs stays byte for byte
// the same and the per-run upper layers are gone afterwards (also for a
// prepared sandbox, and for a run killed by its timeout).
func TestOverlayWritableView(t *testing.T) {
	s, dir := overlaySandbox(t, true)
	const script = `set -e
echo hello > /etc/kptr-new; cat /etc/kptr-new
echo appended >> /etc/passwd; tail -n 1 /etc/passwd
mkdir -p /usr/local/kptr; echo deep > /usr/local/kptr/f; cat /usr/local/kptr/f
rm /etc/hostname; test ! -e /etc/hostname && echo removed
rm -r /var/empty; mkdir /var/empty; ls -A /var/empty | wc -l
echo changed > /usr/local/bin/function; cat /usr/local/bin/function
if echo x > /newfile 2>/dev/null; then echo root-writable; else echo root-readonly; fi
echo x > /tmp/x && echo tmp-ok`
	for _, root := range writableRootfs(t) {
		t.Run(filepath.Base(root), func(t *testing.T) {
			before := snapshot(t, root)
			res, err := s.Run(context.Background(), shBundle(root, script), runtime.Invocation{AsCurrentUser: true})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("run: %v exit %d stderr %q stdout %q", err, res.ExitCode, res.Stderr, res.Stdout)
			}
			want := "hello\nappended\ndeep\nremoved\n0\nchanged\nroot-readonly\ntmp-ok\n"
			if string(res.Stdout) != want {
				t.Errorf("stdout %q, want %q", res.Stdout, want)
			}
			if after := snapshot(t, root); after != before {
				t.Fatal("the cached rootfs changed under an overlay")
			}
			if l := rwDirs(t, dir); len(l) != 0 {
				t.Errorf("per-run overlay directories left: %v", l)
			}
			// The view's directories are nosuid and nodev like the image's
			// read-only binds (inherited from the overlay mount).
			res, err = s.Run(context.Background(), shBundle(root, `cat /proc/self/mountinfo`), runtime.Invocation{AsCurrentUser: true})
			must(t, err)
			seen := 0
			for _, l := range strings.Split(string(res.Stdout), "\n") {
				if f := strings.Fields(l); len(f) > 5 && (f[4] == "/etc" || f[4] == "/usr") {
					seen++
					if !strings.Contains(f[5], "nosuid") || !strings.Contains(f[5], "nodev") || strings.HasPrefix(f[5], "ro") {
						t.Errorf("view mount %s: options %s, want rw,nosuid,nodev", f[4], f[5])
					}
				}
			}
			if seen != 2 {
				t.Errorf("want /etc and /usr mounts in\n%s", res.Stdout)
			}
			// A later run sees the image as it is, none of the writes.
			res, err = s.Run(context.Background(), shBundle(root, `cat /etc/kptr-new /usr/local/kptr/f 2>&1; cat /etc/hostname`), runtime.Invocation{AsCurrentUser: true})
			if err != nil || !strings.Contains(string(res.Stdout), "No such file") || !strings.HasSuffix(string(res.Stdout), "image\n") {
				t.Errorf("a later run saw another run's writes: %v %q", err, res.Stdout)
			}
		})
	}
	if os.Geteuid() == 0 {
		// The cache as root writes it: owned by host root, which no run
		// maps. Container root owns each top-level directory of the view
		// (its upper layer) and may add files there; nobody may not, as
		// under docker; the image's own files stay read-only to both.
		for _, root := range []string{testRootfs(t), directRootfs(t)} {
			res, err := s.Run(context.Background(), shBundle(root, `echo r > /etc/kptr-new && cat /etc/kptr-new; echo x 2>&1 >> /etc/passwd`), runtime.Invocation{AsCurrentUser: true})
			if err != nil || !strings.HasPrefix(string(res.Stdout), "r\n") || !strings.Contains(string(res.Stdout), "Permission denied") {
				t.Errorf("%s as container root: %v %q", root, err, res.Stdout)
			}
			res, err = s.Run(context.Background(), shBundle(root, `echo x 2>&1 > /etc/kptr-new`), runtime.Invocation{})
			if err != nil || !strings.Contains(string(res.Stdout), "Permission denied") {
				t.Errorf("%s as nobody: %v %q", root, err, res.Stdout)
			}
		}
	}
	// A prepared sandbox has its own upper layer while it waits: with
	// libcontainer a directory in the state directory, removed after its
	// run; with nsinit a tmpfs in its own mount namespace, nothing on the
	// host (upperInMemory).
	root := writableRootfs(t)[0]
	b := shBundle(root, `echo p > /etc/kptr-p; cat /etc/kptr-p`)
	inv := runtime.Invocation{AsCurrentUser: true}
	s.Prepare(context.Background(), b, inv)
	s.mu.Lock()
	pr := s.prepared[len(s.prepared)-1]
	s.mu.Unlock()
	<-pr.ready
	if pr.err != nil {
		t.Fatalf("prepare: %v", pr.err)
	}
	want := map[string]int{LauncherLibcontainer: 1, LauncherNsinit: 0}[defaultLauncher()]
	if l := rwDirs(t, dir); len(l) != want {
		t.Fatalf("a prepared sandbox started by %s has %v overlay directories on the host, want %d", defaultLauncher(), l, want)
	}
	res, err := s.Run(context.Background(), b, inv)
	if err != nil || string(res.Stdout) != "p\n" {
		t.Fatalf("prepared run: %v %q %q", err, res.Stdout, res.Stderr)
	}
	// a prepared run's state is removed in the background once it ended
	deadline := time.Now().Add(10 * time.Second)
	for len(rwDirs(t, dir)) != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if l := rwDirs(t, dir); len(l) != 0 {
		t.Errorf("after the prepared run: %v left", l)
	}
	// Killed by its timeout after leaving a mode-000 directory behind.
	res, err = s.Run(context.Background(), shBundle(root, `mkdir -p /etc/a/b; echo x > /etc/a/b/c; chmod 000 /etc/a/b /etc/a; echo ready; sleep 60`),
		runtime.Invocation{AsCurrentUser: true, Timeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(string(res.Stdout), "ready") {
		t.Fatalf("want a timeout after the writes: %v %q %q", err, res.Stdout, res.Stderr)
	}
	if l := rwDirs(t, dir); len(l) != 0 {
		t.Errorf("after a killed run: %v left", l)
	}
}

// nsinit's runs keep the overlay's upper layer in memory, on a tmpfs as
// large as /tmp (Limits.TmpSize): writes to the image are bounded like
// /tmp's, where libcontainer's take space in the run-state directory's file
// system.
func TestOverlayUpperBounded(t *testing.T) {
	if defaultLauncher() != LauncherNsinit {
		t.Skip("libcontainer keeps the upper layer in the run-state directory (TestOverlayWritableView)")
	}
	dir := filepath.Join(testTmp, "state-overlay-bounded")
	s, err := New(runtime.WithStateDir(dir), runtime.WithLimits(runtime.Limits{TmpSize: 1 << 20}))
	must(t, err)
	t.Cleanup(func() { s.Close() })
	if !s.Overlay() {
		t.Skip("overlayfs in a user namespace refused here")
	}
	root := writableRootfs(t)[0]
	res, err := s.Run(context.Background(), shBundle(root, `head -c 262144 /dev/zero > /etc/small && echo small-ok
{ head -c 2097152 /dev/zero > /etc/big; } 2>&1 || echo big-refused
grep -E ' /etc | /tmp ' /proc/self/mountinfo | cut -d' ' -f5,9`), runtime.Invocation{AsCurrentUser: true})
	if err != nil {
		t.Fatalf("run: %v %q", err, res.Stderr)
	}
	out := string(res.Stdout)
	// The tmpfs refuses with ENOSPC, which the overlay (volatile) may
	// report as EIO.
	if !strings.Contains(out, "small-ok\n") || !strings.Contains(out, "big-refused\n") ||
		!strings.Contains(out, "No space left on device") && !strings.Contains(out, "I/O error") {
		t.Errorf("a 256 KiB write should succeed and a 2 MiB one fail under a 1 MiB bound: %q %q", out, res.Stderr)
	}
	if !strings.Contains(out, "/etc overlay\n") {
		t.Errorf("/etc is not the overlay's: %q", out)
	}
	if l := rwDirs(t, dir); len(l) != 0 {
		t.Errorf("upper layers on the host: %v", l)
	}
}

// Two concurrent runs of one image each write /etc/token and see only
// their own.
func TestOverlayConcurrentRunsIsolated(t *testing.T) {
	s, _ := overlaySandbox(t, true)
	root := writableRootfs(t)[0]
	var wg sync.WaitGroup
	out := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Run(context.Background(), shBundle(root, `echo "$1" > /etc/token; echo "$1" > /usr/local/token; sleep 1; cat /etc/token /usr/local/token; ls /etc | grep -c token`, fmt.Sprint("run-", i)),
				runtime.Invocation{AsCurrentUser: true})
			out[i], errs[i] = string(res.Stdout)+string(res.Stderr), err
		}()
	}
	wg.Wait()
	for i := range 2 {
		if want := fmt.Sprintf("run-%d\nrun-%d\n1\n", i, i); errs[i] != nil || out[i] != want {
			t.Errorf("run %d: %v %q, want %q", i, errs[i], out[i], want)
		}
	}
}

// Forced off (as where the kernel refuses an overlay), the image is
// read-only outside /tmp and $HOME.
func TestOverlayForcedOff(t *testing.T) {
	s, dir := overlaySandbox(t, false)
	for _, root := range writableRootfs(t) {
		res, err := s.Run(context.Background(), shBundle(root, `for f in /etc/kptr-new /usr/local/x /etc/passwd; do echo x 2>&1 >> $f; done; echo x > /tmp/x && echo tmp-ok`), runtime.Invocation{AsCurrentUser: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(res.Stdout); strings.Count(got, "Read-only file system") != 3 || !strings.HasSuffix(got, "tmp-ok\n") {
			t.Errorf("%s without overlay: %q, want three EROFS and a writable /tmp", root, got)
		}
	}
	if l := rwDirs(t, dir); len(l) != 0 {
		t.Errorf("overlay directories without overlay: %v", l)
	}
}

// The mounts libcontainer gets: first one overlay on /tmp (the image as its
// lower layer, the run's directory for upper and work, userxattr and
// volatile), then each top-level directory bound from it, then the /tmp
// tmpfs that hides it; top-level files still bound read-only from the image.
func TestOverlayConfig(t *testing.T) {
	entries := []entry{{Name: "etc", Kind: entryDir}, {Name: "bin", Kind: entrySymlink, Target: "usr/bin"},
		{Name: "proc", Kind: entryDir}, {Name: "tmp", Kind: entryDir}, {Name: "usr", Kind: entryDir}, {Name: "f", Kind: entryFile}}
	for _, direct := range []bool{true, false} {
		c, err := buildConfig(runSpec{ID: "x", Direct: direct, Root: "/s/x.root", Image: "/c/rootfs", Entries: entries, RW: "/s/x.rw",
			Proc: runtime.Process{Home: "/"}, Feat: Features{UID: 999, GID: 999, Overlay: true, FreshProc: true}})
		must(t, err)
		root := map[bool]string{true: "/c/rootfs", false: "/s/x.root"}[direct]
		var got []string
		for _, m := range c.Mounts {
			if m.Device == "overlay" || m.Device == "bind" || m.Destination == "/tmp" {
				ro := m.Flags&unix.MS_RDONLY != 0
				got = append(got, fmt.Sprintf("%s %s %s %s ro=%v", m.Device, m.Source, m.Destination, m.Data, ro))
			}
		}
		want := []string{
			"overlay overlay /tmp lowerdir=/c/rootfs,upperdir=/s/x.rw/u,workdir=/s/x.rw/w,userxattr,volatile ro=false",
			"bind " + root + "/tmp/etc /etc  ro=false",
			"bind " + root + "/tmp/usr /usr  ro=false",
		}
		if !direct {
			want = append(want, "bind /c/rootfs/f /f  ro=true")
		}
		want = append(want, "tmpfs tmpfs /tmp mode=1777,size=268435456 ro=false")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("direct %v: mounts\n%s\nwant\n%s", direct, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// A killed kptr's leftover upper layer (with a mode-000 directory a
// function made) is removed by a later kptr's stale-state pruning.
func TestOverlayLeftoversPruned(t *testing.T) {
	dir := filepath.Join(testTmp, "state-prune")
	must(t, os.MkdirAll(dir, 0o711))
	cmd := exec.Command("true")
	must(t, cmd.Run())
	dead := cmd.Process.Pid // exited and reaped: no such process now
	left := filepath.Join(dir, fmt.Sprintf("kptr-%d-1.rw", dead))
	must(t, os.MkdirAll(filepath.Join(left, "u/etc/a/b"), 0o755))
	must(t, os.WriteFile(filepath.Join(left, "u/etc/a/b/c"), []byte("x"), 0o644))
	must(t, os.Chmod(filepath.Join(left, "u/etc/a/b"), 0))
	must(t, os.Chmod(filepath.Join(left, "u/etc/a"), 0))
	old := time.Now().Add(-2 * time.Hour)
	must(t, os.Chtimes(left, old, old))
	if _, err := New(runtime.WithStateDir(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(left); !os.IsNotExist(err) {
		t.Fatalf("leftover upper layer not pruned: %v", err)
	}
}
