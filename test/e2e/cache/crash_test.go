package cache_test

import (
	"bytes"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// kill -9 of `kptr cache pull` at random points, at least 20 times: the
// cache never holds anything corrupt, and the next pull completes it.
func TestKill9DuringPull(t *testing.T) {
	reg := registry.Start(t)
	img := bigImage(t, 9, 4<<20)
	ref := reg.Addr + "/fn/crash:v1"
	fnimage.Push(t, img, ref)
	want := make([]byte, 4<<20)
	rand.New(rand.NewSource(9)).Read(want)

	start := time.Now()
	kptr(t, t.TempDir(), "cache", "pull", ref).must(t)
	full := time.Since(start)
	seed := time.Now().UnixNano()
	t.Logf("cold pull %v; kill seed %d", full, seed)
	rng := rand.New(rand.NewSource(seed))

	// The kill delay is uniform in [0, window). The window adapts: it shrinks
	// when a pull finished before the kill (later pulls into a partly filled
	// cache are quicker) and grows when the kill landed, so kills keep
	// landing at random points of every phase on a busy machine too.
	window := full
	kills, attempts := 0, 0
	for kills < 24 && attempts < 200 {
		dir := t.TempDir() // a fresh cache after every 6 kills, so early phases get hit too
		for groupKills := 0; groupKills < 6 && attempts < 200; {
			attempts++
			cmd := exec.Command(kptrBin, "cache", "pull", ref)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "KPTR_CACHE_DIR=" + dir, "KPTR_PROGRESS=none"}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.Int63n(int64(window))))
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				kills++
				groupKills++
				window = min(window*11/10, 2*full)
			} else {
				window = max(window*7/10, 5*time.Millisecond)
			}
			// Whatever the kill left, nothing committed is corrupt.
			if v := kptr(t, dir, "cache", "verify"); v.code != 0 || !strings.Contains(v.stdout, " 0 corrupt") {
				t.Fatalf("after kill %d: verify exit %d\n%s%s", kills, v.code, v.stdout, v.stderr)
			}
		}
		r := kptr(t, dir, "cache", "pull", ref).must(t)
		if !strings.Contains(r.stdout, digestOf(t, img)) {
			t.Fatalf("pull after kills: %s", r.stdout)
		}
		root := filepath.Join(dir, "rootfs", strings.TrimPrefix(digestOf(t, img), "sha256:"), "rootfs")
		if got, err := os.ReadFile(filepath.Join(root, "data/one")); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("rootfs content after kills: %v", err)
		}
		v := kptr(t, dir, "cache", "verify", "--repair").must(t)
		if !strings.Contains(v.stdout, " 0 corrupt") {
			t.Fatalf("verify after recovery: %s", v.stdout)
		}
		if n := countEntries(filepath.Join(dir, "tmp")); n != 0 {
			t.Fatalf("%d stale temporaries after verify --repair", n)
		}
	}
	if kills < 20 {
		t.Fatalf("only %d of %d attempts were killed mid-pull", kills, attempts)
	}
	t.Logf("%d kills in %d attempts", kills, attempts)
}

// A full disk during extraction fails cleanly: one clear line, nothing
// partial committed, nothing left in tmp/, and the cache verifies clean.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (CI runs as root)")
	}
	reg := registry.Start(t)
	img := fnimage.Build(t, "cat", fnimage.WithLayers(randomLayer(t, 7, "data/blob", 6<<20)))
	ref := reg.Addr + "/fn/big:v1"
	fnimage.Push(t, img, ref)
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=12m,mode=0755"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })

	r := kptr(t, dir, "cache", "pull", ref)
	if r.code != 3 || !strings.Contains(r.stderr, "no space left on device") || !strings.Contains(r.stderr, ref) ||
		len(errorLines(r.stderr)) != 1 {
		t.Fatalf("exit %d: %q", r.code, r.stderr)
	}
	if n := countEntries(filepath.Join(dir, "rootfs")); n != 0 {
		t.Fatalf("rootfs committed on a full disk")
	}
	if n := countEntries(filepath.Join(dir, "tmp")); n != 0 {
		t.Fatalf("partial files left in tmp/")
	}
	if idx, _ := os.ReadFile(filepath.Join(dir, "index.json")); strings.Contains(string(idx), "fn/big") {
		t.Fatalf("failed image recorded: %s", idx)
	}
	if v := kptr(t, dir, "cache", "verify"); v.code != 0 {
		t.Fatalf("verify after disk full: %s%s", v.stdout, v.stderr)
	}
}
