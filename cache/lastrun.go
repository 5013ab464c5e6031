package cache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"golang.org/x/sys/unix"
)

// A function run records its use of an image in the mtime of the image's
// last-run file, rootfs/<hex>/last-run, beside meta.json: cache ls shows it
// as the time the image was last used by a run, which pulls, imports and
// the cache's own resolves (prewarm, cache pull) do not change.
//
// Cost: one stat per run, and at most once a minute per image a utimensat
// with UTIME_NOW, which needs write permission on the file, not ownership
// (a cache shared by a group, or prepared by another uid, still records
// it). Recording is best effort: a read-only cache runs all the same.

const lastRunName = "last-run"

// lastRunGranularity bounds how often the file's time is rewritten.
const lastRunGranularity = time.Minute

// MarkRun records that a function run is about to use the unpacked image b.
func (c *Cache) MarkRun(b bundle.Bundle) {
	if b.Digest.Hex == "" {
		return
	}
	p := c.path(rootfsDir, b.Digest.Hex, lastRunName)
	st, err := os.Stat(p)
	switch {
	case err == nil && time.Since(st.ModTime()) < lastRunGranularity:
		return
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(filepath.Dir(p)); err != nil {
			return // not unpacked (or being replaced): nothing to record
		}
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o666); err == nil {
			f.Close()
		}
		return
	}
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, p, nil, 0) // nil: UTIME_NOW for both times
}

// lastRun is when a run last used the image hex (zero: never since it was
// unpacked).
func (c *Cache) lastRun(hex string) time.Time {
	st, err := os.Stat(c.path(rootfsDir, hex, lastRunName))
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}
