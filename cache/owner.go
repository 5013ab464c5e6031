package cache

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/internal/privdir"
)

// Who may own a cache. Whoever can write a cache directory decides what
// every user of it runs (a planted rootfs/<hex> or blob is trusted as
// verified content), so a cache is used only when nobody but the current
// user and root can write it:
//
//   - the directory and the layout directories in it (blobs, rootfs,
//     locks, tmp) are owned by the current user or by root;
//   - none of them is writable by group or others;
//   - the layout directories are never symbolic links (kptr never makes
//     one there; a link would take the cache's locks, temporaries and
//     cleanups somewhere else), checked on the opened directory;
//   - the cache directory itself may be a link (an operator's
//     KPTR_CACHE_DIR pointing at a volume) only when the link belongs to
//     the current user or root: a link another user planted at a
//     predictable name is refused, never followed.
//
// A cache owned by root and read by another user (an image's pre-warmed
// cache, read by uid 999 on a read-only volume) passes: only root, whom
// every user trusts anyway, can change it. A cache another ordinary user
// owns, or can write, is refused: root running images from uid 999's cache
// would run what uid 999 put there. Parents are not checked (a Kubernetes
// emptyDir is mode 0777 and holds the sidecar's cache one level down): a
// parent directory writable by others lets them swap the cache directory,
// so keep the cache under a directory only you can write, as $HOME is.
var cacheSubdirs = []string{"blobs", blobsDir, rootfsDir, locksDir, tmpDir}

// checkOwners applies the rule above to c.dir and the layout directories
// that exist in it.
func (c *Cache) checkOwners() error {
	euid := os.Geteuid()
	var lst unix.Stat_t
	if err := unix.Lstat(c.dir, &lst); err == nil && lst.Mode&unix.S_IFMT == unix.S_IFLNK && int(lst.Uid) != euid && lst.Uid != 0 {
		return fmt.Errorf("cache directory %s is a symbolic link owned by uid %d, not by the current user (uid %d) or root: refusing to follow it; use a cache directory of your own (--cache-dir, KPTR_CACHE_DIR)", c.dir, lst.Uid, euid)
	}
	var st unix.Stat_t
	if err := unix.Stat(c.dir, &st); err != nil {
		return &os.PathError{Op: "cache directory", Path: c.dir, Err: err}
	}
	if err := checkOwner(c.dir, st); err != nil {
		return err
	}
	for _, d := range cacheSubdirs {
		p := c.path(d)
		st, err := privdir.StatNoFollow(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cache directory %w", err)
		}
		if err := checkOwner(p, st); err != nil {
			return err
		}
	}
	return nil
}

// checkOwner checks one directory of a cache.
func checkOwner(p string, st unix.Stat_t) error {
	euid := os.Geteuid()
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("cache directory %s: not a directory", p)
	case int(st.Uid) != euid && st.Uid != 0:
		return fmt.Errorf("cache directory %s is owned by uid %d, not by the current user (uid %d) or root: its owner decides what runs; use a cache directory of your own (--cache-dir, KPTR_CACHE_DIR)", p, st.Uid, euid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("cache directory %s is writable by group or others (mode %04o): anyone who can write it decides what runs; run chmod go-w %s, or use a private cache directory (--cache-dir, KPTR_CACHE_DIR)", p, st.Mode&0o7777, p)
	}
	return nil
}
