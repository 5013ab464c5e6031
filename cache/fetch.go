package cache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Background fetches: a pull that outlives the process that needed it.
// Argo CD kills a `kptr generate` at its deadline; on a cold cache a large
// image may not be down by then. So the caller (cmd/kptr) runs the pull in a
// detached process and waits for it; this file is the part both share, in
// the cache directory:
//
//   - locks/fetch-<h>.lock: held (flock, exclusive) for the whole life of
//     the one fetch of an image, whatever number of renders wait for it.
//     Claim takes it without waiting and hands the open file to the
//     fetching process, so no second fetch can start between the check and
//     the start; the lock ends with the fetching process, however it ends
//     (the kernel releases it, also on SIGKILL).
//   - locks/fetch-<h>.json: the fetch's status (bytes so far, the error it
//     ended with), replaced by rename, so a reader sees a whole one.
//
// <h> is derived from the reference as the caller names it: two spellings of
// one image may fetch at the same time, and still download each blob once
// (blob locks, download.go).

// FetchState is where a background fetch is.
type FetchState string

const (
	FetchRunning FetchState = "fetching"
	FetchDone    FetchState = "done"
	FetchFailed  FetchState = "failed"
)

// FetchStatus is what a background fetch last recorded.
type FetchStatus struct {
	Image   string     `json:"image"`
	State   FetchState `json:"state"`
	Bytes   int64      `json:"bytes"` // of the blobs it downloads, fetched so far (resumed parts included)
	Total   int64      `json:"total"` // declared size of the blobs it downloads (0 until known)
	Error   string     `json:"error,omitempty"`
	Code    int        `json:"code,omitempty"` // the exit code its error calls for
	Updated time.Time  `json:"updated"`
}

// Progress describes how far the fetch got, for a message ("12.0 MiB of
// 40.0 MiB"); "" before the sizes are known.
func (s FetchStatus) Progress() string {
	if s.Total <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f MiB of %.1f MiB", float64(s.Bytes)/(1<<20), float64(s.Total)/(1<<20))
}

// BackgroundFetch is the shared state of the background fetch of one image.
type BackgroundFetch struct {
	ref        string
	lockPath   string
	statusPath string

	mu      sync.Mutex
	st      FetchStatus
	written time.Time
}

// BackgroundFetch returns the background-fetch state of ref in this cache.
func (c *Cache) BackgroundFetch(ref string) *BackgroundFetch { return NewBackgroundFetch(c.dir, ref) }

// NewBackgroundFetch returns the background-fetch state of ref in the cache
// at dir (absolute), for a process that has not opened it yet.
func NewBackgroundFetch(dir, ref string) *BackgroundFetch {
	sum := sha256.Sum256([]byte(ref))
	base := filepath.Join(dir, locksDir, "fetch-"+hex.EncodeToString(sum[:12]))
	return &BackgroundFetch{ref: ref, lockPath: base + ".lock", statusPath: base + ".json", st: FetchStatus{Image: ref}}
}

// Claim takes the fetch lock of the image without waiting. It returns the
// open lock file (whoever holds an open copy of it holds the lock: pass it
// to the fetching process and close it here) or ok false when a fetch of the
// image is running.
func (b *BackgroundFetch) Claim() (lock *os.File, ok bool, err error) {
	// never through a link: the lock is created in the cache's locks/, which
	// Open checked is no link and only its owner (or root) can write
	f, err := os.OpenFile(b.lockPath, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, &Error{Err: fmt.Errorf("fetch lock of %s: %w", b.ref, err)}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, &Error{Err: fmt.Errorf("fetch lock of %s: %w", b.ref, err)}
	}
	return f, true, nil
}

// Running reports whether a fetch of the image holds its lock now.
func (b *BackgroundFetch) Running() bool {
	f, err := os.OpenFile(b.lockPath, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close() // releases the shared lock taken below
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil
}

// Status is what the last fetch of the image recorded (ok false: none did).
func (b *BackgroundFetch) Status() (FetchStatus, bool) {
	raw, err := os.ReadFile(b.statusPath)
	if err != nil {
		return FetchStatus{}, false
	}
	var st FetchStatus
	if json.Unmarshal(raw, &st) != nil {
		return FetchStatus{}, false
	}
	return st, true
}

// Start records that the fetch began (call it holding the lock).
func (b *BackgroundFetch) Start() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st = FetchStatus{Image: b.ref, State: FetchRunning}
	b.write(true)
}

// Finish records how the fetch ended: err nil, or its error and the exit
// code it calls for.
func (b *BackgroundFetch) Finish(err error, code int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.st.State = FetchDone
	if err != nil {
		b.st.State, b.st.Error, b.st.Code = FetchFailed, oneLine(err.Error()), code
	}
	b.write(true)
}

// write replaces the status file, at most twice a second unless forced.
func (b *BackgroundFetch) write(force bool) {
	now := time.Now()
	if !force && now.Sub(b.written) < 500*time.Millisecond {
		return
	}
	b.written, b.st.Updated = now, now
	raw, err := json.Marshal(b.st)
	if err != nil {
		return
	}
	tmp := b.statusPath + ".tmp"
	if os.WriteFile(tmp, raw, 0o600) == nil {
		os.Rename(tmp, b.statusPath)
	}
}

// Progress is a Progress that records the fetch's bytes in its status (pass
// it to the Cache that fetches, WithProgress).
func (b *BackgroundFetch) Progress() Progress { return fetchProgress{b} }

type fetchProgress struct{ b *BackgroundFetch }

func (p fetchProgress) Pull(info PullInfo) PullProgress {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.b.st.Total += info.Bytes
	p.b.write(true)
	return p
}

func (p fetchProgress) Layer(_ int, _ v1.Hash, _, resumed int64) LayerProgress {
	p.add(resumed)
	return p
}

func (p fetchProgress) Add(n int) { p.add(int64(n)) }

func (p fetchProgress) add(n int64) {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	p.b.st.Bytes += n
	p.b.write(false)
}

func (p fetchProgress) Done(error) {}

// Unpacked reports, without network access, whether ref's image is cached
// and unpacked for this cache's platform: Resolve returns it without a
// download (under Always after a check of the tag at the registry).
func (c *Cache) Unpacked(ref string) bool {
	ir, err := c.parseRef(ref)
	if err != nil {
		return false
	}
	d, ok := c.localDescriptor(ir)
	if !ok {
		return false
	}
	_, err = os.Stat(c.metaPath(d.Digest.Hex))
	return err == nil
}
