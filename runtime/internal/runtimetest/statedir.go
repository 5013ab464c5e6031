package runtimetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/runtime"
)

// PrivateDir makes a mode-0700 directory name below tmp, as Debian's
// libpam-tmpdir gives root for $TMPDIR and systemd for $XDG_RUNTIME_DIR.
func PrivateDir(t *testing.T, tmp, name string) string {
	t.Helper()
	d := filepath.Join(tmp, name)
	Must(t, os.Mkdir(d, 0o700))
	t.Cleanup(func() { runtime.RemoveTree(d) })
	return d
}

// NeedsMappedRoot skips tests of what only happens when functions run as
// uids other than kptr's own.
func NeedsMappedRoot(t *testing.T) {
	t.Helper()
	if !runtime.CanMapRange() {
		t.Skip("needs root with the whole id range mapped: only then do functions run as other host uids than kptr's")
	}
}

// AssertStateDirSafe checks that the directory a tier chose can be reached
// by the uids functions run as, without being widened for anyone: owned by
// kptr's uid, not a link, writable and listable by nobody else, and the
// private directories it avoided are still private.
func AssertStateDirSafe(t *testing.T, dir string, private ...string) {
	t.Helper()
	var st unix.Stat_t
	Must(t, unix.Lstat(dir, &st))
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o066 != 0 {
		t.Errorf("state dir %s: mode %o uid %d, want a directory of uid %d nobody else may list or write", dir, st.Mode, st.Uid, os.Geteuid())
	}
	if !runtime.WorldTraversable(dir) {
		t.Errorf("state dir %s is not reachable by the uids functions run as", dir)
	}
	for _, p := range private {
		if strings.HasPrefix(dir, p+"/") {
			t.Errorf("state dir %s is below the private %s", dir, p)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s widened: %v %v", p, fi.Mode(), err)
		}
	}
}
