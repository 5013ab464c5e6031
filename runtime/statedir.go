package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/internal/privdir"
)

// The run-state directory holds, for every run, entries named after the
// kptr process that owns them, kptr-<pid>-<token> (the token is random per
// process, so a recycled pid, or a process of another pid namespace that
// shares the directory, never takes another's names):
//
//	kptr-<pid>-<token>-<n>        libcontainer's state of run n
//	kptr-<pid>-<token>-<n>.root   its private root (when the image cannot be the root as it is)
//	kptr-<pid>-<token>-<n>.rw     its overlay upper and work directories
//	kptr-<pid>-<token>-<n>.ll     a landlock-tier run's directory ($HOME, $TMPDIR)
//	kptr-<pid>-<token>-llprobe-*  the landlock tier's probe's scratch directory
//	kptr-<pid>-<token>.lock       flock-ed by the owner for as long as it lives
//
// A run removes its own entries when it ends, however it ends. A kptr that
// is killed mid-run (Argo CD's SIGKILL at its deadline) cannot: its lock is
// then free (the kernel drops a flock with the last descriptor), and the
// next kptr that opens the directory removes its entries at once. The lock
// says whether the owner lives where its pid cannot: pids are recycled and
// differ between pid namespaces.

// RunToken makes this process's names unique in a directory that outlives
// processes (made at its first use, not in every start of kptr).
var RunToken = sync.OnceValue(func() string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return hex.EncodeToString(b)
})

// ownerName is the prefix of this process's entries.
func OwnerName() string { return fmt.Sprintf("kptr-%d-%s", os.Getpid(), RunToken()) }

// ownerLocks holds this process's lock per state directory, open (and so
// locked) while anything of the process may be there: from New until Close
// for a Sandbox, from set-up to removal for a run.
var ownerLocks = struct {
	sync.Mutex
	held map[string]*ownerLock
}{held: map[string]*ownerLock{}}

type ownerLock struct {
	f    *os.File
	refs int
}

// HoldOwnerLock takes a reference on this process's lock in dir, creating
// and locking the lock file for the first one. The file appears under its
// name already locked (locked under a temporary name, then renamed), so no
// pruner ever sees it free.
func HoldOwnerLock(dir string) error {
	ownerLocks.Lock()
	defer ownerLocks.Unlock()
	if l := ownerLocks.held[dir]; l != nil {
		l.refs++
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	name := OwnerName() + ".lock"
	f, err := root.OpenFile(name+".new", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		_ = root.Remove(name + ".new")
		return fmt.Errorf("lock %s: %w", name, err)
	}
	if err := root.Rename(name+".new", name); err != nil {
		f.Close()
		_ = root.Remove(name + ".new")
		return fmt.Errorf("lock: %w", err)
	}
	ownerLocks.held[dir] = &ownerLock{f: f, refs: 1}
	return nil
}

// ReleaseOwnerLock drops a reference taken by HoldOwnerLock; the last one
// removes the lock file (nothing of this process is left in dir then).
func ReleaseOwnerLock(dir string) {
	ownerLocks.Lock()
	defer ownerLocks.Unlock()
	l := ownerLocks.held[dir]
	if l == nil {
		return
	}
	if l.refs--; l.refs > 0 {
		return
	}
	delete(ownerLocks.held, dir)
	_ = os.Remove(filepath.Join(dir, OwnerName()+".lock"))
	l.f.Close()
}

// entryOwner is the owner prefix of a state entry (kptr-<pid>-<token>) and
// the owner's pid; ok is false for names that are no run's.
func entryOwner(name string) (owner string, pid int, ok bool) {
	rest, ok := strings.CutPrefix(name, "kptr-")
	if !ok {
		return "", 0, false
	}
	pidStr, rest, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	token, _, _ := strings.Cut(rest, "-")
	token, _, _ = strings.Cut(token, ".")
	if token == "" {
		return "", 0, false
	}
	return "kptr-" + pidStr + "-" + token, pid, true
}

// PruneStale removes the entries of kptr processes that are gone: those
// whose owner's lock can be taken. Entries whose owner never had a lock
// (written by a kptr before locks, or a probe's) go by the old rule: the
// pid does not exist here and they have been untouched for an hour.
func PruneStale(dir string) {
	// only in the checked directory (never through a link planted at its
	// name), and only entries named as a run's (entryOwner)
	if privdir.Check(dir, privdir.Options{Perm: 0o711}) != nil {
		return
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	mine := OwnerName()
	entries := map[string][]os.DirEntry{}
	for _, de := range des {
		if owner, _, ok := entryOwner(de.Name()); ok && owner != mine {
			entries[owner] = append(entries[owner], de)
		}
	}
	for owner, des := range entries {
		f, err := os.OpenFile(filepath.Join(dir, owner+".lock"), os.O_RDWR|unix.O_NOFOLLOW, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				pruneUnlocked(dir, des)
			}
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // the owner lives
			continue
		}
		for _, de := range des {
			if de.Name() != owner+".lock" {
				RemoveTree(filepath.Join(dir, de.Name()))
			}
		}
		_ = os.Remove(filepath.Join(dir, owner+".lock")) // last: the entries are gone
		f.Close()
	}
}

// pruneUnlocked applies the rule for entries without a lock: a pid namespace
// other than ours could share the directory, so an unknown pid alone is not
// proof; an hour of quiet is required too.
func pruneUnlocked(dir string, des []os.DirEntry) {
	for _, de := range des {
		_, pid, _ := entryOwner(de.Name())
		fi, err := de.Info()
		if err != nil || time.Since(fi.ModTime()) < time.Hour {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			RemoveTree(filepath.Join(dir, de.Name()))
		}
	}
}

// Where the run-state directory lives. Normally $XDG_RUNTIME_DIR/kptr, else
// $TMPDIR/kptr-run-<uid>. As root, functions run as unprivileged host uids
// (RootHostIDBase+), and those must traverse every directory above the state
// directory: libcontainer's init mounts each run's overlay and root there as
// the run's container root, and the landlock tier's functions open their run
// directory there. Root's $TMPDIR and $XDG_RUNTIME_DIR are often private
// (Debian's libpam-tmpdir gives /tmp/user/0, systemd /run/user/0, both
// 0700); kptr never widens them. It takes instead the first of
// rootStateDirs whose parent every uid may traverse and kptr may write, and
// that is not already something else than a directory of kptr's uid:
// /tmp/kptr-run-0 (on the file system $TMPDIR is usually on), else, if
// another user took that name first, /run/kptr (which only root can
// create). When none is usable it keeps the usual directory, and the probes
// report the state directory as failed with the fix (StateDirResult).
var RootStateDirs = []string{"/tmp/kptr-run-", "/run/kptr"}

// StateDirFor chooses the run-state directory for the given
// $XDG_RUNTIME_DIR and $TMPDIR; mapped says functions run as other uids
// than kptr's (root, see CanMapRange).
func StateDirFor(xdg, tmp string, mapped bool) string {
	uid := strconv.Itoa(os.Geteuid())
	usual := filepath.Join(tmp, "kptr-run-"+uid)
	var cands []string
	if xdg != "" && unix.Access(xdg, unix.W_OK|unix.X_OK) == nil {
		cands = append(cands, filepath.Join(xdg, "kptr"))
	}
	cands = append(cands, usual)
	if !mapped {
		return cands[0]
	}
	for _, d := range RootStateDirs {
		if strings.HasSuffix(d, "-") {
			d += uid
		}
		cands = append(cands, d)
	}
	for _, d := range cands {
		var st unix.Stat_t
		if unix.Lstat(d, &st) == nil && (st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid()) {
			continue // taken: ensurePrivateDir would refuse it
		}
		if parent := filepath.Dir(d); unix.Access(parent, unix.W_OK|unix.X_OK) == nil && WorldTraversable(parent) {
			return d
		}
	}
	return usual
}

// Untraversable is the first directory of dir's path (from dir up) that
// uids other than its owner and group cannot traverse, "" if there is none.
func Untraversable(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return d
		}
		if d == "/" {
			return ""
		}
	}
}

// StateDirResult is the "statedir" probe of either tier: dir can be
// created private to kptr's uid and, when functions run as other uids
// (mapped), they can reach it.
func StateDirResult(dir string, mapped bool) ProbeResult {
	if err := EnsurePrivateDir(dir); err != nil {
		return ProbeResult{Name: "statedir", Status: StatusFailed, Detail: "run state directory unusable: " + err.Error(),
			Fix: "a writable $TMPDIR (the sidecar's cmp-tmp emptyDir on /tmp) or $XDG_RUNTIME_DIR"}
	}
	if err := StateDirReachable(dir, mapped); err != nil {
		return ProbeResult{Name: "statedir", Status: StatusFailed, Detail: err.Error(),
			Fix: fmt.Sprintf("set TMPDIR (and unset XDG_RUNTIME_DIR) to a directory whose whole path every user may traverse (o+x; /tmp normally is); %s may stay private", filepath.Dir(dir))}
	}
	return ProbeResult{Name: "statedir", Status: StatusOK, Detail: "run state in " + dir}
}

// StateDirReachable says why the uids functions run as (mapped: kptr is
// root) cannot reach dir, nil when they can.
func StateDirReachable(dir string, mapped bool) error {
	if !mapped {
		return nil
	}
	if d := Untraversable(dir); d != "" {
		return fmt.Errorf("run state directory %s is out of reach of the host uids functions run as (%d-%d): %s is not traversable by other users", dir, RootHostIDBase, RootHostIDBase+RootHostIDSize-1, d)
	}
	return nil
}

// EnsurePrivateDir creates dir (mode 0711: the sandbox's mapped uid must
// traverse it, nobody may list it) and refuses a directory someone else owns
// or a symlink, as a shared /tmp would allow. dir is opened without
// following a link and checked and changed through that descriptor
// (privdir.Open, the one helper for kptr's directories under predictable
// names), so nothing can be swapped in between.
func EnsurePrivateDir(dir string) error {
	root, err := privdir.Open(dir, privdir.Options{Perm: 0o711, SetPerm: true, ParentPerm: 0o755})
	if err != nil {
		return err
	}
	return root.Close()
}

// DefaultStateDir is where run state lives unless WithStateDir says
// otherwise: $XDG_RUNTIME_DIR/kptr, else $TMPDIR/kptr-run-<uid>; as root,
// when the uids functions run as cannot traverse those, /tmp/kptr-run-0 or
// /run/kptr (see StateDirFor).
func DefaultStateDir() string {
	return StateDirFor(os.Getenv("XDG_RUNTIME_DIR"), os.TempDir(), CanMapRange())
}

// WorldTraversable: every directory from / to dir is searchable by others.
func WorldTraversable(dir string) bool { return Untraversable(dir) == "" }
