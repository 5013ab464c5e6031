package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Who may own a cache. Whoever can write any part of a cache decides what
// every user of it runs (a planted rootfs/<hex> or blob is trusted as
// verified content, a file in verdicts/ says "allowed by the signature
// policy", the files under wasm/ are machine code kptr executes), so kptr
// uses a cache only when nobody but the current user and root can change
// anything in it. One rule, applied to the cache directory and to every
// entry kptr reads from it:
//
//   - it is owned by the current user or by root;
//   - it is not writable by group or others;
//   - it is what kptr made there: a directory or a regular file, never a
//     symbolic link (kptr never makes one in a cache; a link would take
//     its reads, locks and cleanups somewhere else), nor a device or pipe.
//
// The cache directory itself may be a link (an operator's KPTR_CACHE_DIR
// pointing at a volume) only when the link belongs to the current user or
// root: a link another user planted at a predictable name is refused, never
// followed. The directory is checked on the opened descriptor and every
// layout entry relative to it (fstatat), without following a link.
//
// Where it is applied: Open checks the directory and every name of layoutNames
// (one list, so a new subdirectory is checked the day it is added); the
// entries beneath those are checked where they are read: an image's
// rootfs/<hex>, its rootfs/ and meta.json before its bundle is handed out, a
// blob when it is opened, a verdict before it counts (one that fails the
// rule is no verdict: the policy decides again), and a wasm module's
// compiled code before wazero loads it (CheckTree). Checking top-down is
// what makes the checks hold after they are made: a directory nobody else
// can write cannot have its entries swapped by anybody else. Not checked
// where read: the time of rootfs/<hex>/last-run (an empty file only prune
// reads the time of, created so that every user of a shared cache can mark
// it), and the files of an extracted image beneath rootfs/<hex>/rootfs (the
// image's own tree, too large to walk at every run). Extraction gives those
// modes only their owner can write through (treeMode) and meta.json's
// format says so, so checking meta.json covers them; a tree of an older
// kptr, which kept the image's modes, is extracted again (readMeta), and
// kptr cache verify walks every tree (treeHash).
//
// A cache owned by root and read by another user (an image's pre-warmed
// cache, read by uid 999 on a read-only volume) passes: only root, whom
// every user trusts anyway, can change it. A cache another ordinary user
// owns, or can write, is refused: root running images from uid 999's cache
// would run what uid 999 put there. Parents are not checked (a Kubernetes
// emptyDir is mode 0777 and holds the sidecar's cache one level down): a
// parent directory writable by others lets them swap the cache directory,
// so keep the cache under a directory only you can write, as $HOME is.

// Names kptr keeps in a cache directory besides the OCI layout's, for the
// packages that keep their files there.
const (
	WasmDir     = "wasm"     // wazero's compiled code, wasm/<module sha256>/ (runtime/wasm)
	MemoDir     = "memo"     // memoised function results (memo)
	verdictsDir = "verdicts" // remembered signature verdicts (signatures.go)
)

// maxMetaBytes bounds an image's meta.json (its config, as the registry's
// maxConfigBytes bounds it, and the few fields beside).
const maxMetaBytes = maxConfigBytes + 1<<20

// layoutNames is every name kptr keeps at the top of a cache directory, parents
// before their children; a directory's name ends in "/". Open checks each
// that exists (checkOwners).
var layoutNames = []string{
	layoutFile, indexFile,
	"blobs/", blobsDir + "/", rootfsDir + "/", locksDir + "/", tmpDir + "/",
	verdictsDir + "/", WasmDir + "/", MemoDir + "/",
}

// Layout is every name kptr keeps at the top of a cache directory, parents
// first, a directory's name ending in "/": what Open checks.
func Layout() []string { return append([]string(nil), layoutNames...) }

// checkOwners applies the rule above to c.dir and every name of layoutNames
// that exists in it.
func (c *Cache) checkOwners() error {
	euid := os.Geteuid()
	var lst unix.Stat_t
	if err := unix.Lstat(c.dir, &lst); err == nil && lst.Mode&unix.S_IFMT == unix.S_IFLNK && int(lst.Uid) != euid && lst.Uid != 0 {
		return untrusted("cache directory %s is a symbolic link owned by uid %d, not by the current user (uid %d) or root: refusing to follow it; use a cache directory of your own (--cache-dir, KPTR_CACHE_DIR)", c.dir, lst.Uid, euid)
	}
	fd, err := unix.Open(c.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "cache directory", Path: c.dir, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "cache directory", Path: c.dir, Err: err}
	}
	if err := checkStat(c.dir, st, true); err != nil {
		return err
	}
	for _, name := range layoutNames {
		rel, dir := strings.CutSuffix(name, "/")
		if err := unix.Fstatat(fd, rel, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return &os.PathError{Op: "cache directory", Path: c.path(rel), Err: err}
		}
		if err := checkStat(c.path(rel), st, dir); err != nil {
			return err
		}
	}
	return nil
}

// untrustedError is an entry of the cache that breaks the rule: the cache
// is refused (or, for a verdict, the entry ignored), never repaired behind
// the user's back.
type untrustedError struct{ msg string }

func (e *untrustedError) Error() string { return e.msg }

func untrusted(format string, a ...any) error { return &untrustedError{fmt.Sprintf(format, a...)} }

// isUntrusted reports whether err (or one it wraps) is an untrustedError.
func isUntrusted(err error) bool {
	var u *untrustedError
	return errors.As(err, &u)
}

// checkStat applies the rule to one entry p, as lstat or fstat saw it; dir
// says whether it must be a directory or a regular file.
func checkStat(p string, st unix.Stat_t, dir bool) error {
	euid := os.Geteuid()
	want, what := uint32(unix.S_IFREG), "a regular file"
	if dir {
		want, what = unix.S_IFDIR, "a directory"
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return untrusted("cache directory %s is a symbolic link: kptr never makes one in a cache, and refuses to follow it; remove it, or use a cache directory of your own (--cache-dir, KPTR_CACHE_DIR)", p)
	case st.Mode&unix.S_IFMT != want:
		return untrusted("cache directory %s: not %s", p, what)
	case int(st.Uid) != euid && st.Uid != 0:
		return untrusted("cache directory %s is owned by uid %d, not by the current user (uid %d) or root: its owner decides what runs; use a cache directory of your own (--cache-dir, KPTR_CACHE_DIR)", p, st.Uid, euid)
	case st.Mode&0o022 != 0:
		return untrusted("cache directory %s is writable by group or others (mode %04o): anyone who can write it decides what runs; run chmod go-w %s, or use a private cache directory (--cache-dir, KPTR_CACHE_DIR)", p, st.Mode&0o7777, p)
	}
	return nil
}

// checkEntry applies the rule to the entry at p without following a link
// there (its parents were checked before it).
func checkEntry(p string, dir bool) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return &os.PathError{Op: "cache directory", Path: p, Err: err}
	}
	return checkStat(p, st, dir)
}

// openChecked opens the regular file at p for reading, never through a
// link, and applies the rule to what was opened.
func openChecked(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, checkEntry(p, false) // the link, named as such
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, &os.PathError{Op: "fstat", Path: p, Err: err}
	}
	if err := checkStat(p, st, false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckTree applies the cache's rule to dir and everything beneath it (a
// missing dir passes): for a tree kptr hands to a reader that follows
// links and checks nothing, as wazero reads its compiled code. dir's
// parents are the caller's to have checked (Open checks the cache's).
func CheckTree(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return &os.PathError{Op: "cache directory", Path: p, Err: err}
		}
		return checkStat(p, st, st.Mode&unix.S_IFMT == unix.S_IFDIR)
	})
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(dir); errors.Is(lerr, fs.ErrNotExist) {
			return nil
		}
	}
	return err
}
