package hostile

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
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
// record (.ssh, .bashrc, config/).
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
			h.kptr(t, call{args: []string{"generate"}, dir: pkg, env: []string{"TMPDIR=" + tmp, "KPTR_ALLOWED_IMAGES=example.test/*"}}).
				exits(t, 0).never(t, memoCached)
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
