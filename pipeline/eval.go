package pipeline

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// EvalFunction is the one function `kpt fn eval` runs.
type EvalFunction struct {
	// Image (bare names get the prefix; no ":latest" is added) or Exec
	// (a shell-style command line, run on the host).
	Image, Exec string
	// FnConfig is a file holding the functionConfig; ConfigMap (the
	// `-- k=v` arguments) becomes a ConfigMap named function-input.
	FnConfig  string
	ConfigMap map[string]string
	// ConfigKind is the kind of the ConfigMap-style functionConfig (kpt
	// takes a first `--` argument without '=' as the kind); "" is ConfigMap.
	ConfigKind string
	// Selector and Exclusion (--match-* and --exclude-*); empty selects all.
	Selector, Exclusion kptv1.Selector
	// Tag (--tag) replaces the image's tag: a semver constraint picks the
	// highest matching tag, anything else is used literally, as a Kptfile
	// function's `tag:` is.
	Tag string
	// SaveAs (--save --type) is SaveAsMutator or SaveAsValidator to add the
	// function to the package's Kptfile after a successful run; "" saves
	// nothing.
	SaveAs string
}

// Eval runs fn once over the package tree at dir as `kpt fn eval` does: the
// whole tree is read in one walk (Kptfiles included), the output written
// back (emptied files deleted) or to opts.Output. dir "-" reads a
// ResourceList or YAML stream from stdin and writes a ResourceList to
// opts.Stdout (or plain YAML with OutputUnwrap).
func Eval(ctx context.Context, dir string, fn EvalFunction, opts Options, stdin io.Reader) (_ *Output, err error) {
	defer func() {
		// kpt prints eval's errors as "error: <cause>"
		var e *Error
		if errors.As(err, &e) {
			e.eval = true
		}
	}()
	r := &renderer{ctx: ctx, opts: opts, pr: &printer{w: opts.Stderr}, results: newResultList(), inputFiles: map[string]bool{}}
	fail := func(err error) (*Output, error) {
		if ierr := r.interrupted(); ierr != nil {
			return nil, ierr
		}
		_ = r.saveResults()
		e := newError(err, dir, r.failedFunction())
		e.summary = "eval" + strings.TrimPrefix(e.summary, "render")
		return nil, e
	}
	if fn.Exec != "" {
		r.opts.AllowExec = true
	}
	if err := checkOutputDir(opts.Output); err != nil {
		return nil, newError(err, dir, "")
	}
	f := kptv1.Function{Image: fn.Image, Exec: fn.Exec}
	if fn.Image != "" {
		f.Tag = fn.Tag
	}
	if !fn.Selector.IsEmpty() {
		f.Selectors = []kptv1.Selector{fn.Selector}
	}
	if !fn.Exclusion.IsEmpty() {
		f.Exclusions = []kptv1.Selector{fn.Exclusion}
	}
	// the function's sandbox is set up while the package is read (as
	// Render's first); one it does not take goes when Eval returns
	prepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.prepareEvalEarly(prepCtx, f)
	defer r.waitEarly()
	var input, excluded []*yaml.RNode
	var writer *pkgWriter
	var root string
	if dir == "-" {
		nodes, err := (&kio.ByteReader{Reader: stdin, PreserveSeqIndent: true, WrapBareSeqNode: true}).Read()
		if err != nil {
			return fail(inputErr(err))
		}
		input = nodes
		if r.opts.Output == OutputInPlace {
			r.opts.Output = OutputStdout
		}
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fail(err)
		}
		if _, err := os.Stat(abs); err != nil {
			return fail(err)
		}
		// in place: locked from this read until the commit (see Render)
		fs, w, err := openPackage(abs, opts.Output, r.pr)
		if err != nil {
			return fail(err)
		}
		defer closePackage(fs, w)
		fs.setPackageLimits(opts.PkgLimits)
		writer, root = w, abs
		nodes, err := readTree(fs)
		if err != nil {
			return fail(err)
		}
		for _, n := range nodes {
			if p, _, err := fileAnnotations(n); err == nil {
				r.inputFiles[filepath.Clean(p)] = true
			}
		}
		input = nodes
	}

	steps, _, err := prepare(ctx, []kptv1.Function{f}, &r.opts, false)
	if err != nil {
		return fail(err)
	}
	var fnConfig *yaml.RNode
	switch {
	case fn.FnConfig != "":
		// kpt reads the file by its absolute path and names it so in errors
		abs, err := filepath.Abs(fn.FnConfig)
		if err != nil {
			return fail(err)
		}
		if fnConfig, err = kptv1.ReadFunctionConfigFile(abs); err != nil {
			return fail(err)
		}
		// the config file is the function's functionConfig, not one of its
		// items (kpt 9044f12); it is written back unchanged
		if root != "" {
			input, excluded = excludeFile(input, root, abs)
		}
	case len(fn.ConfigMap) > 0 || fn.ConfigKind != "":
		if fnConfig, err = newConfigMap(fn.ConfigMap); err != nil {
			return fail(err)
		}
		if fn.ConfigKind != "" {
			if err := fnConfig.PipeE(yaml.SetField("kind", yaml.NewScalarRNode(fn.ConfigKind))); err != nil {
				return fail(err)
			}
		}
	}
	// kyaml's kio.Pipeline, which kpt's eval runs the function in, keeps the
	// legacy path/index annotations and their internal twins in step: a
	// function that edits either one moves the resource
	migration, err := preprocessMigration(input)
	if err != nil {
		return fail(err)
	}
	selective := len(f.Selectors) > 0 || len(f.Exclusions) > 0
	if selective {
		if err := setResourceIDs(input); err != nil {
			return fail(err)
		}
	}
	selected := selectInput(input, f.Selectors, f.Exclusions)
	r.waitEarly() // the prepared sandbox is registered before the run looks for it
	output, fr, err := r.runFunction(steps[0], nil, selected, fnConfig, selective, true)
	if err != nil {
		r.recordRun(&r.mutationSteps, steps[0], fr, err)
		if _, ok := err.(*execError); ok {
			return fail(errHandled)
		}
		return fail(err)
	}
	r.executed = 1
	if selective {
		output = mergeWithInput(output, selected, input)
		if err := deleteResourceIDs(output); err != nil {
			return fail(err)
		}
	}
	if err := reconcileMigration(output, migration); err != nil {
		return fail(err)
	}
	output = append(output, excluded...)
	if ierr := r.interrupted(); ierr != nil {
		return nil, ierr
	}
	res := &Output{Resources: output, Results: r.results, Functions: 1}
	switch r.opts.Output {
	case OutputMemory:
	case OutputInPlace:
		files, err := encodeFiles(output)
		if err != nil {
			return fail(err)
		}
		var deletes []string
		for p := range r.inputFiles {
			if _, ok := files[p]; !ok {
				deletes = append(deletes, p)
			}
		}
		if err := writer.commit(files, deletes); err != nil {
			return fail(err)
		}
	default:
		if err := writeOutput(r.opts.Output, r.opts.Stdout, output); err != nil {
			return fail(err)
		}
	}
	if err := r.saveResults(); err != nil {
		return res, newError(err, dir, "")
	}
	if fn.SaveAs != "" {
		if dir == "-" {
			dir = "."
		}
		if err := r.saveFunction(dir, fn, writer); err != nil {
			return res, newError(err, dir, "")
		}
	}
	return res, nil
}

// excludeFile removes from input the resources read from the file at abs
// (root-relative path annotations) and returns them separately.
func excludeFile(input []*yaml.RNode, root, abs string) (kept, removed []*yaml.RNode) {
	for _, n := range input {
		if p, _, err := fileAnnotations(n); err == nil && p != "" && filepath.Join(root, p) == abs {
			removed = append(removed, n)
			continue
		}
		kept = append(kept, n)
	}
	return kept, removed
}
