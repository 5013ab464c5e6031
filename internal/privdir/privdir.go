// Package privdir opens the directories kptr keeps under predictable names
// in places other users can write ($TMPDIR/kptr-memo-<uid>,
// $TMPDIR/kptr-state-<uid>, $TMPDIR/kptr-run-<uid>, the layout directories
// of a cache), so that another user can never make kptr work in a directory
// of their choosing:
//
//	root, err := privdir.Open(filepath.Join(os.TempDir(), "kptr-memo-"+uid), privdir.Options{Perm: 0o700})
//	defer root.Close()
//	f, err := root.OpenFile(name, ...) // beneath the checked directory, whatever is swapped in later
//
// Guarantees: the last component of the path is never followed when it is a
// symbolic link (a link planted there is refused, not removed: in a sticky
// /tmp its owner alone may remove it); the directory is checked on the
// opened descriptor (owner, type, mode), and the os.Root handed back is
// proven to be that same directory (device and inode), so a rename or link
// swapped in between the check and the use is refused too. The components
// above the last one are the caller's choice ($TMPDIR, $XDG_RUNTIME_DIR) and
// are trusted as the user set them.
package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Options say what a directory may be.
type Options struct {
	// Perm is the mode of a directory Open creates (default 0700). An
	// existing directory may grant group and others no more than Perm does
	// (one that grants more is refused, unless SetPerm).
	Perm fs.FileMode
	// MaxPerm, when set, widens what an existing directory may grant group
	// and others (a directory created 0700 and accepted at 0755).
	MaxPerm fs.FileMode
	// SetPerm sets the mode of a directory the current user owns to Perm
	// (through the checked descriptor) instead of refusing other modes.
	SetPerm bool
	// AllowRoot accepts a directory owned by root as well as one owned by
	// the current user (a pre-warmed cache that only root can change).
	AllowRoot bool
	// NoCreate opens only an existing directory.
	NoCreate bool
	// ParentPerm, when set, creates missing parents with this mode.
	ParentPerm fs.FileMode

	skipChecks bool // StatNoFollow: the caller checks
}

// UntrustedError is a directory that exists under the name but may not be
// used: a link, not a directory, another user's, or reachable by others.
type UntrustedError struct {
	Path string
	Why  string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s %s: refusing it", e.Path, e.Why)
}

// Open opens (creating it, see Options) the directory at path for the
// current user as the package doc says, and returns a handle beneath which
// every later operation stays.
func Open(path string, o Options) (*os.Root, error) {
	fd, err := open(path, o)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var want unix.Stat_t
	if err := unix.Fstat(fd, &want); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	root, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	got, err := root.Stat(".")
	if err != nil {
		root.Close()
		return nil, err
	}
	if st, ok := got.Sys().(*syscall.Stat_t); !ok || uint64(st.Dev) != uint64(want.Dev) || uint64(st.Ino) != uint64(want.Ino) {
		root.Close()
		return nil, &UntrustedError{path, "was replaced while kptr opened it"}
	}
	return root, nil
}

// Check applies Open's checks to the existing directory at path without
// keeping it open (for a directory used by path afterwards, beneath one
// that only its owner can change).
func Check(path string, o Options) error {
	o.NoCreate = true
	fd, err := open(path, o)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// open creates path if asked, opens it without following a link at its
// last component and checks the descriptor.
func open(path string, o Options) (int, error) {
	path = filepath.Clean(path)
	perm := o.Perm
	if perm == 0 {
		perm = 0o700
	}
	if !o.NoCreate {
		if o.ParentPerm != 0 {
			if err := os.MkdirAll(filepath.Dir(path), o.ParentPerm); err != nil {
				return -1, err
			}
		}
		// mkdir never follows a link at the last component: EEXIST
		if err := unix.Mkdir(path, uint32(perm)); err != nil && err != unix.EEXIST {
			return -1, &fs.PathError{Op: "mkdir", Path: path, Err: err}
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ELOOP || err == unix.ENOTDIR:
		// O_NOFOLLOW|O_DIRECTORY: a link gives either, as a file gives ENOTDIR
		if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
			return -1, &UntrustedError{path, "is a symbolic link"}
		}
		return -1, &UntrustedError{path, "is not a directory"}
	case err != nil:
		return -1, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if o.skipChecks {
		return fd, nil
	}
	if err := check(fd, path, perm, o); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func check(fd int, path string, perm fs.FileMode, o Options) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	euid := os.Geteuid()
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return &UntrustedError{path, "is not a directory"}
	case int(st.Uid) != euid && !(o.AllowRoot && st.Uid == 0):
		return &UntrustedError{path, fmt.Sprintf("is owned by uid %d, not by the current user (uid %d)", st.Uid, euid)}
	}
	allowed := uint32(perm | o.MaxPerm)
	if extra := st.Mode & 0o077 &^ allowed; extra != 0 {
		if !o.SetPerm || int(st.Uid) != euid {
			return &UntrustedError{path, fmt.Sprintf("has mode %04o: group or others may reach it", st.Mode&0o7777)}
		}
	}
	if o.SetPerm && int(st.Uid) == euid && st.Mode&0o7777 != uint32(perm) {
		if err := unix.Fchmod(fd, uint32(perm)); err != nil {
			return &fs.PathError{Op: "chmod", Path: path, Err: err}
		}
	}
	return nil
}

// IsUntrusted says whether err (or one it wraps) is an UntrustedError.
func IsUntrusted(err error) bool {
	var u *UntrustedError
	return errors.As(err, &u)
}

// StatNoFollow opens the existing directory at path without following a
// link at its last component and returns what fstat says of it, for
// callers with their own owner rules (the image cache accepts root's). A
// link or a non-directory is an UntrustedError.
func StatNoFollow(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := open(path, Options{NoCreate: true, skipChecks: true})
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return st, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	return st, nil
}
