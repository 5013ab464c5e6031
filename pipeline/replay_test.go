package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/runtime"
)

// mapMemo is a RenderMemo keyed by the package tree and its images,
// recording in memory. It notes whether the package was locked when looked
// up.
type mapMemo struct {
	t        *testing.T
	settings string // what else keys the render (its output, results)
	records  map[memo.Key]*Outcome
	key      memo.Key
	hits     int
	recorded int
	locked   bool
}

func (m *mapMemo) Lookup(pkg *os.Root, images []string) (*Outcome, bool) {
	k := memo.NewKey("test")
	if !k.Tree(pkg.FS()) {
		return nil, false
	}
	k.List("images", images)
	k.Str("settings", m.settings)
	m.key = k.Sum()
	// another writer's lock attempt fails while the render holds it
	f, err := os.Open(pkg.Name())
	if err != nil {
		m.t.Fatal(err)
	}
	m.locked = errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
	f.Close()
	rec := m.records[m.key]
	if rec != nil {
		m.hits++
		// what a store hands back: decoded from its bytes
		b, err := rec.Marshal()
		if err != nil {
			m.t.Fatal(err)
		}
		if rec, err = UnmarshalOutcome(b); err != nil {
			m.t.Fatal(err)
		}
	}
	return rec, true
}

func (m *mapMemo) Record(o *Outcome) {
	m.recorded++
	m.records[m.key] = o
}

// countingRunner counts runs.
type countingRunner struct {
	n    int
	next runtime.Runner
}

func (c *countingRunner) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	c.n++
	return c.next.Run(ctx, b, inv)
}

// modeSnapshot maps each entry under dir to its mode and content.
func modeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] += "\n" + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var passLine = regexp.MustCompile(`(?m)^\[PASS\] (".*") in [^ \n]+( \(cached result\))?$`)

// A replayed render leaves what a real render leaves, for every output,
// with a subpackage, results, a removed and a new file and a kept mode;
// no function runs; the lookup happens with the package locked in place.
func TestRenderReplayIsARealRender(t *testing.T) {
	fake := newFake(t)
	fake.images["example.test/label:v1"] = []string{"op=label", "key=app", "value=web"}
	fake.images["example.test/result:v1"] = []string{"op=result", "severity=info", "message=looked"}
	fake.images["example.test/stderr:v1"] = []string{"op=stderr", "message=said"}
	fake.images["example.test/delete:v1"] = []string{"op=delete", "kind=ConfigMap", "name=gone"}
	fake.images["example.test/move:v1"] = []string{"op=move", "name=moved", "path=new/moved.yaml"}
	files := map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: example.test/label:v1\n    - image: example.test/result:v1\n"+
			"    - image: example.test/stderr:v1\n    - image: example.test/delete:v1\n    - image: example.test/move:v1\n"),
		"cm.yaml":     fmt.Sprintf(cm, "a") + "data:\n  k: v # kept\n",
		"gone.yaml":   fmt.Sprintf(cm, "gone"),
		"moved.yaml":  fmt.Sprintf(cm, "moved"),
		"secret.yaml": fmt.Sprintf(cm, "secret"),
		"sub/Kptfile": kptfile("sub", "pipeline:\n  mutators:\n    - image: example.test/label:v1\n"),
		"sub/b.yaml":  fmt.Sprintf(cm, "b"),
	}
	m := &mapMemo{t: t, records: map[memo.Key]*Outcome{}}
	for _, output := range []string{OutputInPlace, OutputStdout, OutputUnwrap, "DIR"} {
		for _, results := range []bool{false, true} {
			name := fmt.Sprintf("%q results=%v", output, results)
			type outcome struct {
				stdout, stderr string
				files, out     map[string]string
				runs           int
				err            error
			}
			render := func(mm RenderMemo) outcome {
				pkg := writeTree(t, files)
				if err := os.Chmod(filepath.Join(pkg, "secret.yaml"), 0o600); err != nil {
					t.Fatal(err)
				}
				// the same paths every time: the transcript shows them
				work := filepath.Join(os.TempDir(), "kptr-replay-test-"+t.Name())
				os.RemoveAll(work)
				t.Cleanup(func() { os.RemoveAll(work) })
				o := output
				if o == "DIR" {
					o = filepath.Join(work, "dir")
				}
				var stdout, stderr bytes.Buffer
				r := &countingRunner{next: runtime.Host{}}
				opts := Options{Resolver: fake, Runner: r, Output: o, Stdout: &stdout, Stderr: &stderr, Memo: mm}
				if results {
					opts.ResultsDir = filepath.Join(work, "results")
				}
				m.settings = name
				_, err := Render(context.Background(), pkg, opts)
				return outcome{stdout.String(), stderr.String(), modeSnapshot(t, pkg), modeSnapshot(t, work), r.n, err}
			}
			real := render(nil)
			if real.err != nil {
				t.Fatalf("%s: %v\n%s", name, real.err, real.stderr)
			}
			hits, recs := m.hits, m.recorded
			first := render(m)
			if first.err != nil || first.runs != 6 || m.hits != hits || m.recorded != recs+1 {
				t.Fatalf("%s: first render with memo: err %v, %d runs, %d hits, %d records (want 6 runs, a record)", name, first.err, first.runs, m.hits-hits, m.recorded-recs)
			}
			again := render(m)
			if again.err != nil || again.runs != 0 || m.hits != hits+1 {
				t.Fatalf("%s: replay: err %v, %d runs, %d hits (want no run, a hit)\n%s", name, again.err, again.runs, m.hits-hits, again.stderr)
			}
			if m.locked != (output == OutputInPlace) {
				t.Errorf("%s: package locked during the lookup: %v", name, m.locked)
			}
			if again.stdout != real.stdout {
				t.Errorf("%s: stdout differs:\n%s\nreal:\n%s", name, again.stdout, real.stdout)
			}
			if strings.Count(again.stderr, "(cached result)") != 6 {
				t.Errorf("%s: want 6 functions marked reused:\n%s", name, again.stderr)
			}
			if got, want := passLine.ReplaceAllString(again.stderr, "[PASS] $1"), passLine.ReplaceAllString(real.stderr, "[PASS] $1"); got != want {
				t.Errorf("%s: stderr differs:\n%s\nreal:\n%s", name, got, want)
			}
			for what, pair := range map[string][2]map[string]string{"package": {real.files, again.files}, "output": {real.out, again.out}} {
				if fmt.Sprint(pair[0]) != fmt.Sprint(pair[1]) {
					t.Errorf("%s: %s differs:\n%v\nreal:\n%v", name, what, pair[1], pair[0])
				}
			}
		}
	}
}

// A failed render is not recorded, nor replayed.
func TestRenderReplayRecordsOnlySuccess(t *testing.T) {
	fake := newFake(t)
	fake.images["example.test/label:v1"] = []string{"op=label", "key=app", "value=web"}
	fake.images["example.test/crash:v1"] = []string{"op=crash", "code=1", "message=broken"}
	m := &mapMemo{t: t, records: map[memo.Key]*Outcome{}}
	files := map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: example.test/label:v1\n    - image: example.test/crash:v1\n"),
		"cm.yaml": fmt.Sprintf(cm, "a"),
	}
	for range 2 {
		if _, err := Render(context.Background(), writeTree(t, files), Options{Resolver: fake, Runner: runtime.Host{}, Memo: m}); err == nil {
			t.Fatal("the crashing render succeeded")
		}
	}
	if m.recorded != 0 || m.hits != 0 {
		t.Fatalf("a failed render was recorded (%d) or replayed (%d)", m.recorded, m.hits)
	}
}

func TestOutcomeDecodeIsExact(t *testing.T) {
	o := &Outcome{Output: OutputInPlace, Files: map[string][]byte{"a.yaml": []byte("a: 1\n"), "sub/b.yaml": {}}, Deletes: []string{"b.yaml", "c.yaml"}, Stdout: []byte{}, Transcript: []byte("x\n"), Functions: 2, Packages: 1}
	b, err := o.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalOutcome(b)
	if err != nil || fmt.Sprint(*got) != fmt.Sprint(*o) {
		t.Fatalf("round trip: %v, %+v", err, got)
	}
	// nil and empty differ (Fits reads Results)
	if got.Stdout == nil || got.Results != nil || got.Files["sub/b.yaml"] == nil {
		t.Errorf("nil and empty not kept apart: Stdout %#v, Results %#v, an empty file %#v", got.Stdout, got.Results, got.Files["sub/b.yaml"])
	}
	if again, _ := got.Marshal(); !bytes.Equal(again, b) {
		t.Error("a decoded record encodes differently")
	}
	if _, err := UnmarshalOutcome(append(b, 0)); err == nil {
		t.Error("trailing bytes accepted")
	}
	for n := range len(b) {
		if _, err := UnmarshalOutcome(b[:n]); err == nil {
			t.Fatalf("a record truncated to %d of %d bytes accepted", n, len(b))
		}
	}
	// a length past the end is refused before anything of that size is made
	huge := append([]byte(outcomeMagic), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	if _, err := UnmarshalOutcome(huge); err == nil {
		t.Error("a length past the record's end accepted")
	}
}
