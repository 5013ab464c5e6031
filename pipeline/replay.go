package pipeline

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/kptr-dev/kptr/internal/binrec"
)

// A whole render can be replayed: Render asks Options.Memo, with the
// package open (and, in place, locked from then until its commit), for the
// recorded outcome of rendering this very package as these options say.
// A hit is written through the same path a real render's output takes (the
// journal, the package's os.Root and its link checks, the atomic commit
// that leaves unchanged files alone and keeps modes; writeNewDir for -o
// DIR; results.yaml), so the files end as a real render would leave them,
// or untouched when the write fails. A miss renders and, if the render
// succeeds, hands its outcome to Record. What keys a render (the package
// tree, the images' digests, every setting) is the Memo's business; Render
// only passes what it reads under the lock.

// RenderMemo records and replays whole renders (cmd/kptr keys them).
type RenderMemo interface {
	// Lookup returns the recorded outcome of rendering the package pkg
	// holds, whose Kptfiles name images (as Images lists them; a package
	// whose list cannot be made, e.g. for a tag constraint, is not looked
	// up). ok false: the render is not memoised as a whole (nothing is
	// recorded); rec nil and ok true: not recorded yet (Record follows a
	// success).
	Lookup(pkg *os.Root, images []string) (rec *Outcome, ok bool)
	// Record stores a successful render's outcome under the key of what
	// its Lookup read (the tree before the render; images the render
	// pulled may be keyed only now).
	Record(*Outcome)
}

// Outcome is a successful render's whole observable outcome.
type Outcome struct {
	// Output is the destination it was rendered to: OutputInPlace,
	// OutputStdout, OutputUnwrap, or outputDir for any directory.
	Output string
	// Files are, in place, the files the commit was given (package-relative
	// path → content; the commit skips those unchanged) and Deletes those it
	// removed; with -o DIR, the files written to DIR.
	Files   map[string][]byte
	Deletes []string
	// Stdout is what -o stdout|unwrap wrote.
	Stdout []byte
	// Results is results.yaml, when a results directory was given.
	Results []byte
	// Transcript is what the render printed before writing its output
	// (replayed with each [PASS] line marked as a cached result and timed
	// anew); the lines after it are printed again by the replay.
	Transcript []byte
	// Functions and Packages are the counts of the success line.
	Functions, Packages int
}

// Fits reports whether o can be replayed for a render with opts: it was
// written to the same kind of destination, with results when opts asks for
// them. (A key that covers both never finds another; Render checks anyway.)
func (o *Outcome) Fits(opts Options) bool {
	return o.Output == OutputClass(opts.Output) && (opts.ResultsDir == "" || o.Results != nil)
}

// outputDir is Outcome.Output for -o DIR (whatever the directory).
const outputDir = "dir"

// OutputClass is the kind of destination output names: OutputInPlace,
// OutputStdout, OutputUnwrap, or "dir" for any directory (a whole render's
// record and key care which kind, not which directory).
func OutputClass(output string) string {
	switch output {
	case OutputInPlace, OutputStdout, OutputUnwrap:
		return output
	}
	return outputDir
}

// The record of an Outcome: outcomeMagic, then the fields in declaration
// order, each string and byte slice as a uvarint length and its bytes
// (Stdout, Results and Transcript after a byte that says whether they are
// there at all: nil and empty differ, as Fits reads Results), Files sorted
// by path, the counts as uvarints. Not encoding/gob, whose package
// initialiser ran in every start of kptr (issue 33); the records of
// another kptr build are never read (the memo's key names the build).
const outcomeMagic = "kptr-outcome/1\n"

// Marshal encodes o for a record store (UnmarshalOutcome decodes it).
func (o *Outcome) Marshal() ([]byte, error) {
	if o.Functions < 0 || o.Packages < 0 {
		return nil, errors.New("negative count in a render's outcome")
	}
	b := append([]byte(nil), outcomeMagic...)
	b = binrec.AppendBytes(b, []byte(o.Output))
	b = binary.AppendUvarint(b, uint64(len(o.Files)))
	for _, name := range slices.Sorted(maps.Keys(o.Files)) {
		b = binrec.AppendBytes(b, []byte(name))
		b = binrec.AppendBytes(b, o.Files[name])
	}
	b = binary.AppendUvarint(b, uint64(len(o.Deletes)))
	for _, d := range o.Deletes {
		b = binrec.AppendBytes(b, []byte(d))
	}
	for _, v := range [][]byte{o.Stdout, o.Results, o.Transcript} {
		if v == nil {
			b = append(b, 0)
			continue
		}
		b = binrec.AppendBytes(append(b, 1), v)
	}
	b = binary.AppendUvarint(b, uint64(o.Functions))
	return binary.AppendUvarint(b, uint64(o.Packages)), nil
}

// UnmarshalOutcome decodes what Marshal encoded: exactly one Outcome,
// nothing after it (a record store bounds b's size; binrec checks every
// length against what is left of b).
func UnmarshalOutcome(b []byte) (*Outcome, error) {
	if !bytes.HasPrefix(b, []byte(outcomeMagic)) {
		return nil, errors.New("not a recorded render")
	}
	d := binrec.NewReader(b[len(outcomeMagic):])
	o := &Outcome{Output: string(d.Bytes())}
	if n := d.Count(); n > 0 {
		o.Files = make(map[string][]byte, n)
		for range n {
			name := string(d.Bytes())
			o.Files[name] = d.Bytes()
		}
	}
	for n := d.Count(); n > 0; n-- {
		o.Deletes = append(o.Deletes, string(d.Bytes()))
	}
	for _, v := range []*[]byte{&o.Stdout, &o.Results, &o.Transcript} {
		switch d.Byte() {
		case 1:
			*v = d.Bytes()
		case 0:
		default:
			d.Fail()
		}
	}
	functions, packages := d.Uvarint(), d.Uvarint()
	switch {
	case d.Bad() || functions > math.MaxInt32 || packages > math.MaxInt32:
		return nil, errors.New("truncated or malformed recorded render")
	case d.Len() != 0:
		return nil, errors.New("trailing bytes after a recorded render")
	}
	o.Functions, o.Packages = int(functions), int(packages)
	return o, nil
}

// lookup asks opts.Memo for a recorded outcome fit for this render; on a
// miss it starts recording this one (if it may be memoised).
func (r *renderer) lookup() *Outcome {
	if r.opts.Memo == nil || r.opts.Output == OutputMemory {
		return nil
	}
	o := r.opts
	o.Resolver = nil // a tag constraint is an error: not memoised as a whole
	imgs, err := images(r.fs, &o)
	if err != nil {
		return nil
	}
	rec, ok := r.opts.Memo.Lookup(r.fs.root, imgs)
	if !ok {
		return nil
	}
	if rec != nil && rec.Fits(r.opts) {
		return rec
	}
	r.outcome = &Outcome{Output: OutputClass(r.opts.Output)}
	r.transcript = &bytes.Buffer{}
	if r.pr.w != nil {
		r.pr.w = io.MultiWriter(r.pr.w, r.transcript)
	} else {
		r.pr.w = r.transcript
	}
	return nil
}

// endTranscript ends the recording of the transcript: what follows (the
// success line, the results line) the replay prints itself.
func (r *renderer) endTranscript() {
	if r.outcome == nil {
		return
	}
	r.outcome.Transcript = bytes.Clone(r.transcript.Bytes())
	r.outcome.Functions, r.outcome.Packages = r.executed, r.pkgs
	r.pr.w, r.transcript = r.opts.Stderr, nil
}

// record hands a successful render's outcome to opts.Memo.
func (r *renderer) record() {
	if r.outcome != nil && r.ctx.Err() == nil {
		r.opts.Memo.Record(r.outcome)
	}
}

// writeOutput writes out for -o stdout|unwrap|DIR (writeOutput), and
// records what it wrote.
func (r *renderer) writeOutput(out []*yaml.RNode) error {
	if r.outcome == nil {
		return writeOutput(r.opts.Output, r.opts.Stdout, out)
	}
	switch r.opts.Output {
	case OutputStdout, OutputUnwrap:
		var b bytes.Buffer
		if err := writeOutput(r.opts.Output, &b, out); err != nil {
			return err
		}
		r.outcome.Stdout = b.Bytes()
		_, err := r.opts.Stdout.Write(b.Bytes())
		return err
	}
	files, err := encodeFiles(out)
	if err != nil {
		return err
	}
	r.outcome.Files = files
	return writeNewDir(r.opts.Output, files)
}

// replay reproduces rec: the transcript, then the output as the render
// writes it, then results.yaml.
func (r *renderer) replay(rec *Outcome) (*Output, error) {
	replayTranscript(r.pr, rec.Transcript)
	switch r.opts.Output {
	case OutputInPlace:
		if err := r.writer.commit(rec.Files, rec.Deletes); err != nil {
			return nil, newError(err, ".", "")
		}
		r.pr.printf("Successfully executed %d function(s) in %d package(s).\n", rec.Functions, rec.Packages)
	case OutputStdout, OutputUnwrap:
		if _, err := r.opts.Stdout.Write(rec.Stdout); err != nil {
			return nil, newError(err, ".", "")
		}
	default:
		if err := writeNewDir(r.opts.Output, rec.Files); err != nil {
			return nil, newError(err, ".", "")
		}
	}
	res := &Output{Functions: rec.Functions, Packages: rec.Packages}
	if r.opts.ResultsDir != "" {
		if err := r.writeResults(rec.Results); err != nil {
			return res, newError(err, ".", "")
		}
	}
	return res, nil
}

// replayTranscript prints a recorded transcript with each function's
// [PASS] line as a replayed function's (runFunction): "(cached result)",
// and the time since the previous line as its duration (nothing ran).
func replayTranscript(pr *printer, t []byte) {
	var b bytes.Buffer
	last := time.Now()
	for len(t) > 0 {
		line, rest, nl := bytes.Cut(t, []byte("\n"))
		t = rest
		if name, ok := passName(line); ok && nl {
			now := time.Now()
			b.WriteString("[PASS] " + name + " in " + now.Sub(last).Truncate(time.Millisecond).String() + " (cached result)\n")
			last = now
			continue
		}
		b.Write(line)
		if nl {
			b.WriteByte('\n')
		}
	}
	pr.printf("%s", b.Bytes())
}

// passName is the quoted function name of a [PASS] line runFunction
// printed. A function's own output never starts a line: the transcript
// indents it (printLines).
func passName(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("[PASS] "))
	if !ok {
		return "", false
	}
	q, err := strconv.QuotedPrefix(string(rest))
	if err != nil || !bytes.HasPrefix(rest[len(q):], []byte(" in ")) {
		return "", false
	}
	return q, true
}
