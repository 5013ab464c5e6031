package pipeline

import (
	"context"
	"fmt"
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
	// Selector and Exclusion (--match-* and --exclude-*); empty selects all.
	Selector, Exclusion kptv1.Selector
}

// Eval runs fn once over the package tree at dir as `kpt fn eval` does: the
// whole tree is read in one walk (Kptfiles included), the output written
// back (emptied files deleted) or to opts.Output. dir "-" reads a
// ResourceList or YAML stream from stdin and writes a ResourceList to
// opts.Stdout (or plain YAML with OutputUnwrap).
func Eval(ctx context.Context, dir string, fn EvalFunction, opts Options, stdin io.Reader) (*Output, error) {
	r := &renderer{ctx: ctx, opts: opts, pr: &printer{w: opts.Stderr}, results: newResultList(), inputFiles: map[string]bool{}}
	fail := func(err error) (*Output, error) {
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
	var input []*yaml.RNode
	var writer *pkgWriter
	if dir == "-" {
		nodes, err := (&kio.ByteReader{Reader: stdin, PreserveSeqIndent: true, WrapBareSeqNode: true}).Read()
		if err != nil {
			return fail(err)
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
		writer = w
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

	f := kptv1.Function{Image: fn.Image, Exec: fn.Exec}
	if !fn.Selector.IsEmpty() {
		f.Selectors = []kptv1.Selector{fn.Selector}
	}
	if !fn.Exclusion.IsEmpty() {
		f.Exclusions = []kptv1.Selector{fn.Exclusion}
	}
	steps, _, err := prepare(ctx, []kptv1.Function{f}, &r.opts, false)
	if err != nil {
		return fail(err)
	}
	var fnConfig *yaml.RNode
	switch {
	case fn.FnConfig != "":
		b, err := os.ReadFile(fn.FnConfig)
		if err != nil {
			return fail(fmt.Errorf("missing function config %q", fn.FnConfig))
		}
		nodes, err := (&kio.ByteReader{Reader: bytesReader(b), OmitReaderAnnotations: true}).Read()
		if err != nil {
			return fail(fmt.Errorf("invalid function config %q: %w", fn.FnConfig, err))
		}
		if len(nodes) != 1 {
			return fail(fmt.Errorf("function config %q must contain exactly one resource, got %d", fn.FnConfig, len(nodes)))
		}
		fnConfig = nodes[0]
	case len(fn.ConfigMap) > 0:
		if fnConfig, err = newConfigMap(fn.ConfigMap); err != nil {
			return fail(err)
		}
	}
	selective := len(f.Selectors) > 0 || len(f.Exclusions) > 0
	if selective {
		if err := setResourceIDs(input); err != nil {
			return fail(err)
		}
	}
	selected := selectInput(input, f.Selectors, f.Exclusions)
	output, fr, err := r.runFunction(steps[0], nil, selected, fnConfig, selective)
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
	return res, nil
}
