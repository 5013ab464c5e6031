package memo

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/internal/binrec"
	"github.com/kptr-dev/kptr/internal/privdir"
)

// Options bound a Store. Zero fields take the defaults.
type Options struct {
	// MaxBytes bounds the records' total size (default 256 MiB).
	MaxBytes int64
	// MaxAge removes records not used for longer (default 7 days).
	MaxAge time.Duration
	// MaxEntryBytes bounds one record (default 64 MiB, at most MaxBytes):
	// a larger result is not recorded, a larger file is not read.
	MaxEntryBytes int64
}

const (
	defaultMaxBytes      = 256 << 20
	defaultMaxAge        = 7 * 24 * time.Hour
	defaultMaxEntryBytes = 64 << 20
	// touchGranularity bounds how often a hit rewrites a record's mtime.
	touchGranularity = time.Minute
	// trimInterval bounds how often Put prunes, across processes.
	trimInterval = time.Minute
	// staleTmp is the age after which a temporary file is debris of a
	// killed writer.
	staleTmp = time.Hour
)

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.MaxAge <= 0 {
		o.MaxAge = defaultMaxAge
	}
	if o.MaxEntryBytes <= 0 {
		o.MaxEntryBytes = defaultMaxEntryBytes
	}
	o.MaxEntryBytes = min(o.MaxEntryBytes, o.MaxBytes)
	return o
}

// Record is what a memoised run returned.
type Record struct {
	Stdout, Stderr []byte
	ExitCode       int
	// Duration is how long the recorded run took.
	Duration time.Duration
}

// Store holds records in one directory that only the current user can
// reach (see the package doc).
type Store struct {
	dir  string
	root *os.Root
	o    Options
	uid  int
	now  func() time.Time
}

// Names inside the store directory: records are <key hex> (64 characters),
// temporaries tmp-*, the trim stamp below.
const (
	tmpPrefix = "tmp-"
	trimStamp = "trimmed"
)

// OpenFor opens the current user's store for the image cache in cacheDir:
// cacheDir/memo when the current user owns cacheDir, else
// $TMPDIR/kptr-memo-<uid>; when that is refused too, the error says why
// (callers run without memoisation).
func OpenFor(cacheDir string, o Options) (*Store, error) {
	uid := os.Geteuid()
	var errs []error
	if st, err := os.Stat(cacheDir); err == nil && ownerOf(st) == uid {
		s, err := Open(filepath.Join(cacheDir, cache.MemoDir), o)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	s, err := Open(filepath.Join(os.TempDir(), "kptr-memo-"+strconv.Itoa(uid)), o)
	if err == nil {
		return s, nil
	}
	return nil, errors.Join(append(errs, err)...)
}

// Open opens (creating it, mode 0700) the store in dir. It refuses a
// link at dir (never followed: another user may have planted it in a
// shared $TMPDIR, pointing at a directory of the current user's that the
// store's cleanup would then sweep), and a directory that is not owned by
// the current user or that group or others can reach: its writer decides
// what a memoised render returns, its reader sees the functions' inputs.
// The checks are made on the opened directory (privdir.Open), and every
// later operation goes through that handle.
func Open(dir string, o Options) (*Store, error) {
	root, err := privdir.Open(dir, privdir.Options{Perm: 0o700})
	if err != nil {
		return nil, fmt.Errorf("memo directory: %w", err)
	}
	return &Store{dir: dir, root: root, o: o.withDefaults(), uid: os.Geteuid(), now: time.Now}, nil
}

func ownerOf(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the directory handle.
func (s *Store) Close() error { return s.root.Close() }

// Get returns the record of k, if a valid one exists. A record that fails
// any check is removed (best effort) and reported as absent. A hit marks
// the record used.
func (s *Store) Get(k Key) (Record, bool) {
	name := k.String()
	rec, err := s.read(name, k)
	if err != nil {
		var bad *badRecord
		if errors.As(err, &bad) {
			_ = s.root.Remove(name) // a regular file of the current user's, by its record name
		}
		return Record{}, false
	}
	s.touch(name)
	return rec, true
}

// read opens and checks one record.
func (s *Store) read(name string, k Key) (Record, error) {
	f, err := s.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Record{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Record{}, err
	}
	switch {
	case !st.Mode().IsRegular():
		return Record{}, errors.New("not a regular file") // not the store's: left alone
	case ownerOf(st) != s.uid:
		return Record{}, errors.New("not owned by the current user")
	case st.Size() > s.o.MaxEntryBytes:
		return Record{}, &badRecord{errors.New("too large")}
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return Record{}, &badRecord{err}
	}
	rec, err := decode(b, k)
	if err != nil {
		return Record{}, &badRecord{err}
	}
	return rec, nil
}

// badRecord is a record file of the store's (a regular file of the current
// user's under a record name) that fails its checks: Get removes it.
type badRecord struct{ err error }

func (e *badRecord) Error() string { return e.err.Error() }
func (e *badRecord) Unwrap() error { return e.err }

// touch records a use in the record's mtime, at most once a minute.
func (s *Store) touch(name string) {
	st, err := s.root.Stat(name)
	if err != nil || s.now().Sub(st.ModTime()) < touchGranularity {
		return
	}
	now := s.now()
	_ = s.root.Chtimes(name, now, now)
}

// Put records rec under k: written to a temporary file, renamed into place.
// A record larger than MaxEntryBytes is not stored (no error). Put prunes
// the store at most once a minute.
func (s *Store) Put(k Key, rec Record) error {
	// measured before encoding: a result too large to record is not
	// copied (an output is held once)
	if encodedSize(k, rec) > s.o.MaxEntryBytes {
		return nil
	}
	b := encode(k, rec)
	tmp, name, err := s.createTemp()
	if err != nil {
		return fmt.Errorf("memo %s: %w", s.dir, err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(name, k.String())
	}
	if err != nil {
		_ = s.root.Remove(name)
		return fmt.Errorf("memo %s: %w", s.dir, err)
	}
	s.maybeTrim()
	return nil
}

// createTemp creates a fresh temporary file in the store and returns it
// with its name in the store.
func (s *Store) createTemp() (*os.File, string, error) {
	for range 100 {
		name := tmpPrefix + strconv.FormatUint(rand.Uint64(), 36)
		f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", errors.New("no free temporary name")
}

// record file: magic, SHA-256 of the body, body. Body: the key, then
// uvarint exit code (zig-zag), duration in ns, stdout, stderr (each
// length-prefixed), nothing after.
var magic = []byte("kptr-memo/" + strconv.Itoa(FormatVersion) + "\n")

func encode(k Key, rec Record) []byte {
	body := make([]byte, 0, len(k)+3*binary.MaxVarintLen64+len(rec.Stdout)+len(rec.Stderr)+2*binary.MaxVarintLen64)
	body = append(body, k[:]...)
	body = binary.AppendVarint(body, int64(rec.ExitCode))
	body = binary.AppendUvarint(body, uint64(max(rec.Duration, 0)))
	body = binrec.AppendBytes(body, rec.Stdout)
	body = binrec.AppendBytes(body, rec.Stderr)
	sum := sha256.Sum256(body)
	out := make([]byte, 0, len(magic)+len(sum)+len(body))
	out = append(out, magic...)
	out = append(out, sum[:]...)
	return append(out, body...)
}

// encodedSize is len(encode(k, rec)), or more.
func encodedSize(k Key, rec Record) int64 {
	return int64(len(magic)+sha256.Size+len(k)+5*binary.MaxVarintLen64) + int64(len(rec.Stdout)) + int64(len(rec.Stderr))
}

var errCorrupt = errors.New("corrupt record")

func decode(b []byte, k Key) (Record, error) {
	if !bytes.HasPrefix(b, magic) || len(b) < len(magic)+sha256.Size+len(k) {
		return Record{}, errCorrupt
	}
	b = b[len(magic):]
	sum, body := b[:sha256.Size], b[sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) || !bytes.Equal(body[:len(k)], k[:]) {
		return Record{}, errCorrupt
	}
	d := binrec.NewReader(body[len(k):])
	exit := d.Varint()
	dur := d.Uvarint()
	stdout := d.Bytes()
	stderr := d.Bytes()
	if d.Bad() || d.Len() != 0 || dur > 1<<62 {
		return Record{}, errCorrupt
	}
	return Record{Stdout: stdout, Stderr: stderr, ExitCode: int(exit), Duration: time.Duration(dur)}, nil
}
