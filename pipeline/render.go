package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kptr-dev/kptr/imageref"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// renderer is the state of one Render.
type renderer struct {
	ctx     context.Context
	opts    Options
	pr      *printer
	root    *pkgNode
	fs      *pkgFS     // the root package's files; every read goes through it
	writer  *pkgWriter // in place: fs, locked from the first read to the commit
	results *ResultList
	held    resultsHeld // what results holds, against opts.Results

	mutationSteps, validationSteps []kptv1.PipelineStepResult
	failedStep                     *kptv1.PipelineStepResult
	executed                       int
	pkgs                           int
	inputFiles                     map[string]bool // root-relative
	latest                         map[*pkgNode][]*yaml.RNode
	pulled                         time.Duration // the current function's image pull
	reused                         bool          // the current function's result was replayed (runtime.Result.Reused)
	// outcome, when not nil, records this render for opts.Memo (replay.go);
	// transcript captures what it prints meanwhile.
	outcome    *Outcome
	transcript *bytes.Buffer

	// preparing sandboxes ahead (ahead.go)
	prepCtx context.Context   // ends when Render returns: unused prepared sandboxes go
	asked   map[aheadKey]bool // pipeline positions whose sandbox was asked for
	early   chan struct{}     // closed once the early preparation has handed over
}

// Render renders the package at dir as `kpt fn render` does and writes the
// result where opts.Output says (in place by default; OutputMemory writes
// nothing at all, not even the Kptfile status). The returned Output holds
// the rendered resources with root-relative path annotations. Errors are
// *Error (exit code 1, Message() as kpt prints it).
func Render(ctx context.Context, dir string, opts Options) (*Output, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, newError(err, "", "")
	}
	abs = filepath.Clean(abs)
	// a package given through a symlink is rendered where it is, as kpt's
	// CLI does after resolving it (kptr's CLI prints kpt's warning)
	if st, err := os.Lstat(abs); err == nil && st.Mode().Type() == os.ModeSymlink {
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, newError(err, "", "")
		}
	}
	if err := checkOutputDir(opts.Output); err != nil {
		return nil, newError(err, "", "")
	}
	r := &renderer{ctx: ctx, opts: opts, pr: &printer{w: opts.Stderr}, results: newResultList(),
		inputFiles: map[string]bool{}, latest: map[*pkgNode][]*yaml.RNode{}}
	if _, err := os.Stat(filepath.Join(abs, kptv1.KptFileName)); err != nil {
		if os.IsNotExist(err) {
			return nil, newError(wrap("fn.render", nil, &noKptfileError{path: abs}), ".", "")
		}
	}
	// in place: lock the package until the result is committed, finishing
	// an interrupted write first; otherwise read without a lock (a memory
	// render never writes, not even a recovery)
	fs, writer, err := openPackage(abs, opts.Output, r.pr)
	if err != nil {
		return nil, newError(err, ".", "")
	}
	fs.setPackageLimits(opts.PkgLimits)
	defer closePackage(fs, writer)
	r.fs, r.writer = fs, writer
	// a whole replay is looked up with the package open (locked, in
	// place): what it keys is what the render would read
	if rec := r.lookup(); rec != nil {
		return r.replay(rec)
	}
	r.root = &pkgNode{fs: fs, dir: abs, rel: ".", display: filepath.Base(abs)}
	if err := r.root.loadKptfile(); err != nil {
		return nil, newError(wrap("fn.render", nil, err), ".", "")
	}
	prepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.prepCtx, r.asked = prepCtx, map[aheadKey]bool{}
	r.fetchAhead()
	r.prepareEarly()
	defer r.waitEarly()
	return r.render()
}

// openPackage opens the package at dir as output needs it: in place, for
// writing (locked, recovered; the writer is also returned); otherwise for
// reading, rolling forward an interrupted write of this user's except in
// memory mode, which never writes.
func openPackage(dir, output string, pr *printer) (*pkgFS, *pkgWriter, error) {
	if output == OutputInPlace {
		w, err := openWriter(dir, pr.w)
		if err != nil {
			return nil, nil, err
		}
		return w.pkgFS, w, nil
	}
	fs, err := openReader(dir, output != OutputMemory, func(s string) { pr.printf("%s\n", s) })
	return fs, nil, err
}

// closePackage closes what openPackage opened, releasing the lock.
func closePackage(fs *pkgFS, w *pkgWriter) {
	if w != nil {
		w.Close()
		return
	}
	fs.Close()
}

func (r *renderer) render() (*Output, error) {
	var out []*yaml.RNode
	var err error
	if r.root.kf.Annotations[kptv1.BFSRenderAnnotation] == "true" {
		out, err = r.hydrateBFS()
	} else {
		out, err = r.hydrate(r.root)
	}
	if ierr := r.interrupted(); ierr != nil {
		// the caller gave up (Ctrl-C): whatever the functions did, the
		// package stays as it was, no status, no partial result
		return nil, ierr
	}
	if err != nil {
		// kpt: partial write and summary line, root Kptfile status, then
		// the results file (and its "For complete results" line)
		r.onFailure(err)
		r.saveResults()
		return nil, newError(err, r.failedPkg(err), r.failedFunction())
	}
	if err := adjustRelPath(r.root, out); err != nil {
		return nil, newError(err, ".", "")
	}
	r.endTranscript()
	res := &Output{Resources: out, Results: r.results, Functions: r.executed, Packages: r.pkgs}
	switch r.opts.Output {
	case OutputMemory:
	case OutputInPlace:
		if err := r.setStatus(out, nil); err != nil {
			return nil, newError(err, ".", "")
		}
		if err := r.writeInPlace(out); err != nil {
			return nil, newError(err, ".", "")
		}
		r.pr.printf("Successfully executed %d function(s) in %d package(s).\n", r.executed, r.pkgs)
	default:
		if err := r.writeOutput(out); err != nil {
			return nil, newError(err, ".", "")
		}
	}
	if err := r.saveResults(); err != nil {
		return res, newError(err, ".", "")
	}
	r.record()
	return res, nil
}

// ErrInterrupted is the cause (context.WithCancelCause) a caller gives a
// render or eval it abandons because the user interrupted it (Ctrl-C,
// SIGTERM): the run then writes nothing into the package (no status, no
// partial result, no results file), prints no failure, and returns an Error
// with Interrupted set. Any other cancellation, and a deadline, fail the run
// as a function failure, as before.
var ErrInterrupted = errors.New("interrupted")

// interrupted returns the run's interruption when its caller cancelled it
// with ErrInterrupted as the cause, else nil.
func (r *renderer) interrupted() error {
	if r.ctx.Err() == nil || !errors.Is(context.Cause(r.ctx), ErrInterrupted) {
		return nil
	}
	return &Error{err: context.Cause(r.ctx), summary: "interrupted", Interrupted: true}
}

// saveResults writes results.yaml to --results-dir, if set.
func (r *renderer) saveResults() error {
	if r.opts.ResultsDir == "" {
		return nil
	}
	b, err := marshalResults(r.results)
	if err != nil {
		return err
	}
	if r.outcome != nil {
		r.outcome.Results = b
	}
	return r.writeResults(b)
}

// writeResults writes b to --results-dir and says so.
func (r *renderer) writeResults(b []byte) error {
	p, err := writeResults(r.opts.ResultsDir, b)
	if err != nil {
		return err
	}
	r.pr.printf("For complete results, see %s\n", p)
	return nil
}

// hydrate renders pn depth-first: subpackages, then pn's own pipeline over
// its own resources followed by every descendant's output.
func (r *renderer) hydrate(pn *pkgNode) ([]*yaml.RNode, error) {
	r.pkgs++
	subs, err := pn.subpackages(r.root)
	if err != nil {
		return nil, wrap("pkg.render", pn, err)
	}
	local, err := pn.localResources()
	if err != nil {
		return nil, wrap("pkg.render", pn, err)
	}
	r.trackInput(pn, local)
	input := append([]*yaml.RNode{}, local...)
	for _, sub := range subs {
		if err := sub.validate(); err != nil {
			return nil, wrap("pkg.render", sub, wrap("pkg.read", sub, err))
		}
		out, err := r.hydrate(sub)
		if err != nil {
			// kpt's hydrate wraps a subpackage's failure in errors.E(op,
			// subpkg, err) at every level: for a direct subpackage this
			// collapses to the subpackage's own error ("pkg.render: pkg
			// ./db:\n\tpipeline.run: ..."), deeper ones nest
			// ("pkg.render: pkg ./a:\n\tpkg ./a/b:\n\tpipeline.run: ...")
			return nil, kptE("pkg.render", sub, err)
		}
		input = append(input, out...)
	}
	out, err := r.runPipeline(pn, input)
	if err != nil {
		return nil, wrap("pkg.render", pn, err)
	}
	r.latest[pn] = out
	return out, nil
}

// hydrateBFS is kpt's hydrateBfsOrder (kpt.dev/bfs-rendering: "true").
// Phase 1 walks the tree breadth-first (children of a package in path
// order): each package's own resources are read and its direct
// subpackages' Kptfiles validated. Phase 2 runs the pipelines in that
// order, parents before children; a package's pipeline sees its own current
// resources followed by its descendants' (pre-order), never its parent's or
// siblings'. After each run the output is handed back by package-path
// annotation: the package itself gets what carries its path or none, any
// other package that has resources in the output has its resources replaced
// by them (one that has none keeps what it had), resources naming no known
// package are dropped. The result is every package's resources in
// breadth-first order.
func (r *renderer) hydrateBFS() ([]*yaml.RNode, error) {
	root := r.root
	var order []*pkgNode
	children := map[*pkgNode][]*pkgNode{}
	current := map[string][]*yaml.RNode{}
	queue := []*pkgNode{r.root}
	for len(queue) > 0 {
		pn := queue[0]
		queue = queue[1:]
		order = append(order, pn)
		// kpt counts every package discovered, whether or not its pipeline ran
		r.pkgs++
		local, err := pn.localResources()
		if err != nil {
			return nil, kptE("pkg.render", root, err)
		}
		r.trackInput(pn, local)
		current[pn.dir] = local
		subs, err := pn.subpackages(r.root)
		if err != nil {
			return nil, kptE("pkg.render", root, err)
		}
		for _, sub := range subs {
			if err := sub.validate(); err != nil {
				return nil, kptE("pkg.render", root, wrap("pkg.read", sub, err))
			}
		}
		children[pn] = subs
		queue = append(queue, subs...)
	}
	var subtree func(pn *pkgNode) []*pkgNode
	subtree = func(pn *pkgNode) []*pkgNode {
		out := []*pkgNode{pn}
		for _, c := range children[pn] {
			out = append(out, subtree(c)...)
		}
		return out
	}
	propagate := func(pn *pkgNode, out []*yaml.RNode) {
		byPkg := map[string][]*yaml.RNode{}
		for _, n := range out {
			d := pkgPathOf(n)
			if d == "" {
				d = pn.dir
			}
			byPkg[d] = append(byPkg[d], n)
		}
		for _, m := range order {
			if g, ok := byPkg[m.dir]; ok {
				current[m.dir] = g
			} else if m == pn {
				current[m.dir] = nil
			}
		}
	}
	aggregate := func() []*yaml.RNode {
		var all []*yaml.RNode
		for _, m := range order {
			all = append(all, current[m.dir]...)
		}
		return all
	}
	for _, pn := range order {
		var input []*yaml.RNode
		for _, m := range subtree(pn) {
			input = append(input, current[m.dir]...)
		}
		out, err := r.runPipeline(pn, input)
		if err != nil {
			// what was rendered so far, for save-on-render-failure: the
			// failing pipeline's resources as its last successful mutator
			// left them (its input when none ran), handed back as above
			partial, ok := r.latest[pn]
			if !ok {
				partial = input
			}
			propagate(pn, partial)
			r.latest = map[*pkgNode][]*yaml.RNode{r.root: aggregate()}
			return nil, kptE("pkg.render", root, err)
		}
		propagate(pn, out)
	}
	return aggregate(), nil
}

// kptE is kpt's errors.E(op, path, err): when err is itself such an error,
// its package and operation are dropped where they repeat the outer ones.
func kptE(op string, pn *pkgNode, err error) error {
	path, dir := pn.ids()
	if inner, ok := err.(*kerr); ok {
		cp := *inner
		if cp.path == path {
			cp.path, cp.dir = "", ""
		}
		if cp.op == op {
			cp.op = ""
		}
		err = &cp
	}
	return &kerr{op: op, path: path, dir: dir, err: err}
}

func (r *renderer) trackInput(pn *pkgNode, nodes []*yaml.RNode) {
	for _, n := range nodes {
		p, _, err := fileAnnotations(n)
		if err == nil {
			r.inputFiles[filepath.Join(pn.rel, filepath.Clean(p))] = true
		}
	}
}

// runPipeline runs pn's mutators then validators on input.
func (r *renderer) runPipeline(pn *pkgNode, input []*yaml.RNode) ([]*yaml.RNode, error) {
	pl := pn.pipeline()
	if pl.IsEmpty() {
		if err := kptv1.AreKRM(input); err != nil {
			return nil, inputErr(fmt.Errorf("input resource list must contain only KRM resources: %s", err.Error()))
		}
		return input, nil
	}
	// kpt main's runPipeline (pkg/lib/kptops/render_executor.go, since
	// the render logging change 3aa209b) names only a package whose
	// pipeline runs, and ends a pipeline that passed with a blank line.
	r.pr.printf("Package %q:\n", pn.display)
	if err := r.validatePipeline(pn, input); err != nil {
		return nil, err
	}
	r.latest[pn] = input
	out, err := r.runMutators(pn, input)
	if err != nil {
		return nil, wrap("pipeline.run", pn, err)
	}
	if err := r.runValidators(pn, out); err != nil {
		return nil, wrap("pipeline.run", pn, err)
	}
	r.pr.printf("\n")
	return out, nil
}

// validatePipeline checks that every configPath names one of pn's own files.
func (r *renderer) validatePipeline(pn *pkgNode, input []*yaml.RNode) error {
	own := map[string]bool{}
	for _, n := range input {
		if pkgPathOf(n) != pn.dir {
			continue
		}
		if p, _, err := fileAnnotations(n); err == nil {
			own[filepath.Clean(p)] = true
		}
	}
	check := func(kind, word string, fns []kptv1.Function) error {
		for i, f := range fns {
			if f.ConfigPath != "" && !own[filepath.Clean(f.ConfigPath)] {
				return &kptv1.ValidateError{
					Field: fmt.Sprintf("pipeline.%s[%d].configPath", kind, i),
					Value: f.ConfigPath,
					Reason: fmt.Sprintf("functionConfig resource for %s %q is missing from path %q, this also occurs if %q is part of a subpackage",
						word, shortName(f), f.ConfigPath, f.ConfigPath),
				}
			}
		}
		return nil
	}
	pl := pn.pipeline()
	if err := check("mutators", "mutator", pl.Mutators); err != nil {
		return err
	}
	return check("validators", "validator", pl.Validators)
}

// shortName is a function's name without registry, path and tag.
func shortName(f kptv1.Function) string {
	if f.Name != "" {
		return f.Name
	}
	if f.Image == "" {
		return f.Exec
	}
	s := imageref.Repository(f.Image)
	return s[strings.LastIndex(s, "/")+1:]
}

// configFor returns the functionConfig of f: the in-memory resource at its
// configPath (with earlier functions' edits), or its configMap.
func configFor(pn *pkgNode, f kptv1.Function, input []*yaml.RNode) (*yaml.RNode, error) {
	switch {
	case f.ConfigPath != "":
		for _, n := range input {
			p, _, err := fileAnnotations(n)
			if err == nil && pkgPathOf(n) == pn.dir && filepath.Clean(p) == filepath.Clean(f.ConfigPath) {
				return n, nil
			}
		}
		return nil, fmt.Errorf("missing function config %q", f.ConfigPath)
	case len(f.ConfigMap) > 0:
		return newConfigMap(f.ConfigMap)
	}
	return nil, nil
}

// recordPrepareFailure records a function that could not be set up (kpt's
// preExecFailureStep): its name, image or exec, the cause and exit code 1.
func (r *renderer) recordPrepareFailure(steps *[]kptv1.PipelineStepResult, fns []kptv1.Function, i int, err error) {
	st := kptv1.PipelineStepResult{ExecutionError: err.Error(), ExitCode: 1}
	if i >= 0 && i < len(fns) {
		st.Name = fns[i].Name
		if fns[i].Exec != "" {
			st.Exec = fns[i].Exec
		} else {
			st.Image = imageref.Name(fns[i].Image, r.opts.ImagePrefix, true)
		}
	}
	*steps = append(*steps, st)
	r.failedStep = &(*steps)[len(*steps)-1]
}

// recordRun records a failed call for eval (which writes no render status).
func (r *renderer) recordRun(steps *[]kptv1.PipelineStepResult, st *fnStep, fr *FnResult, err error) {
	rec := kptv1.PipelineStepResult{Name: st.fn.Name, Image: st.image, Stderr: fr.Stderr, ExitCode: fr.ExitCode}
	if st.image == "" {
		rec.Exec = st.exec
	}
	rec.Results = fr.Results
	var ee *execError
	if err != nil && !errors.As(err, &ee) {
		rec.ExecutionError = err.Error()
		if rec.ExitCode == 0 {
			rec.ExitCode = 1
		}
	}
	*steps = append(*steps, rec)
	if err != nil {
		r.failedStep = &(*steps)[len(*steps)-1]
	}
}

// recordStep records one function call as kpt's captureStepResult does:
// stderr, exit code and results come from the function result the call
// appended to the results list (none when it failed before that, e.g. on an
// output invariant); an error other than the function's own non-zero exit
// (which the transcript already showed) becomes executionError, exit code 1
// unless the function's result says otherwise.
func (r *renderer) recordStep(steps *[]kptv1.PipelineStepResult, st *fnStep, resultsBefore int, err error) {
	rec := kptv1.PipelineStepResult{Name: st.fn.Name, Image: st.image}
	if st.image == "" {
		rec.Exec = st.exec
	}
	if n := len(r.results.Items); n > resultsBefore {
		fr := r.results.Items[n-1]
		rec.Stderr = fr.Stderr
		rec.ExitCode = fr.ExitCode
		// results holds every result, errorResults repeats those of severity error
		rec.Results = fr.Results
		for _, res := range fr.Results {
			if res != nil && res.Severity == "error" {
				rec.ErrorResults = append(rec.ErrorResults, res)
			}
		}
	}
	var ee *execError
	if err != nil {
		if errors.As(err, &ee) {
			rec.ExitCode = ee.exitCode
		} else {
			rec.ExecutionError = err.Error()
			if rec.ExitCode == 0 {
				rec.ExitCode = 1
			}
		}
	}
	*steps = append(*steps, rec)
	if err != nil {
		r.failedStep = &(*steps)[len(*steps)-1]
	}
}

func (r *renderer) runMutators(pn *pkgNode, input []*yaml.RNode) ([]*yaml.RNode, error) {
	fns := pn.pipeline().Mutators
	if len(fns) == 0 {
		return input, nil
	}
	steps, bad, err := prepare(r.ctx, fns, &r.opts, true)
	if err != nil {
		r.recordPrepareFailure(&r.mutationSteps, fns, bad, err)
		return nil, err
	}
	for i, st := range steps {
		f := fns[i]
		fnConfig, err := configFor(pn, f, input)
		if err != nil {
			return nil, err
		}
		// a function's configPath resource is also one of its items, and
		// its edits stay (kpt main's runMutators refreshes the config from
		// the current input and leaves it there: pkg/lib/kptops/
		// render_executor.go; kpt #4673, which excludes it, is not merged)
		selective := len(f.Selectors) > 0 || len(f.Exclusions) > 0
		if selective {
			if err := setResourceIDs(input); err != nil {
				return nil, err
			}
		}
		selected := selectInput(input, f.Selectors, f.Exclusions)
		r.prepareAhead(pn, i+1, nextImage(steps, i))
		before := len(r.results.Items)
		// kpt main runs each mutator in a kio.Pipeline over the selected
		// resources (runMutators in pkg/lib/kptops/render_executor.go),
		// which keeps the legacy path/index annotations and their internal
		// twins in step around the call: a function that edits only
		// config.kubernetes.io/path or index moves or reorders the resource
		migration, err := preprocessMigration(selected)
		if err != nil {
			clearOnMutatorFailure(input)
			r.recordStep(&r.mutationSteps, st, before, err)
			return nil, err
		}
		output, _, err := r.runFunction(st, pn, selected, fnConfig, selective, true)
		if err == nil && len(output) > 0 {
			// kio.Pipeline stops before reconciling an empty result
			err = reconcileMigration(output, migration)
		}
		// The input's own nodes keep the migration id kyaml set on them;
		// kpt leaves it there, and a resource the function dropped that
		// is kept anyway (a top-down render keeps a subpackage's
		// resources its parent's function deleted) would be written with
		// it. kptr removes it: the function saw it all the same.
		for _, n := range selected {
			_ = clearAnnotation(n, migrationIDAnnotation)
			_ = clearEmptyAnnotations(n)
		}
		r.recordStep(&r.mutationSteps, st, before, err)
		if err != nil {
			clearOnMutatorFailure(input)
			var ee *execError
			if errors.As(err, &ee) {
				return nil, errHandled
			}
			return nil, err
		}
		r.executed++
		if selective {
			input = mergeWithInput(output, selected, input)
			if err := deleteResourceIDs(input); err != nil {
				return nil, err
			}
		} else {
			input = output
		}
		r.latest[pn] = input
	}
	return input, nil
}

// clearOnMutatorFailure removes from a failed mutator's input the
// annotations the run put there (kpt's clearAnnotationsOnMutFailure), so
// that a package saved on render failure does not keep them.
func clearOnMutatorFailure(input []*yaml.RNode) {
	for _, n := range input {
		_ = clearAnnotations(n, kioutil.IdAnnotation, kioutil.LegacyIdAnnotation, //nolint:staticcheck
			kioutil.InternalAnnotationsMigrationResourceIDAnnotation, resourceIDAnnotation)
		_ = clearEmptyAnnotations(n)
	}
}

func (r *renderer) runValidators(pn *pkgNode, input []*yaml.RNode) error {
	fns := pn.pipeline().Validators
	if len(fns) == 0 {
		return nil
	}
	steps, bad, err := prepare(r.ctx, fns, &r.opts, true)
	if err != nil {
		r.recordPrepareFailure(&r.validationSteps, fns, bad, err)
		return err
	}
	for i, st := range steps {
		f := fns[i]
		fnConfig, err := configFor(pn, f, input)
		if err != nil {
			return err
		}
		if fnConfig != nil {
			fnConfig = fnConfig.Copy()
		}
		selected := selectInput(input, f.Selectors, f.Exclusions)
		copies := make([]*yaml.RNode, len(selected))
		for j, n := range selected {
			copies[j] = validatorInput(n)
		}
		r.prepareAhead(pn, len(pn.pipeline().Mutators)+i+1, nextImage(steps, i))
		before := len(r.results.Items)
		_, _, err = r.runFunction(st, pn, copies, fnConfig, len(f.Selectors) > 0 || len(f.Exclusions) > 0, false)
		r.recordStep(&r.validationSteps, st, before, err)
		if err != nil {
			var ee *execError
			if errors.As(err, &ee) {
				return errHandled
			}
			return err
		}
		r.executed++
	}
	return nil
}

// validatorInput is what a validator runs on in place of kpt's deep copy
// of rn: a run only changes a resource's top mapping, metadata and
// annotations mappings and its annotations' values (ids set and cleared,
// the package path set, empty annotations dropped: runFilter, doFunction),
// so those are copied and the rest of the tree is shared with rn, which
// the run leaves as it was (a package's validation no longer holds a
// second copy of every resource). A resource whose metadata is not in the
// plain shape gets a deep copy.
func validatorInput(rn *yaml.RNode) *yaml.RNode {
	root, md, ann, mi, ai, ok := metaNodes(rn)
	if !ok || root == nil {
		return rn.Copy()
	}
	shallow := func(n *yaml.Node) *yaml.Node {
		c := *n
		c.Content = slices.Clone(n.Content)
		return &c
	}
	top := shallow(root)
	if md != nil {
		m := shallow(md)
		top.Content[mi+1] = m
		if ann != nil {
			a := shallow(ann)
			m.Content[ai+1] = a
			for i := 1; i < len(a.Content); i += 2 {
				v := *a.Content[i]
				a.Content[i] = &v
			}
		}
	}
	if doc := rn.Document(); doc.Kind == yaml.DocumentNode {
		d := *doc
		d.Content = []*yaml.Node{top}
		return yaml.NewRNode(&d)
	}
	return yaml.NewRNode(top)
}

// adjustRelPath makes every path annotation relative to the root package
// and drops the package-path annotation.
func adjustRelPath(root *pkgNode, nodes []*yaml.RNode) error {
	for _, n := range nodes {
		pkgDir := pkgPathOf(n)
		p, _, err := fileAnnotations(n)
		if err != nil {
			return err
		}
		// kpt's pathRelToRoot (internal/util/render/executor.go):
		// filepath.Join(subpackage relative to root, Clean(path)), which
		// also maps a function's absolute path inside its package
		// ("/x.yaml" in the root package is written to x.yaml)
		if pkgDir != "" {
			rel, err := filepath.Rel(root.dir, pkgDir)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				return fmt.Errorf("subpackage %q is not a descendant of %q", pkgDir, root.dir)
			}
			if np := filepath.Join(rel, filepath.Clean(p)); np != p {
				if err := setAnnotation(n, kioutil.PathAnnotation, np); err != nil {
					return err
				}
				if err := setAnnotation(n, kioutil.LegacyPathAnnotation, np); err != nil { //nolint:staticcheck
					return err
				}
			}
		}
		if err := clearAnnotation(n, pkgPathAnnotation); err != nil {
			return err
		}
	}
	return nil
}

// failedPkg and failedFunction name the failure for Error's summary.
func (r *renderer) failedPkg(err error) string {
	var ke *kerr
	p := "."
	for errors.As(err, &ke) {
		if ke.path != "" {
			p = ke.path
		}
		err = ke.err
	}
	return p
}

func (r *renderer) failedFunction() string {
	if r.failedStep == nil {
		return ""
	}
	if r.failedStep.Image != "" {
		return r.failedStep.Image
	}
	return r.failedStep.Exec
}

// newError builds the *Error for err: summary "render <pkg>: <fn>: <cause>",
// one line, Printable (package paths and function output are untrusted).
func newError(err error, pkg, fn string) *Error {
	e := &Error{Pkg: pkg, Function: fn, err: err}
	cause := cliMessage(err)
	cause = strings.TrimPrefix(cause, "Error: ")
	var ee *execError
	var le *OutputLimitError
	if errors.Is(err, errHandled) {
		cause = "function failed"
	} else if errors.As(err, &ee) {
		cause = ee.Error()
	} else if errors.As(err, &le) {
		cause = le.Error() // the function is named before it
	}
	cause = strings.Join(strings.Fields(cause), " ")
	var b strings.Builder
	b.WriteString("render")
	if pkg != "" {
		b.WriteString(" " + pkg)
	}
	if fn != "" {
		b.WriteString(": " + fn)
	}
	b.WriteString(": " + cause)
	e.summary = Printable(b.String())
	return e
}
