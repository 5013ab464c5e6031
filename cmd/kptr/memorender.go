package main

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/internal/dirfs"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/pipeline"
)

// With memo on, a whole fn render is memoised too: an unchanged package
// rendered again with the same settings is replayed without reading its
// resources as YAML, running or replaying any function, or starting the
// sandbox. pipeline.Render looks the record up with the package open (and
// locked, in place) and writes a hit through the path a real render's
// output takes (pipeline.RenderMemo). The key is generate's (fnenv's WholeKey:
// kptr's build, every entry of the package tree, the digest each image
// resolves to through the cache alone, the image prefix, function timeout,
// output limits and sandbox choice) and the settings only a render reads:
// the kpt face, the package's absolute path (every resource carries it to
// the functions, as kpt's do; the transcript shows its name), the output
// destination (in place, stdout, unwrap, a directory: which one does not
// matter), whether there is a results directory (the replay prints its
// path anew), --truncate-output. A render allowed exec functions or the
// network is never memoised as a whole, nor is a package with a link or a
// special file, a tag constraint, or pull policy Always. Only a successful
// render is recorded. The tree half of the key is taken before the render
// (in place, the render rewrites the tree); a render whose images were not
// all cached yet is keyed when it succeeded, on the digests it pulled, so
// the next render of the unchanged package is a replay.

// renderMemo keys and records whole renders for pipeline.Render.
type renderMemo struct {
	ctx        context.Context
	g          *globals
	env        *fnenv.Env
	output     string
	resultsDir string
	truncate   bool
	t0         time.Time

	// set by Lookup: the tree's half of the key and the images; the key
	// and its store once the images are cached (by Lookup, else Record)
	tree   fnenv.Tree
	pkg    string
	images []string
	st     *memo.Store
	key    memo.Key
}

// renderMemo is the whole-render memo for fn render's settings; nil when
// memo is off or the render cannot be memoised as a whole.
func (g *globals) renderMemo(ctx context.Context, env *fnenv.Env, allowExec, allowNetwork bool, output, resultsDir string, truncate bool) pipeline.RenderMemo {
	if !g.memoOn(false) || allowExec || allowNetwork {
		return nil
	}
	return &renderMemo{ctx: ctx, g: g, env: env, output: output, resultsDir: resultsDir, truncate: truncate, t0: time.Now()}
}

// Lookup keys the package pkg holds and returns its record, if any.
func (m *renderMemo) Lookup(pkg *os.Root, images []string) (*pipeline.Outcome, bool) {
	files := dirfs.New(pkg)
	defer files.Close()
	t, ok := m.env.TreeKey("render", files)
	if !ok {
		return nil, false
	}
	m.tree, m.pkg, m.images = t, pkg.Name(), images
	if !m.keyed() {
		return nil, true // an image to pull: keyed by Record
	}
	rec, ok := m.st.Get(m.key)
	if !ok {
		return nil, true
	}
	o, err := pipeline.UnmarshalOutcome(rec.Stdout)
	if err != nil || !o.Fits(pipeline.Options{Output: m.output, ResultsDir: m.resultsDir}) {
		return nil, true
	}
	m.g.logger().Debug("replaying the recorded render of this unchanged package (memo)", "dir", displayPath(pkg.Name()))
	return o, true
}

// keyed finishes the key of the render (the tree's half taken) once every
// image is cached; false while one is not.
func (m *renderMemo) keyed() bool {
	k, st := m.env.ImagesKey(m.ctx, m.tree, m.images)
	if k == nil {
		return false
	}
	k.Str("kpt", strconv.FormatBool(m.g.kpt))
	// the functions see it (internal.config.kubernetes.io/package-path, as
	// in kpt), and the transcript shows its name
	k.Str("package", m.pkg)
	k.Str("output", pipeline.OutputClass(m.output))
	k.Str("results", strconv.FormatBool(m.resultsDir != ""))
	k.Str("truncate-output", strconv.FormatBool(m.truncate))
	m.st, m.key = st, k.Sum()
	return true
}

// Record stores a successful render's outcome, under the key Lookup took
// or, when an image had to be pulled, the key finished now: the tree as
// the render read it and the digests it pulled.
func (m *renderMemo) Record(o *pipeline.Outcome) {
	if m.st == nil && !m.keyed() {
		return
	}
	b, err := o.Marshal()
	if err != nil {
		return
	}
	// best effort: a store that cannot be written only costs the next render
	_ = m.st.Put(m.key, memo.Record{Stdout: b, Duration: time.Since(m.t0)})
}
