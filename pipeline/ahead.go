package pipeline

import (
	"context"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"github.com/kptr-dev/kptr/runtime"
)

// Preparing sandboxes ahead of their turn. When the Runner can
// (runtime.Preparer) and the Resolver can look an image up in the cache
// without pulling (CachedResolver), a render asks for the sandbox of an
// image function to be set up before the function runs:
//
//   - the root package's first earlyAhead image functions as soon as its
//     Kptfile is read, in the background, so that opening the cache and the
//     sandbox and setting the first sandbox up overlap with reading the
//     package (fn eval's one function likewise, before its package is read);
//   - then, when a function of a package starts, the next one of the same
//     package's pipeline (mutators, then validators: the last mutator
//     prepares the first validator).
//
// Each pipeline position is asked for at most once, so at most two prepared
// sandboxes wait at a time (the runtime's bound). Nothing here can fail or
// change what the render does: every function is resolved and run at its
// own turn exactly as without it, a Kptfile's errors surface as before, and
// a prepared sandbox that is not used is destroyed when Render returns.

// earlyAhead is how many image functions of the root pipeline are prepared
// while the package is read (each prepared sandbox holds ~3 MB until its
// turn; the runtime keeps at most two). One: with two, the second's set-up
// competed with reading the package and with the first function on two
// shared cores and made the first function slower (measured: 440 against
// 364 ms median under load); the second is prepared at the first's turn.
const earlyAhead = 1

// fetchAhead asks a Fetcher resolver to start fetching the image of every
// function of the root package's pipeline (each image once; conditional
// functions, tag constraints and images the allow-list refuses left to
// their turn, as imageOf says): on a cold cache the images then download
// together, and while the first functions run, instead of each one at its
// function's turn. Later packages' images (subpackages render first, the
// root last) are fetched at their turn as before. What a turn sees is what
// it would have pulled itself (Fetcher); a render that stops early leaves
// the fetches it did not need to end with it (prepCtx).
func (r *renderer) fetchAhead() {
	f, ok := r.opts.Resolver.(Fetcher)
	if !ok {
		return
	}
	p := r.root.pipeline()
	seen := map[string]bool{}
	for pos := range len(p.Mutators) + len(p.Validators) {
		if ref := r.pipelineImage(r.root, pos); ref != "" && !seen[ref] {
			seen[ref] = true
			f.Fetch(r.prepCtx, ref)
		}
	}
}

// aheadKey is a position in a package's pipeline: mutators, then validators.
type aheadKey struct {
	pn  *pkgNode
	pos int
}

// prepareEarly starts preparing the first earlyAhead image functions of the
// root package's pipeline in the background; Render waits for the hand-over
// (r.early) before it returns.
func (r *renderer) prepareEarly() {
	var refs []string
	for pos := 0; pos < earlyAhead; pos++ {
		r.asked[aheadKey{r.root, pos}] = true
		if ref := r.pipelineImage(r.root, pos); ref != "" {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 || !r.canPrepare() {
		return
	}
	r.early = make(chan struct{})
	go func() {
		defer close(r.early)
		for _, ref := range refs {
			r.prepareImage(ref)
		}
	}()
}

// waitEarly waits until the early preparation has handed its requests over:
// before the first function is resolved (its prepared sandbox must be
// registered before its Run looks for it), before a later one is asked for,
// and before Render returns.
func (r *renderer) waitEarly() {
	if r.early != nil {
		<-r.early
	}
}

// prepareAhead asks for the sandbox of the function at position pos of pn's
// pipeline, unless it was asked for before. ref is its image when the
// caller already resolved it ("" otherwise: it is worked out here).
func (r *renderer) prepareAhead(pn *pkgNode, pos int, ref string) {
	k := aheadKey{pn, pos}
	if r.asked == nil || r.asked[k] { // (nil: not a Render)
		return
	}
	r.asked[k] = true
	if ref == "" {
		ref = r.pipelineImage(pn, pos)
	}
	if ref != "" && r.canPrepare() {
		r.waitEarly() // requests in pipeline order: the early one first
		r.prepareImage(ref)
	}
}

// canPrepare: the Runner prepares sandboxes and the Resolver finds cached
// images without pulling.
func (r *renderer) canPrepare() bool {
	if _, ok := r.opts.Runner.(runtime.Preparer); !ok {
		return false
	}
	_, ok := r.opts.Resolver.(CachedResolver)
	return ok
}

// prepareImage prepares the sandbox of image ref if the cache holds it (no
// pull, no output, no error).
func (r *renderer) prepareImage(ref string) {
	p, ok := r.opts.Runner.(runtime.Preparer)
	if !ok {
		return
	}
	cr, ok := r.opts.Resolver.(CachedResolver)
	if !ok {
		return
	}
	if b, ok := cr.ResolveCached(r.prepCtx, ref); ok {
		p.Prepare(r.prepCtx, b, r.invocation(nil))
	}
}

// pipelineImage is the image reference the function at position pos of
// pn's pipeline (mutators, then validators) will run (imageOf), or "" for
// a conditional function.
func (r *renderer) pipelineImage(pn *pkgNode, pos int) string {
	p := pn.pipeline()
	fns := p.Mutators
	if pos >= len(fns) {
		pos -= len(fns)
		fns = p.Validators
	}
	if pos < 0 || pos >= len(fns) {
		return ""
	}
	f := fns[pos]
	if f.Condition != "" {
		return ""
	}
	return r.imageOf(f, true)
}

// imageOf is the image reference function f will run, or "" when it is not
// an image function, is not allowed, or is not known without asking a
// registry (a tag constraint). It never fails: the function's turn reports
// what is wrong with it. latest is resolveImage's: render adds ":latest" to
// an untagged image, eval does not.
func (r *renderer) imageOf(f kptv1.Function, latest bool) string {
	if f.Image == "" || f.Exec != "" {
		return ""
	}
	o := r.opts
	o.Resolver = nil // a tag constraint needs a registry's tag list: an error here, not prepared
	ref, err := resolveImage(context.Background(), f, &o, latest)
	if err != nil {
		return ""
	}
	if r.opts.AllowImage != nil && r.opts.AllowImage(ref) != nil {
		return ""
	}
	return ref
}

// prepareEvalEarly is prepareEarly for fn eval's one function: its sandbox
// is set up in the background while the package is read (prepCtx ends it
// if the run does not take it).
func (r *renderer) prepareEvalEarly(prepCtx context.Context, f kptv1.Function) {
	r.prepCtx = prepCtx
	ref := r.imageOf(f, false)
	if ref == "" || !r.canPrepare() {
		return
	}
	r.early = make(chan struct{})
	go func() {
		defer close(r.early)
		r.prepareImage(ref)
	}()
}
