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

	"github.com/kptr-dev/kptr/internal/privdir"
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
// user first (in a shared /tmp): each is opened through privdir.Open, which
// refuses a link at its name (never followed), a directory the current user
// does not own and one others can write, and the key is read and written
// beneath the opened handle; such a directory can deny kptr in-place
// writes but never make it trust a journal or write elsewhere. In an Argo
// CD sidecar (uid 999, HOME read-only or "/", only /tmp and the cache
// writable) the key lands in the pod's own /tmp; generate renders in memory
// and never needs it.
func StateDir() (string, error) {
	root, dir, err := openStateDir()
	if err != nil {
		return "", err
	}
	root.Close()
	return dir, nil
}

// openStateDir opens the state directory StateDir names.
func openStateDir() (*os.Root, string, error) {
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
		// created 0700 (parents too); an existing one others may read is
		// accepted, one they may write is not
		root, err := privdir.Open(d, privdir.Options{Perm: 0o700, MaxPerm: 0o755, ParentPerm: 0o700})
		if err == nil {
			return root, d, nil
		}
		if privdir.IsUntrusted(err) {
			// present but not trustworthy: never fall back past it
			return nil, "", fmt.Errorf("state directory: %w (set KPTR_STATE_DIR to a directory only uid %d can write)", err, os.Geteuid())
		}
		errs = append(errs, err)
	}
	return nil, "", fmt.Errorf("no private state directory for kptr's write journal key (set KPTR_STATE_DIR): %w", errors.Join(errs...))
}

// stateFileError is a file in the state directory that may not be trusted.
type stateFileError struct{ path, why string }

func (e *stateFileError) Error() string {
	return fmt.Sprintf("state file %s %s: refusing it (set KPTR_STATE_DIR to a directory only uid %d can write)", e.path, e.why, os.Geteuid())
}

// checkPrivateFile refuses a key file that is not a regular file of the
// effective uid that only it may read.
func checkPrivateFile(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.Mode().IsRegular():
		return &stateFileError{path, "is not a plain file"}
	case !ok || int(sys.Uid) != os.Geteuid():
		return &stateFileError{path, "is owned by another user"}
	case st.Mode().Perm()&0o077 != 0:
		return &stateFileError{path, "is accessible to other users"}
	}
	return nil
}

const journalKeyName = "journal.key"

// journalKey returns the current user's journal key, creating it (32
// random bytes, 0600) on first use; concurrent first uses agree on one key.
func journalKey() ([]byte, error) {
	root, dir, err := openStateDir()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	path := filepath.Join(dir, journalKeyName)
	for range 2 {
		key, err := readKey(root, path)
		if !errors.Is(err, fs.ErrNotExist) {
			return key, err
		}
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		tmpName := journalKeyName + "." + rand.Text()
		tmp, err := root.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
			werr = root.Link(tmpName, journalKeyName)
		}
		root.Remove(tmpName)
		if werr == nil {
			return key, nil
		}
		if !errors.Is(werr, fs.ErrExist) {
			return nil, werr
		}
	}
	return readKey(root, path)
}

func readKey(root *os.Root, path string) ([]byte, error) {
	f, err := root.OpenFile(journalKeyName, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, &stateFileError{path, "is a symbolic link"}
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkPrivateFile(path, st); err != nil {
		return nil, err
	}
	key, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return nil, err
	}
	if len(key) != 32 {
		return nil, &stateFileError{path, "does not hold a 32-byte key"}
	}
	return key, nil
}
