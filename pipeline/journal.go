package pipeline

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/kptr-dev/kptr/internal/lazyre"
)

// ---- atomic multi-file commit ----
//
// A commit stages every new file under <pkg>/.kptr-tx/data (names without
// a YAML extension, so a reader never mistakes them for resources), writes
// the list of operations to .kptr-tx/journal.tmp, and renames it to
// .kptr-tx/journal: that rename is the commit point. Only then are the
// staged files renamed over their targets and deleted files removed. A crash
// before the commit point leaves the package untouched (recovery discards
// the staging area); a crash after it is rolled forward by the next kptr
// command that reads the package.
//
// A journal is a package file like any other: Git carries it, cp copies it,
// another user may write it. kptr acts only on a journal it wrote itself,
// for this very package: the journal carries an HMAC-SHA256, keyed with the
// user's private key (statedir.go), over its operations and the package's
// identity (real path, device and inode of its directory, owner uid). A
// journal whose MAC does not verify is foreign: a writer refuses the
// package (nothing touched, the message says how to discard it), a reader
// ignores it. Every operation of a verified journal is then checked before
// any is applied: its source is exactly a staged regular file data/<n> with
// the recorded SHA-256, its destination a clean local path inside the
// package, outside .kptr-tx, with no symbolic link on its way; and all of it
// is applied through the package's os.Root.

const (
	txDirName   = ".kptr-tx"
	journalName = txDirName + "/journal"
	journalTmp  = txDirName + "/journal.tmp"
	dataDir     = txDirName + "/data"
	// maxJournal bounds what a recovery reads of a journal.
	maxJournal = 16 << 20
)

type txOp struct {
	Src string `json:"src,omitempty"` // staged file, relative to the tx dir; empty for a delete
	Dst string `json:"dst"`           // target, relative to the package, symlinks resolved
	Sum string `json:"sum,omitempty"` // hex SHA-256 of the staged file
}

// pkgWriter is a package opened for writing: it holds the package's lock
// (an exclusive flock of its directory) from open to Close, so everything a
// writer reads stays as it read it until it has committed; a second writer
// (render, eval, sink, recovery) waits. It also holds the locks of the
// packages it is a subpackage of (every ancestor directory with a Kptfile,
// taken outermost first, so writers never deadlock): an eval of a
// subpackage and a render of its parent, which writes the subpackage's
// files too, are serialised. Readers take no lock.
type pkgWriter struct {
	*pkgFS
	lock      *os.File   // the package directory's
	ancestors []*os.File // the enclosing packages' directories'
}

// openWriter opens the package at dir for writing: takes its lock (telling
// wait, if not nil, when another kptr holds it) and finishes or discards an
// interrupted write of its own. A foreign journal fails it.
func openWriter(dir string, wait io.Writer) (*pkgWriter, error) {
	p, err := openPkgFS(dir)
	if err != nil {
		return nil, err
	}
	ancestors, err := lockAncestors(p.dir, wait)
	if err != nil {
		p.Close()
		return nil, err
	}
	lock, err := lockRoot(p, wait)
	if err != nil {
		closeAll(ancestors)
		p.Close()
		return nil, err
	}
	w := &pkgWriter{pkgFS: p, lock: lock, ancestors: ancestors}
	if err := w.recover(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *pkgWriter) Close() error {
	w.lock.Close() // releases the flock
	closeAll(w.ancestors)
	return w.pkgFS.Close()
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func lockRoot(p *pkgFS, wait io.Writer) (*os.File, error) {
	f, err := p.root.Open(".")
	if err != nil {
		return nil, err
	}
	if err := lockFile(f, p.dir, wait); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// lockAncestors locks, outermost first, every directory above dir that
// holds a Kptfile (one that cannot be opened is no package of this user's).
func lockAncestors(dir string, wait io.Writer) ([]*os.File, error) {
	var dirs []string
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, "Kptfile")); err == nil && st.Mode().IsRegular() {
			dirs = append(dirs, d)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	var locks []*os.File
	for i := len(dirs) - 1; i >= 0; i-- {
		f, err := os.Open(dirs[i])
		if err != nil {
			continue
		}
		if err := lockFile(f, dirs[i], wait); err != nil {
			f.Close()
			closeAll(locks)
			return nil, err
		}
		locks = append(locks, f)
	}
	return locks, nil
}

// lockFile takes an exclusive flock of f (the directory dir), telling wait
// when it has to wait for another kptr.
func lockFile(f *os.File, dir string, wait io.Writer) error {
	fd := int(f.Fd())
	err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		if wait != nil {
			fmt.Fprintf(wait, "waiting for another kptr writing %s\n", dir)
		}
		err = syscall.Flock(fd, syscall.LOCK_EX)
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", dir, err)
	}
	return nil
}

// openReader opens the package at dir for reading. With recover, a
// committed journal that this user wrote for this package is rolled forward
// first (under the lock, for as long as that takes), so the read sees the
// whole interrupted write; a foreign journal is left alone and reported
// through warn. A reader otherwise takes no lock: it never waits for a
// writer, and a write that commits while it reads may show it old and new
// files side by side, as kpt (which has no lock) would.
func openReader(dir string, recover bool, warn func(string)) (*pkgFS, error) {
	p, err := openPkgFS(dir)
	if err != nil {
		return nil, err
	}
	if !recover {
		return p, nil
	}
	if _, err := p.root.Lstat(journalName); err != nil {
		return p, nil
	}
	lock, err := lockRoot(p, nil)
	if err != nil {
		p.Close()
		return nil, err
	}
	w := &pkgWriter{pkgFS: p, lock: lock}
	err = w.rollForward()
	lock.Close()
	var fe *foreignJournalError
	var re *refusedJournalError
	if errors.As(err, &fe) || errors.As(err, &re) {
		if warn != nil {
			warn("[WARN] " + err.Error() + " (not acted upon: this command does not write the package)")
		}
		err = nil
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Recover finishes or discards an interrupted in-place write of the package
// at dir, as every in-place Render and Eval does first: a committed journal
// that this user wrote for this package is rolled forward, an uncommitted
// staging area removed; a foreign or invalid journal is an error and
// changes nothing.
func Recover(dir string) error {
	w, err := openWriter(dir, nil)
	if err != nil {
		return err
	}
	return w.Close()
}

// foreignJournalError is a journal kptr did not write for this package as
// this user.
type foreignJournalError struct{ dir, why string }

func (e *foreignJournalError) Error() string {
	return fmt.Sprintf("%s: %s (%s): it was not written by kptr for this package as this user (cloned, copied, or written by another user); kptr did not act on it and changed nothing; remove %s to discard it",
		e.dir, journalName, e.why, filepath.Join(e.dir, txDirName))
}

// refusedJournalError is a journal of this user's whose operations do not
// pass the checks; none was applied.
type refusedJournalError struct {
	dir string
	err error
}

func (e *refusedJournalError) Error() string {
	return fmt.Sprintf("%s: refusing write journal %s: %v; kptr changed nothing; remove %s to discard it",
		e.dir, journalName, e.err, filepath.Join(e.dir, txDirName))
}

// recover is recovery for a writer: an uncommitted staging area (no
// journal) is removed, a committed journal rolled forward.
func (w *pkgWriter) recover() error {
	w.files.Forget() // as in commit
	defer w.files.Forget()
	st, err := w.root.Lstat(txDirName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return &foreignJournalError{w.dir, "not a directory"}
	}
	if _, err := w.root.Lstat(journalName); errors.Is(err, fs.ErrNotExist) {
		// nothing was committed: no write is lost by removing it
		return w.root.RemoveAll(txDirName)
	}
	return w.rollForward()
}

// rollForward verifies the journal, checks every operation, then applies them.
func (w *pkgWriter) rollForward() error {
	f, err := w.open(journalName)
	if err != nil {
		return &foreignJournalError{w.dir, err.Error()}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxJournal+1))
	f.Close()
	if err != nil {
		return err
	}
	mac, body, ok := bytes.Cut(b, []byte("\n"))
	if !ok || len(b) > maxJournal {
		return &foreignJournalError{w.dir, "not a kptr journal"}
	}
	key, err := journalKey()
	if err != nil {
		return fmt.Errorf("%s: cannot verify %s: %w", w.dir, journalName, err)
	}
	want, err := w.journalMAC(key, body)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(string(mac))
	if err != nil || !hmac.Equal(got, want) {
		return &foreignJournalError{w.dir, "its signature does not verify"}
	}
	var ops []txOp
	if err := json.Unmarshal(body, &ops); err != nil {
		return fmt.Errorf("%s: corrupt write journal %s: %w", w.dir, journalName, err)
	}
	if err := w.checkOps(ops, true); err != nil {
		return &refusedJournalError{w.dir, err}
	}
	return w.apply(ops)
}

// journalMAC authenticates a journal body for this package: its real path,
// the device and inode of its directory and the directory's owner.
func (w *pkgWriter) journalMAC(key, body []byte) ([]byte, error) {
	real, err := filepath.EvalSymlinks(w.dir)
	if err != nil {
		return nil, err
	}
	st, err := w.lock.Stat()
	if err != nil {
		return nil, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, errors.New("no device and inode for " + w.dir)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "kptr journal v1\x00%s\x00%d\x00%d\x00%d\x00", real, sys.Dev, sys.Ino, sys.Uid)
	m.Write(body)
	return m.Sum(nil), nil
}

var stagedName = lazyre.New(`^data/[0-9]{1,9}$`)

// checkOps checks every operation before any is applied. inRecovery allows
// staged files that are already gone (applied before a crash).
func (w *pkgWriter) checkOps(ops []txOp, inRecovery bool) error {
	srcs := map[string]bool{}
	for _, op := range ops {
		if err := checkLocalPath(op.Dst); err != nil {
			return err
		}
		if err := w.checkNoLinkOnWay(op.Dst, op.Src == ""); err != nil {
			return err
		}
		if op.Src == "" {
			continue
		}
		if !stagedName().MatchString(op.Src) || srcs[op.Src] {
			return fmt.Errorf("source %q is not a staged file", op.Src)
		}
		srcs[op.Src] = true
		name := txDirName + "/" + op.Src
		st, err := w.root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) && inRecovery {
			continue
		}
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("source %q is not a regular file", op.Src)
		}
		b, err := w.ReadFile(name)
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != op.Sum {
			return fmt.Errorf("source %q does not hold what was staged", op.Src)
		}
	}
	return nil
}

// checkLocalPath accepts a clean, local, package-relative path that a rooted
// rename can take and that does not reach into the staging area.
func checkLocalPath(p string) error {
	if err := checkPathChars(p); err != nil {
		return err
	}
	if !filepath.IsLocal(p) || filepath.Clean(p) != p {
		return fmt.Errorf("destination %q is not a clean path inside the package", p)
	}
	if p == txDirName || strings.HasPrefix(p, txDirName+"/") {
		return fmt.Errorf("destination %q is inside kptr's staging area", p)
	}
	return nil
}

// checkPathChars refuses what no package file name may hold: NUL and
// control characters, components longer than a file name may be.
func checkPathChars(p string) error {
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("path %q contains a control character", p)
		}
	}
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if len(c) > 255 {
			return fmt.Errorf("path %q has a component longer than 255 bytes", p)
		}
	}
	return nil
}

// checkNoLinkOnWay refuses a destination with a symbolic link among its
// directories (or, unless lastMayBeLink, as itself) or a file where a
// directory must be.
func (w *pkgWriter) checkNoLinkOnWay(dst string, lastMayBeLink bool) error {
	parts := strings.Split(dst, "/")
	for i := range parts {
		cur := strings.Join(parts[:i+1], "/")
		st, err := w.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		last := i == len(parts)-1
		switch {
		case st.Mode()&fs.ModeSymlink != 0 && !(last && lastMayBeLink):
			return fmt.Errorf("destination %q: %s is a symbolic link", dst, cur)
		case !last && !st.IsDir():
			return fmt.Errorf("destination %q: %s is not a directory", dst, cur)
		}
	}
	return nil
}

// commit writes files (package-relative path → contents) and deletes
// deletes atomically, as the package comment above describes. Unchanged
// files are not rewritten. Every path is checked before anything is staged.
func (w *pkgWriter) commit(files map[string][]byte, deletes []string) error {
	// the transaction directory and the package's directories change:
	// no directory held for reading may answer for its old self
	w.files.Forget()
	defer w.files.Forget()
	ops, err := w.stage(files, deletes)
	if err != nil || len(ops) == 0 {
		return err
	}
	return w.apply(ops)
}

// stage is commit up to and including its commit point: the journal.
func (w *pkgWriter) stage(files map[string][]byte, deletes []string) ([]txOp, error) {
	type write struct {
		dst  string
		b    []byte
		mode fs.FileMode
	}
	var writes []write
	for rel, b := range files {
		if err := checkPathChars(rel); err != nil {
			return nil, err
		}
		dst, err := w.resolve(rel)
		if err != nil {
			return nil, fmt.Errorf("failed to save resources: %w", err)
		}
		if err := checkLocalPath(dst); err != nil {
			return nil, fmt.Errorf("failed to save resources: resource path %s: %w", rel, err)
		}
		mode := fs.FileMode(0o644)
		if st, err := w.root.Stat(dst); err == nil {
			if st.IsDir() {
				return nil, fmt.Errorf("config.kubernetes.io/path cannot be a directory: %s", rel)
			}
			if cur, err := w.ReadFile(dst); err == nil && bytes.Equal(cur, b) {
				continue
			}
			mode = st.Mode().Perm()
		}
		writes = append(writes, write{dst, b, mode})
	}
	sort.Slice(writes, func(i, j int) bool { return writes[i].dst < writes[j].dst })
	var ops []txOp
	for _, d := range deletes {
		d = filepath.ToSlash(filepath.Clean(d))
		if err := checkLocalPath(d); err != nil {
			return nil, err
		}
		if _, err := w.root.Lstat(d); err == nil {
			ops = append(ops, txOp{Dst: d})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Dst < ops[j].Dst })
	if len(writes) == 0 && len(ops) == 0 {
		return nil, nil
	}
	key, err := journalKey()
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]txOp, error) {
		_ = w.root.RemoveAll(txDirName)
		return nil, err
	}
	if err := w.root.MkdirAll(dataDir, 0o700); err != nil {
		return fail(err)
	}
	// the staged files are written and synced in parallel: each is a
	// file of its own, and nothing counts until the journal is
	staged := make([]txOp, len(writes))
	errs := make([]error, len(writes))
	eachFile(len(writes), func(i int) {
		wr := writes[i]
		src := "data/" + strconv.Itoa(i)
		if errs[i] = w.writeSynced(txDirName+"/"+src, wr.b, wr.mode); errs[i] != nil {
			return
		}
		sum := sha256.Sum256(wr.b)
		staged[i] = txOp{Src: src, Dst: wr.dst, Sum: hex.EncodeToString(sum[:])}
	})
	for _, err := range errs {
		if err != nil {
			return fail(err)
		}
	}
	ops = append(staged, ops...)
	if err := w.checkOps(ops, false); err != nil {
		return fail(err)
	}
	testPause("KPTR_TEST_PAUSE_BEFORE_COMMIT")
	body, err := json.Marshal(ops)
	if err != nil {
		return fail(err)
	}
	mac, err := w.journalMAC(key, body)
	if err != nil {
		return fail(err)
	}
	j := append([]byte(hex.EncodeToString(mac)+"\n"), body...)
	if err := w.writeSynced(journalTmp, j, 0o600); err != nil {
		return fail(err)
	}
	if err := w.root.Rename(journalTmp, journalName); err != nil {
		return fail(err)
	}
	w.syncDir(txDirName)
	return ops, nil
}

// apply carries out checked operations; one whose staged file is gone was
// applied before a crash.
func (w *pkgWriter) apply(ops []txOp) error {
	for i, op := range ops {
		if op.Src == "" {
			if err := w.root.Remove(op.Dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("failed to delete file: %w", err)
			}
		} else {
			src := txDirName + "/" + op.Src
			if _, err := w.root.Lstat(src); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err := w.root.MkdirAll(path.Dir(op.Dst), 0o755); err != nil {
				return w.applyError(err)
			}
			if err := w.root.Rename(src, op.Dst); err != nil {
				if !errors.Is(err, syscall.EXDEV) {
					return w.applyError(err)
				}
				// a mount inside the package: copy through a sibling
				if err := w.copyOver(src, op.Dst); err != nil {
					return w.applyError(err)
				}
			}
		}
		w.syncDir(path.Dir(op.Dst))
		if i == 0 {
			testPause("KPTR_TEST_PAUSE_AFTER_COMMIT")
		}
	}
	return w.root.RemoveAll(txDirName)
}

func (w *pkgWriter) applyError(err error) error {
	return fmt.Errorf("failed to save resources: %w (the write is committed in %s and the next kptr command on this package completes it)",
		err, filepath.Join(w.dir, txDirName))
}

func (w *pkgWriter) copyOver(src, dst string) error {
	b, err := w.ReadFile(src)
	if err != nil {
		return err
	}
	st, err := w.root.Stat(src)
	if err != nil {
		return err
	}
	tmp := dst + ".kptr-tmp"
	if err := w.writeSynced(tmp, b, st.Mode().Perm()); err != nil {
		_ = w.root.Remove(tmp)
		return err
	}
	if err := w.root.Rename(tmp, dst); err != nil {
		return err
	}
	return w.root.Remove(src)
}

// writeSynced creates (or truncates) a package file through the root and
// syncs it; mode applies to a new file.
func (p *pkgFS) writeSynced(name string, b []byte, mode fs.FileMode) error {
	f, err := p.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	return writeAndClose(f, b)
}

func (p *pkgFS) syncDir(name string) {
	if d, err := p.root.Open(name); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
