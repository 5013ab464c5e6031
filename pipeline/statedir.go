package pipeline

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// StateDir is the private per-user directory that holds the key kptr
// authenticates its write journals with (journal.go): the first of
//
//	$KPTR_STATE_DIR
//	$XDG_STATE_HOME/kptr
//	$HOME/.local/state/kptr          (HOME set and not "/")
//	$XDG_RUNTIME_DIR/kptr-state
//	$TMPDIR/kptr-state-<uid>         (default TMPDIR /tmp)
//
// that exists or can be created. Only the last can be created by another
// user first (in a shared /tmp); ensureStateDir refuses any of them that the
// current user does not own, that is not a directory, or that others can
// write, so such a directory can deny kptr in-place writes but never make it
// trust a journal. In an Argo CD sidecar (uid 999, HOME read-only or "/",
// only /tmp and the cache writable) the key lands in the pod's own /tmp;
// generate renders in memory and never needs it.
func StateDir() (string, error) {
	var cands []string
	if d := os.Getenv("KPTR_STATE_DIR"); d != "" {
		cands = append(cands, d)
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		cands = append(cands, filepath.Join(d, "kptr"))
	}
	if h := os.Getenv("HOME"); h != "" && h != "/" && filepath.IsAbs(h) {
		cands = append(cands, filepath.Join(h, ".local", "state", "kptr"))
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		cands = append(cands, filepath.Join(d, "kptr-state"))
	}
	cands = append(cands, filepath.Join(os.TempDir(), "kptr-state-"+strconv.Itoa(os.Geteuid())))
	var errs []error
	for _, d := range cands {
		err := ensureStateDir(d)
		if err == nil {
			return d, nil
		}
		var own *stateDirError
		if errors.As(err, &own) {
			return "", err // present but not trustworthy: never fall back past it
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("no private state directory for kptr's write journal key (set KPTR_STATE_DIR): %w", errors.Join(errs...))
}

// stateDirError is a state directory that exists but may not be trusted.
type stateDirError struct{ dir, why string }

func (e *stateDirError) Error() string {
	return fmt.Sprintf("state directory %s %s: refusing it (set KPTR_STATE_DIR to a directory only uid %d can write)", e.dir, e.why, os.Geteuid())
}

// ensureStateDir creates dir (0700, parents 0700) or checks the one there:
// a real directory, owned by the effective uid, writable by nobody else.
func ensureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return checkPrivate(dir, true)
}

// checkPrivate refuses path unless it is (not through a symlink) a
// directory, or a regular file, owned by the effective uid that neither
// group nor others may write (a file: may not even read).
func checkPrivate(path string, dir bool) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return checkPrivateInfo(path, st, dir)
}

func checkPrivateInfo(path string, st fs.FileInfo, dir bool) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case dir && !st.IsDir(), !dir && !st.Mode().IsRegular():
		return &stateDirError{path, "is not a plain " + map[bool]string{true: "directory", false: "file"}[dir]}
	case !ok || int(sys.Uid) != os.Geteuid():
		return &stateDirError{path, "is owned by another user"}
	case dir && st.Mode().Perm()&0o022 != 0, !dir && st.Mode().Perm()&0o077 != 0:
		return &stateDirError{path, "is accessible to other users"}
	}
	return nil
}

const journalKeyName = "journal.key"

// journalKey returns the current user's journal key, creating it (32
// random bytes, 0600) on first use; concurrent first uses agree on one key.
func journalKey() ([]byte, error) {
	dir, err := StateDir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, journalKeyName)
	for range 2 {
		key, err := readKey(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return key, err
		}
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(dir, journalKeyName+".*")
		if err != nil {
			return nil, err
		}
		_, werr := tmp.Write(key)
		if serr := tmp.Sync(); werr == nil {
			werr = serr
		}
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			// link, not rename: the first key written wins, a racing
			// process reads it instead of replacing it
			werr = os.Link(tmp.Name(), path)
		}
		os.Remove(tmp.Name())
		if werr == nil {
			return key, nil
		}
		if !errors.Is(werr, fs.ErrExist) {
			return nil, werr
		}
	}
	return readKey(path)
}

func readKey(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &stateDirError{path, "is a symbolic link"}
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkPrivateInfo(path, st, false); err != nil {
		return nil, err
	}
	key, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return nil, err
	}
	if len(key) != 32 {
		return nil, &stateDirError{path, "does not hold a 32-byte key"}
	}
	return key, nil
}
