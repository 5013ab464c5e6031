package cache

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// removeTree removes a tree the cache wrote (an unpacked rootfs, a work
// directory of an unpack): the image's own modes may have made some of
// its directories read-only (0555) or unreadable, which stops an owner who
// is not root from emptying them. Those are made the owner's own (0700)
// through a handle rooted at the tree, never following a link out, then the
// removal is tried again.
func removeTree(path string) error {
	err := os.RemoveAll(path)
	if err == nil {
		return nil
	}
	root, rerr := os.OpenRoot(path)
	if rerr != nil {
		return err
	}
	defer root.Close()
	_ = root.Chmod(".", 0o700)
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() && p != "." {
			_ = root.Chmod(p, 0o700)
		}
		return nil // keep walking: a directory it could not read yet is read after its chmod
	})
	return os.RemoveAll(path)
}

// RemoveOwnTemporaries removes what this process left in tmp/ (its pid is
// in their names): called as kptr exits, also when a signal ends it
// mid-pull, so an interrupted pull leaves nothing behind. A download's
// partial file (named by digest, not pid) stays, for the next pull to
// resume.
func (c *Cache) RemoveOwnTemporaries() {
	if c.readOnly {
		return
	}
	ents, _ := os.ReadDir(c.path(tmpDir))
	own := "-" + strconv.Itoa(os.Getpid()) + "-"
	for _, e := range ents {
		if tempName().MatchString(e.Name()) && strings.Contains(e.Name(), own) {
			_ = removeTree(filepath.Join(c.path(tmpDir), e.Name()))
		}
	}
}

// sweepTmp removes, once per Cache, the temporaries of processes that are
// gone (an interrupted or killed pull): the next pull cleans up after the
// last, without waiting for prune.
func (c *Cache) sweepTmp() {
	c.sweep.Do(func() {
		if !c.readOnly {
			c.cleanTmp(false, false)
		}
	})
}
