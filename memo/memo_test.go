package memo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// countingRunner is the function: it counts real runs and echoes stdin
// with a run number, so a replay is told from a run by its output.
type countingRunner struct {
	runs     atomic.Int32
	exit     int
	err      error
	duration time.Duration
	prepared atomic.Int32
}

func (c *countingRunner) Run(_ context.Context, _ bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	n := c.runs.Add(1)
	in, _ := io.ReadAll(inv.Stdin)
	if c.err != nil {
		return runtime.Result{}, c.err
	}
	return runtime.Result{Stdout: fmt.Appendf(nil, "run %d: %s", n, in), Stderr: []byte("said something\n"), ExitCode: c.exit, Duration: c.duration}, nil
}

func (c *countingRunner) Prepare(context.Context, bundle.Bundle, runtime.Invocation) {
	c.prepared.Add(1)
}

func digest(c byte) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(string(c), 64)}
}

func testBundle() bundle.Bundle {
	return bundle.Bundle{Ref: "example.test/fn:v1", Digest: digest('a'), Rootfs: "/rootfs",
		Config: v1.Config{Entrypoint: []string{"function"}, Cmd: []string{"op=label"}, Env: []string{"PATH=/bin"}}}
}

func invocation(stdin string) runtime.Invocation {
	return runtime.Invocation{Stdin: strings.NewReader(stdin), Env: []string{"A=1"}, Timeout: time.Minute}
}

func newStore(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "memo"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newRunner(t *testing.T) (*Runner, *countingRunner) {
	fn := &countingRunner{}
	return &Runner{Next: fn, Store: newStore(t, Options{}), Variant: "sandbox=auto"}, fn
}

// run runs through r and returns the output and whether it was replayed.
func run(t *testing.T, r *Runner, b bundle.Bundle, inv runtime.Invocation) (string, bool) {
	t.Helper()
	res, err := r.Run(context.Background(), b, inv)
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout), res.Reused
}

// TestChangedInputAlwaysReruns is the proof: the same run is
// replayed, and a change of any one thing that decides it (input, config,
// image digest, environment, arguments, user, variant) runs the function.
func TestChangedInputAlwaysReruns(t *testing.T) {
	const rl = "kind: ResourceList\nitems:\n- kind: ConfigMap\nfunctionConfig:\n  data: {a: b}\n"
	changes := map[string]func(b *bundle.Bundle, inv *runtime.Invocation, variant *string){
		"input": func(_ *bundle.Bundle, inv *runtime.Invocation, _ *string) {
			inv.Stdin = strings.NewReader(rl + "- kind: Secret\n")
		},
		"config": func(_ *bundle.Bundle, inv *runtime.Invocation, _ *string) {
			inv.Stdin = strings.NewReader(strings.Replace(rl, "{a: b}", "{a: c}", 1))
		},
		"one input byte": func(_ *bundle.Bundle, inv *runtime.Invocation, _ *string) { inv.Stdin = strings.NewReader(rl + " ") },
		"image digest":   func(b *bundle.Bundle, _ *runtime.Invocation, _ *string) { b.Digest = digest('b') },
		"environment":    func(_ *bundle.Bundle, inv *runtime.Invocation, _ *string) { inv.Env = []string{"A=2"} },
		"env order":      func(_ *bundle.Bundle, inv *runtime.Invocation, _ *string) { inv.Env = []string{"A=1", "A=1"} },
		"image env":      func(b *bundle.Bundle, _ *runtime.Invocation, _ *string) { b.Config.Env = []string{"PATH=/usr/bin"} },
		"args":           func(b *bundle.Bundle, _ *runtime.Invocation, _ *string) { b.Config.Cmd = []string{"op=echo"} },
		"args split":     func(b *bundle.Bundle, _ *runtime.Invocation, _ *string) { b.Config.Cmd = []string{"op", "=label"} },
		"entrypoint": func(b *bundle.Bundle, _ *runtime.Invocation, _ *string) {
			b.Config.Entrypoint = []string{"/bin/sh", "-c"}
		},
		"working dir":     func(b *bundle.Bundle, _ *runtime.Invocation, _ *string) { b.Config.WorkingDir = "/tmp" },
		"image user":      func(b *bundle.Bundle, _ *runtime.Invocation, _ *string) { b.Config.User = "65532" },
		"as current user": func(_ *bundle.Bundle, inv *runtime.Invocation, _ *string) { inv.AsCurrentUser = true },
		"output cap":      func(_ *bundle.Bundle, inv *runtime.Invocation, _ *string) { inv.MaxOutput = 1 << 20 },
		"sandbox variant": func(_ *bundle.Bundle, _ *runtime.Invocation, v *string) { *v = "sandbox=none" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			r, fn := newRunner(t)
			first, reused := run(t, r, testBundle(), invocation(rl))
			if reused || fn.runs.Load() != 1 {
				t.Fatalf("first run: reused %v, %d runs", reused, fn.runs.Load())
			}
			again, reused := run(t, r, testBundle(), invocation(rl))
			if !reused || again != first || fn.runs.Load() != 1 {
				t.Fatalf("same run again: reused %v, %d runs, output %q (first %q)", reused, fn.runs.Load(), again, first)
			}
			b, inv, variant := testBundle(), invocation(rl), r.Variant
			change(&b, &inv, &variant)
			r.Variant = variant
			if _, reused := run(t, r, b, inv); reused || fn.runs.Load() != 2 {
				t.Fatalf("after changing the %s: reused %v, %d runs; want the function run", name, reused, fn.runs.Load())
			}
		})
	}
}

// TestNeverMemoised: network, mounts, exec functions (no rootfs), no
// digest: every run runs, nothing is recorded.
func TestNeverMemoised(t *testing.T) {
	cases := map[string]func(b *bundle.Bundle, inv *runtime.Invocation){
		"network": func(_ *bundle.Bundle, inv *runtime.Invocation) { inv.Network = true },
		"mounts": func(_ *bundle.Bundle, inv *runtime.Invocation) {
			inv.Mounts = []runtime.Mount{{Source: "/a", Target: "/b"}}
		},
		"exec function": func(b *bundle.Bundle, _ *runtime.Invocation) { b.Rootfs = "" },
		"no digest":     func(b *bundle.Bundle, _ *runtime.Invocation) { b.Digest = v1.Hash{} },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			r, fn := newRunner(t)
			for i := range 3 {
				b, inv := testBundle(), invocation("x")
				change(&b, &inv)
				if _, reused := run(t, r, b, inv); reused || int(fn.runs.Load()) != i+1 {
					t.Fatalf("run %d: reused %v, %d runs", i+1, reused, fn.runs.Load())
				}
			}
			if u, _ := r.Store.Usage(); u.Records != 0 {
				t.Fatalf("%d records, want none", u.Records)
			}
		})
	}
}

// TestOnlySuccessIsRecorded: a non-zero exit, a run error (timeout,
// sandbox) and a success slower than the current timeout all run again.
func TestOnlySuccessIsRecorded(t *testing.T) {
	for name, fn := range map[string]*countingRunner{
		"exit 1":         {exit: 1},
		"error":          {err: errors.New("timed out after 1s")},
		"slow for limit": {duration: 2 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Runner{Next: fn, Store: newStore(t, Options{})}
			for i := range 2 {
				res, _ := r.Run(context.Background(), testBundle(), invocation("x"))
				if res.Reused || int(fn.runs.Load()) != i+1 {
					t.Fatalf("run %d: reused %v, %d runs", i+1, res.Reused, fn.runs.Load())
				}
			}
		})
	}
}

// TestCorruptRecordIsRemoved: a flipped byte, a truncation, an empty file,
// garbage, a record written for another key: never trusted, the function
// runs, and the record is replaced by a good one. A directory under a
// record's name is not the store's: never trusted, and left alone.
func TestCorruptRecordIsRemoved(t *testing.T) {
	damage := map[string]func(t *testing.T, p string, other []byte){
		"flipped byte": func(t *testing.T, p string, _ []byte) { b := read(t, p); b[len(b)-3] ^= 1; write(t, p, b) },
		"flipped sum":  func(t *testing.T, p string, _ []byte) { b := read(t, p); b[len(magic)] ^= 1; write(t, p, b) },
		"truncated":    func(t *testing.T, p string, _ []byte) { b := read(t, p); write(t, p, b[:len(b)-5]) },
		"empty":        func(t *testing.T, p string, _ []byte) { write(t, p, nil) },
		"garbage":      func(t *testing.T, p string, _ []byte) { write(t, p, []byte("kptr-memo/1\nhello")) },
		"other key":    func(t *testing.T, p string, other []byte) { write(t, p, other) },
		"trailing":     func(t *testing.T, p string, _ []byte) { write(t, p, append(read(t, p), 0)) },
		"old version":  func(t *testing.T, p string, _ []byte) { b := read(t, p); b[len("kptr-memo/")] = '0'; write(t, p, b) },
		"directory": func(t *testing.T, p string, _ []byte) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, spoil := range damage {
		t.Run(name, func(t *testing.T) {
			r, fn := newRunner(t)
			run(t, r, testBundle(), invocation("other"))
			run(t, r, testBundle(), invocation("x"))
			inv := invocation("x")
			p := filepath.Join(r.Store.Dir(), KeyOf(testBundle(), inv, r.Variant, []byte("x")).String())
			other := read(t, filepath.Join(r.Store.Dir(), KeyOf(testBundle(), inv, r.Variant, []byte("other")).String()))
			spoil(t, p, other)
			out, reused := run(t, r, testBundle(), invocation("x"))
			if reused || fn.runs.Load() != 3 || out != "run 3: x" {
				t.Fatalf("after a damaged record: reused %v, %d runs, %q; want a real run", reused, fn.runs.Load(), out)
			}
			_, reused = run(t, r, testBundle(), invocation("x"))
			if name == "directory" {
				if st, err := os.Lstat(p); reused || err != nil || !st.IsDir() {
					t.Fatalf("a directory under a record's name: reused %v, now %v %v; want it left alone and never replayed", reused, st, err)
				}
				return
			}
			if !reused {
				t.Fatal("the damaged record was not replaced by a good one")
			}
		})
	}
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentWriters: many writers of one key (as many processes:
// separate Stores on one directory) and readers at the same time; a reader
// sees a whole record or none, never a torn one, and every writer succeeds.
func TestConcurrentWriters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memo")
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB: many write calls
	k := KeyOf(testBundle(), invocation(""), "", []byte("x"))
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 8 {
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := s.Put(k, Record{Stdout: big, Stderr: []byte{byte(i)}}); err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 50 {
				if rec, ok := s.Get(k); ok && !bytes.Equal(rec.Stdout, big) {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d torn reads", bad.Load())
	}
	s, _ := Open(dir, Options{})
	defer s.Close()
	if _, ok := s.Get(k); !ok {
		t.Fatal("no record after the writers")
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), tmpPrefix) {
			t.Errorf("temporary %s left", de.Name())
		}
	}
}

// TestPrune: least recently used first beyond the size, by age, all, dry
// run, debris; a hit makes a record recent.
func TestPrune(t *testing.T) {
	s := newStore(t, Options{})
	now := time.Now()
	s.now = func() time.Time { return now }
	keys := make([]Key, 5)
	for i := range keys {
		keys[i] = KeyOf(testBundle(), invocation(""), "", []byte{byte(i)})
		if err := s.Put(keys[i], Record{Stdout: bytes.Repeat([]byte{'x'}, 1000)}); err != nil {
			t.Fatal(err)
		}
		// record i last used i hours ago
		used := now.Add(-time.Duration(i) * time.Hour)
		if err := os.Chtimes(filepath.Join(s.Dir(), keys[i].String()), used, used); err != nil {
			t.Fatal(err)
		}
	}
	size := int64(len(encode(keys[0], Record{Stdout: bytes.Repeat([]byte{'x'}, 1000)})))
	// a hit on the oldest makes it the most recent
	if _, ok := s.Get(keys[4]); !ok {
		t.Fatal("miss")
	}
	write(t, filepath.Join(s.Dir(), tmpPrefix+"old"), nil)
	old := now.Add(-2 * staleTmp)
	os.Chtimes(filepath.Join(s.Dir(), tmpPrefix+"old"), old, old)
	write(t, filepath.Join(s.Dir(), tmpPrefix+"fresh"), nil)

	rep, err := s.Prune(PruneOptions{MaxBytes: 3 * size, DryRun: true})
	if err != nil || rep.Removed.Records != 2 || rep.Left.Records != 3 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	if u, _ := s.Usage(); u.Records != 5 || u.Bytes != 5*size {
		t.Fatalf("a dry run removed something: %+v", u)
	}
	if _, err := s.Prune(PruneOptions{MaxBytes: 3 * size}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false, false, true} {
		if _, err := os.Stat(filepath.Join(s.Dir(), keys[i].String())); (err == nil) != want {
			t.Errorf("record %d kept: %v, want %v", i, err == nil, want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), tmpPrefix+"old")); err == nil {
		t.Error("stale temporary kept")
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), tmpPrefix+"fresh")); err != nil {
		t.Error("a writer's fresh temporary was removed")
	}
	if rep, _ := s.Prune(PruneOptions{MaxAge: 30 * time.Minute}); rep.Removed.Records != 1 || rep.Left.Records != 2 {
		t.Fatalf("by age: %+v", rep)
	}
	if rep, _ := s.Prune(PruneOptions{All: true}); rep.Left.Records != 0 || rep.Removed.Records != 2 {
		t.Fatalf("all: %+v", rep)
	}
}

// TestSizeBound: Put keeps the store within MaxBytes (it prunes), and a
// record larger than MaxEntryBytes is not stored.
func TestSizeBound(t *testing.T) {
	s := newStore(t, Options{MaxBytes: 10_000, MaxEntryBytes: 4000})
	for i := range 20 {
		if err := s.Put(KeyOf(testBundle(), invocation(""), "", []byte{byte(i)}), Record{Stdout: bytes.Repeat([]byte{'x'}, 3000)}); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(s.Dir(), trimStamp)) // as if a minute had passed
		if u, _ := s.Usage(); u.Bytes > 10_000 {
			t.Fatalf("after %d puts the store holds %d bytes, more than its bound", i+1, u.Bytes)
		}
	}
	k := KeyOf(testBundle(), invocation(""), "", []byte("big"))
	if err := s.Put(k, Record{Stdout: bytes.Repeat([]byte{'x'}, 5000)}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(k); ok {
		t.Fatal("a record larger than MaxEntryBytes was stored")
	}
}

// TestOpenRefusesSharedDirectory: a store directory group or others can
// reach, or a non-directory, is refused.
func TestOpenRefusesSharedDirectory(t *testing.T) {
	d := filepath.Join(t.TempDir(), "memo")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o733); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d, Options{}); err == nil || !strings.Contains(err.Error(), "has mode 0733") {
		t.Fatalf("world-writable directory: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	write(t, f, nil)
	if _, err := Open(f, Options{}); err == nil {
		t.Fatal("a file was accepted as the store")
	}
}

// TestPerUser needs root: a directory or a record another user owns is
// never used; a cache another user owns puts the store in $TMPDIR.
func TestPerUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown)")
	}
	const other = 999
	t.Run("directory of another user", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "memo")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, other, other); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(d, Options{}); err == nil || !strings.Contains(err.Error(), "owned by uid 999") {
			t.Fatalf("another user's directory: %v", err)
		}
	})
	t.Run("record of another user", func(t *testing.T) {
		r, fn := newRunner(t)
		run(t, r, testBundle(), invocation("x"))
		p := filepath.Join(r.Store.Dir(), KeyOf(testBundle(), invocation("x"), r.Variant, []byte("x")).String())
		if err := os.Chown(p, other, other); err != nil {
			t.Fatal(err)
		}
		if _, reused := run(t, r, testBundle(), invocation("x")); reused || fn.runs.Load() != 2 {
			t.Fatal("a record another user owns was replayed")
		}
	})
	t.Run("cache of another user", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		c := filepath.Join(t.TempDir(), "cache")
		if err := os.Mkdir(c, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(c, other, other); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFor(c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if want := filepath.Join(tmp, "kptr-memo-0"); s.Dir() != want {
			t.Fatalf("store in %s, want %s", s.Dir(), want)
		}
	})
}

// TestOpenForOwnCache: the store of a cache the user owns is beside it.
func TestOpenForOwnCache(t *testing.T) {
	c := t.TempDir()
	s, err := OpenFor(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Dir() != filepath.Join(c, "memo") {
		t.Fatalf("store in %s", s.Dir())
	}
	st, _ := os.Stat(s.Dir())
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v", st.Mode())
	}
}

// TestPrepareOnlyAfterMiss: while every run is replayed, nothing is
// prepared; a request held back is forwarded when a run misses; after a
// miss, or for a run that cannot be replayed, requests go through at once.
func TestPrepareOnlyAfterMiss(t *testing.T) {
	r, fn := newRunner(t)
	run(t, r, testBundle(), invocation("x"))
	r2 := &Runner{Next: fn, Store: r.Store, Variant: r.Variant}
	prepared := func(want int32, when string) {
		t.Helper()
		if got := fn.prepared.Load(); got != want {
			t.Fatalf("%s: %d prepared, want %d", when, got, want)
		}
	}
	r2.Prepare(context.Background(), testBundle(), invocation(""))
	prepared(0, "before any run")
	net := invocation("")
	net.Network = true
	r2.Prepare(context.Background(), testBundle(), net)
	prepared(1, "a run that cannot be replayed")
	run(t, r2, testBundle(), invocation("x")) // a hit
	r2.Prepare(context.Background(), testBundle(), invocation(""))
	prepared(1, "after hits only")
	run(t, r2, testBundle(), invocation("y")) // a miss releases the held-back request
	prepared(2, "after the first miss")
	r2.Prepare(context.Background(), testBundle(), invocation(""))
	prepared(3, "after a miss")
}

// TestPlantedLinkIsNeverFollowed (issue 21): a link planted at the store's
// name, pointing at a private directory of the user's, is refused, and
// nothing in that directory changes; so is a link at $TMPDIR/kptr-memo-<uid>
// when the cache is not the user's.
func TestPlantedLinkIsNeverFollowed(t *testing.T) {
	victim := t.TempDir()
	if err := os.Chmod(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(victim, "document.txt"), []byte("keep me"))
	if err := os.Mkdir(filepath.Join(victim, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(victim, ".ssh", "id_ed25519"), []byte("key"))
	store := filepath.Join(t.TempDir(), "memo")
	if err := os.Symlink(victim, store); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(store, Options{}); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("a planted link was accepted as the store: %v", err)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if err := os.Symlink(victim, filepath.Join(tmp, "kptr-memo-"+strconv.Itoa(os.Geteuid()))); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "cache")
	if err := os.Symlink(t.TempDir(), cache); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(cache, "memo")); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenFor(cache, Options{}); err == nil {
		s.Close()
		t.Fatalf("OpenFor used %s", s.Dir())
	}
	ents, err := os.ReadDir(victim)
	if err != nil || len(ents) != 2 {
		t.Fatalf("the victim's directory changed: %v %v", ents, err)
	}
	if b := read(t, filepath.Join(victim, ".ssh", "id_ed25519")); string(b) != "key" {
		t.Fatal("the victim's key changed")
	}
}

// TestPruneRemovesOnlyItsOwn (issue 21): Prune, even of everything, removes
// the store's records and stale temporaries and nothing else: not a
// directory or link under any name, not a file of another name.
func TestPruneRemovesOnlyItsOwn(t *testing.T) {
	s := newStore(t, Options{})
	k := KeyOf(testBundle(), invocation(""), "", []byte("x"))
	if err := s.Put(k, Record{Stdout: []byte("out")}); err != nil {
		t.Fatal(err)
	}
	foreign := []string{"notes.txt", "tmp-dir", "0123456789012345678901234567890123456789012345678901234567890123", "link", ".ssh"}
	write(t, filepath.Join(s.Dir(), "notes.txt"), []byte("not the store's"))
	for _, d := range []string{"tmp-dir", foreign[2], ".ssh"} {
		if err := os.Mkdir(filepath.Join(s.Dir(), d), 0o700); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(s.Dir(), d, "inside"), []byte("x"))
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(s.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleTmp)
	for _, p := range []string{"tmp-dir", "notes.txt"} {
		os.Chtimes(filepath.Join(s.Dir(), p), old, old)
	}
	if _, err := s.Prune(PruneOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(), k.String())); err == nil {
		t.Error("the record was kept")
	}
	for _, name := range foreign {
		if _, err := os.Lstat(filepath.Join(s.Dir(), name)); err != nil {
			t.Errorf("Prune removed %s, which the store did not write: %v", name, err)
		}
	}
}
