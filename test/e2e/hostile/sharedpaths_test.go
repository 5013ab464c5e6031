package hostile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// Another local user plants links at the names kptr opens in shared places
// (issue 21): a link never leads kptr into a directory of the victim's, and
// no cleanup of kptr's removes what it did not write. Each case plants a
// link owned by another uid (attackerUID) in a $TMPDIR everyone may write
// and that has no sticky bit (a Kubernetes emptyDir on /tmp: the kernel's
// protected_symlinks does not apply there), pointing at a sentinel
// directory of the identity's, private (0700) as a home directory's
// .ssh is, which must stay exactly as it was.

// attackerUID owns the planted links.
const attackerUID = 12345

// sharedTmp makes a $TMPDIR every user may write, without the sticky bit.
func (h *harness) sharedTmp(t *testing.T) string {
	t.Helper()
	d := filepath.Join(h.base, "shared-tmp")
	if err := os.Mkdir(d, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// plant makes a link at name to target, owned by the attacker.
func plant(t *testing.T, name, target string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Lchown(name, attackerUID, attackerUID); err != nil {
			t.Fatal(err)
		}
	}
}

// victim is a private sentinel directory of the identity's.
func (h *harness) victim(t *testing.T, name string) string {
	t.Helper()
	d := h.sentinel(t, filepath.Join(h.base, name))
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	h.sentinels[d] = snapshot(t, d)
	return d
}

// linkIntact fails unless name is still the planted link to target.
func linkIntact(t *testing.T, name, target string) {
	t.Helper()
	if got, err := os.Readlink(name); err != nil || got != target {
		t.Errorf("the planted link %s was changed: %q %v", name, got, err)
	}
}

// The memo store: $TMPDIR/kptr-memo-<uid> when the cache is root's (a
// pre-warmed sidecar cache, read by uid 999), <cache>/memo when the cache
// is the user's own. generate memoises by default, so its store's cleanup
// ran in the victim's directory and removed everything that was not a
// record (.ssh, .bashrc, config/). A link in $TMPDIR is passed over (the
// run goes on without memoising); one at <cache>/memo is an entry of the
// cache's layout, and a cache holding a link is refused, naming it (exit 3).
func TestPlantedMemoLink(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		tmp := h.sharedTmp(t)
		target := h.victim(t, "private")
		pkg := h.pkg(t, "app", memoPkg(ref, "web"))
		var link string
		if h.id.uid >= 0 {
			// the cache becomes root's, read-only to the sidecar's uid
			if err := filepath.Walk(h.cache, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, 0, 0)
			}); err != nil {
				t.Fatal(err)
			}
			os.Chmod(h.cache, 0o755)
			link = filepath.Join(tmp, "kptr-memo-"+strconv.Itoa(h.uid()))
		} else {
			link = filepath.Join(h.cache, "memo")
			os.RemoveAll(link)
		}
		plant(t, link, target)
		for range 2 {
			r := h.kptr(t, call{args: []string{"generate"}, dir: pkg, env: []string{"TMPDIR=" + tmp, "KPTR_ALLOWED_IMAGES=example.test/*"}})
			if h.id.uid >= 0 {
				r.exits(t, 0).never(t, memoCached)
			} else {
				r.exits(t, 3).says(t, link, "is a symbolic link")
			}
		}
		linkIntact(t, link, target)
		h.sentinelsUnchanged(t)
	})
}

// The write journal's key: $TMPDIR/kptr-state-<uid> when neither
// XDG_STATE_HOME nor a usable HOME is set (the sidecar). A link there is
// refused (the in-place render fails, naming it) and never written through.
func TestPlantedStateLink(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		tmp := h.sharedTmp(t)
		target := h.victim(t, "private")
		link := filepath.Join(tmp, "kptr-state-"+strconv.Itoa(h.uid()))
		plant(t, link, target)
		pkg := h.pkg(t, "pkg", map[string]string{"Kptfile": labelKptfile, "a.yaml": configMap("a")})
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--allow-exec"}, env: []string{"TMPDIR=" + tmp, "HOME=/", "XDG_STATE_HOME="}}).
			exits(t, 1).says(t, link, "is a symbolic link")
		linkIntact(t, link, target)
		h.sentinelsUnchanged(t)
	})
}

// The run-state directory: $TMPDIR/kptr-run-<uid> when $XDG_RUNTIME_DIR is
// unset. A link there is refused: the run fails, nothing is written through
// it, and no stale-run cleanup reaches the victim's directory.
func TestPlantedRunStateLink(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		tmp := h.sharedTmp(t)
		target := h.victim(t, "private")
		// names a stale-run cleanup would take for a dead kptr's
		h.write(t, target, map[string]string{"kptr-1-deadbeef-1/x": "victim's", "kptr-1-deadbeef.lock": ""})
		h.sentinels[target] = snapshot(t, target)
		link := filepath.Join(tmp, "kptr-run-"+strconv.Itoa(h.uid()))
		plant(t, link, target)
		pkg := h.pkg(t, "app", memoPkg(ref, "web"))
		r := h.kptr(t, call{args: []string{"fn", "render", pkg, "-o", "stdout"}, env: []string{"TMPDIR=" + tmp, "XDG_RUNTIME_DIR="}})
		if h.id.uid < 0 && os.Geteuid() == 0 {
			// root passes over a name that is taken to /tmp/kptr-run-0 or
			// /run/kptr (runtime.stateDirFor) and runs
			r.exits(t, 0)
		} else if r.code == 0 {
			t.Errorf("the run used the planted run-state link")
		}
		linkIntact(t, link, target)
		h.sentinelsUnchanged(t)
	})
}

// The cache's layout directories (blobs, rootfs, locks with the fetch
// locks, tmp with its cleanup): a link there is refused, whoever made it;
// the cache directory itself may be a link only if it is the user's or
// root's.
func TestPlantedCacheLinks(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		pkg := h.pkg(t, "app", memoPkg(ref, "web"))
		for _, sub := range []string{"locks", "tmp"} {
			target := h.victim(t, "private-"+sub)
			real := filepath.Join(h.cache, sub)
			if err := os.Rename(real, real+".real"); err != nil {
				t.Fatal(err)
			}
			plant(t, real, target)
			h.kptr(t, call{args: []string{"fn", "render", pkg, "-o", "stdout"}}).exits(t, 3).says(t, real, "is a symbolic link")
			h.kptr(t, call{args: []string{"cache", "prune", "--max-age", "720h"}}).exits(t, 3).says(t, real, "is a symbolic link")
			linkIntact(t, real, target)
			os.Remove(real)
			if err := os.Rename(real+".real", real); err != nil {
				t.Fatal(err)
			}
		}
		if os.Geteuid() == 0 {
			target := h.victim(t, "private-cache")
			link := filepath.Join(h.base, "cache-link")
			plant(t, link, target)
			h.kptr(t, call{args: []string{"cache", "ls"}, env: []string{"KPTR_CACHE_DIR=" + link}}).exits(t, 3).says(t, link, "symbolic link owned by uid 12345")
			linkIntact(t, link, target)
		}
		h.sentinelsUnchanged(t)
	})
}

// intruder is the uid that tampers with the identity's cache: the sidecar's
// uid against root's cache (issue 30's attacks), another uid against the
// sidecar's.
func (h *harness) intruder() int {
	if h.id.uid < 0 {
		return sidecarUID
	}
	return attackerUID
}

// cacheTampers are the ways another user gets hold of a cache entry p
// (whose mode was perm); each returns what undoes it.
func (h *harness) cacheTampers() map[string]func(t *testing.T, p string, perm os.FileMode) func() {
	chmod := func(t *testing.T, p string, mode os.FileMode) {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]func(t *testing.T, p string, perm os.FileMode) func(){
		"writable by group": func(t *testing.T, p string, perm os.FileMode) func() {
			chmod(t, p, perm|0o020)
			return func() { os.Chmod(p, perm) }
		},
		"writable by others": func(t *testing.T, p string, perm os.FileMode) func() {
			chmod(t, p, perm|0o002)
			return func() { os.Chmod(p, perm) }
		},
		// readable by all, so that kptr meets the owner, not a permission
		"owned by the intruder": func(t *testing.T, p string, perm os.FileMode) func() {
			if err := os.Lchown(p, h.intruder(), h.intruder()); err != nil {
				t.Fatal(err)
			}
			chmod(t, p, perm|0o055)
			return func() { os.Chmod(p, perm); os.Lchown(p, h.uid(), h.uid()) }
		},
		"the intruder's link to the real one": func(t *testing.T, p string, _ os.FileMode) func() {
			if err := os.Rename(p, p+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(p)+".real", p); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(p, h.intruder(), h.intruder()); err != nil {
				t.Fatal(err)
			}
			return func() { os.Remove(p); os.Rename(p+".real", p) }
		},
	}
}

// tampered runs c with the entry p tampered with each way, and fails
// unless every run is refused (exit 3) with an error naming p.
func (h *harness) tampered(t *testing.T, p string, c call, skip func(how string) bool) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	for how, tamper := range h.cacheTampers() {
		if skip != nil && skip(how) {
			continue
		}
		undo := tamper(t, p, fi.Mode().Perm())
		r := h.kptr(t, c)
		undo()
		if r.code != 3 || !strings.Contains(r.stderr, p+" ") {
			t.Errorf("cache entry %s %s: exit %d, want 3 naming it\nstderr:\n%s", p, how, r.code, tail(r.stderr))
		}
	}
}

// Another user able to write any part of a cache decides what runs from it
// (issue 30: uid 999, able to write root's wasm/, rewrote a module's
// compiled code and root's kptr ran it; able to write verdicts/, made root
// run an unsigned image under a reject-by-default policy). kptr refuses
// such a cache, naming the entry (exit 3): the cache directory itself and
// every name of cache.Layout (the one list the check walks, so a name added
// to the layout is tested here the day it is added), whether it is
// another uid's, writable by group or others, or a link.
func TestCacheWritableByAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand cache entries to another uid")
	}
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		pkg := h.pkg(t, "app", memoPkg(ref, "web"))
		render := call{args: []string{"fn", "render", pkg, "-o", "stdout"}}
		h.kptr(t, render).exits(t, 0)
		entries := []string{"."}
		for _, name := range cache.Layout() {
			rel, isDir := strings.CutSuffix(name, "/")
			p := filepath.Join(h.cache, rel)
			if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
				if !isDir {
					t.Fatalf("kptr did not make %s", name)
				}
				h.dir(t, filepath.Join("cache", rel), 0o755) // made on first use (verdicts/, wasm/, memo/)
			}
			entries = append(entries, rel)
		}
		h.kptr(t, render).exits(t, 0)
		for _, rel := range entries {
			var skip func(string) bool
			if rel == "." {
				// TestPlantedCacheLinks: the cache directory may be a link of the user's
				skip = func(how string) bool { return strings.Contains(how, "link") }
			}
			h.tampered(t, filepath.Clean(filepath.Join(h.cache, rel)), render, skip)
		}
		h.kptr(t, render).exits(t, 0)
	})
}

// The wasm tier's compiled code (wasm/<module sha256>/...) is machine code
// kptr's own process runs, outside every sandbox: a file or directory of it
// that another uid owns, or group or others may write, or a link there,
// fails the run (exit 3, naming it) before wazero loads it. After a session
// that used every part of the cache (an image, a wasm function and its
// compiled code, memoised results), the cache holds nothing at its top that
// cache.Layout does not list: no directory escapes the check.
func TestCompiledWasmOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to hand cache entries to another uid")
	}
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := registry.Start(t).Addr + "/kpt-fn/set-namespace:v1"
		fnimage.PushIndex(t, fnimage.WasmIndex(t, fnimage.WasmModule(t, "set-namespace", "js"), fnimage.PlatformJS), ref)
		pkg := h.pkg(t, "app", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + ref + "\n    configMap:\n      namespace: staging\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		render := call{args: []string{"fn", "render", pkg, "-o", "stdout", "--allow-alpha-wasm"}}
		// the first render compiles the module: 40 s on a loaded 2-core
		// machine, past the default bound of a call
		first := render
		first.timeout = 5 * time.Minute
		if r := h.kptr(t, first).exits(t, 0); !strings.Contains(r.stdout, "namespace: staging") {
			t.Fatalf("the wasm function did not run:\n%s", r.stdout)
		}
		var code []string
		_ = filepath.WalkDir(filepath.Join(h.cache, cache.WasmDir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && filepath.Dir(p) != h.cache {
				code = append(code, p)
			}
			return nil
		})
		if len(code) < 2 {
			t.Fatalf("the wasm run left no compiled code in the cache: %v", code)
		}
		for _, p := range code {
			h.tampered(t, p, render, nil)
		}
		h.kptr(t, render).exits(t, 0)

		fx := h.importFixture(t, "kptr-fx", nil)
		h.kptr(t, call{args: []string{"generate"}, dir: h.pkg(t, "memoised", memoPkg(fx, "web")), env: []string{"KPTR_ALLOWED_IMAGES=example.test/*"}}).exits(t, 0)
		listed := map[string]bool{}
		for _, name := range cache.Layout() {
			listed[strings.TrimSuffix(name, "/")] = true
		}
		ents, err := os.ReadDir(h.cache)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !listed[e.Name()] {
				t.Errorf("the cache holds %s, which cache.Layout does not list: the ownership check never looks at it", e.Name())
			}
		}
	})
}
