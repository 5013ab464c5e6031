package landlock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mkChain makes depth nested directories called name below dir, relative
// to each one's descriptor (their full paths may pass PATH_MAX), and
// writes a file of size bytes at the bottom.
func mkChain(t *testing.T, dir string, depth int, name string, size int) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for i := 0; i < depth; i++ {
		must(t, unix.Mkdirat(fd, name, 0o700))
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	f, err := unix.Openat(fd, "data", unix.O_CREAT|unix.O_WRONLY, 0o600)
	unix.Close(fd)
	must(t, err)
	_, err = unix.Write(f, make([]byte, size))
	unix.Close(f)
	must(t, err)
}

// The run directory's walk sees every directory: a chain whose full path
// is far past PATH_MAX is counted to its bottom, a directory the run made
// unreadable is read (made readable first), and a tree nested deeper than
// maxDirDepth, which the walk does not descend, is an error (counted as
// over the bound), never skipped.
func TestDirUsageSeesEveryDirectory(t *testing.T) {
	const size = 8 << 20
	deep := filepath.Join(testTmp, "usage-deep")
	mkChain(t, deep, 100, strings.Repeat("d", 250), size) // 25,100 bytes of path
	used, entries, err := dirUsage(deep, runDirEntries+1)
	if err != nil || used < size || entries != 101 {
		t.Errorf("a chain of 100 directories past PATH_MAX: %d bytes, %d entries, %v; want at least %d bytes, 101 entries", used, entries, err, size)
	}

	locked := filepath.Join(testTmp, "usage-locked")
	mkChain(t, locked, 1, "hidden", size)
	must(t, os.Chmod(filepath.Join(locked, "hidden"), 0))
	used, _, err = dirUsage(locked, runDirEntries+1)
	if err != nil || used < size {
		t.Errorf("a directory of mode 0: %d bytes, %v; want at least %d", used, err, size)
	}

	deeper := filepath.Join(testTmp, "usage-deeper")
	mkChain(t, deeper, maxDirDepth+10, "d", 4096)
	var ue *errUncountable
	if _, _, err := dirUsage(deeper, runDirEntries+1); !errors.As(err, &ue) {
		t.Errorf("a chain of %d directories: %v, want it counted as over the bound", maxDirDepth+10, err)
	}
	if _, _, err := dirUsage(filepath.Join(testTmp, "no-such-run"), runDirEntries+1); !errors.As(err, &ue) {
		t.Errorf("a run directory that cannot be opened: %v, want it counted as over the bound", err)
	}
}
