package pipeline

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/Masterminds/semver/v3"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/imageref"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"github.com/kptr-dev/kptr/runtime"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

var errAllowExec = errors.New("must run with `--allow-exec` option to allow running function binaries")

// fnStep is a prepared function: its name resolved, nothing fetched yet.
type fnStep struct {
	fn    kptv1.Function
	image string // full reference, "" for exec
	exec  string // the exec command line as written
	argv  []string
}

func (s *fnStep) name() string {
	if s.image != "" {
		return s.image
	}
	return s.exec
}

// resolveImage computes the reference render or eval runs for f.
func resolveImage(ctx context.Context, f kptv1.Function, opts *Options, latest bool) (string, error) {
	if f.Tag == "" {
		return imageref.Name(f.Image, opts.ImagePrefix, latest), nil
	}
	repo := imageref.Repository(imageref.Name(f.Image, opts.ImagePrefix, false))
	if _, err := semver.NewVersion(f.Tag); err == nil {
		return repo + ":" + f.Tag, nil
	}
	if _, err := semver.NewConstraint(f.Tag); err == nil {
		cr, ok := opts.Resolver.(ConstraintResolver)
		if !ok {
			return "", fmt.Errorf("function %q: tag constraint %q needs a resolver that lists tags", f.Image, f.Tag)
		}
		ref, err := cr.ResolveConstraint(ctx, repo, f.Tag)
		if err != nil {
			err = fmt.Errorf("function %q: resolving tag %q: %w", f.Image, f.Tag, err)
			if errors.Is(err, cache.ErrNoTagMatch) {
				err = inputErr(err) // the Kptfile asks for a tag that does not exist
			}
			return "", err
		}
		return ref, nil
	}
	if !kptv1.ValidTag(f.Tag) {
		return "", inputErr(fmt.Errorf("function %q: tag %q is neither a semver version, a semver constraint nor a valid tag", f.Image, f.Tag))
	}
	return repo + ":" + f.Tag, nil
}

// prepare resolves names, tags and permissions of fns without fetching
// anything. What the Kptfile (or eval's command line) asks for and cannot be
// had is an InputError; a resolver's trouble keeps its own class.
func prepare(ctx context.Context, fns []kptv1.Function, opts *Options, latest bool) ([]*fnStep, int, error) {
	var steps []*fnStep
	for i, f := range fns {
		st := &fnStep{fn: f}
		if f.Condition != "" {
			return steps, i, inputErr(fmt.Errorf("function %q: `condition` (CEL) is not supported by kptr", shortName(f)))
		}
		switch {
		case f.Exec != "":
			st.exec = f.Exec
			if !opts.AllowExec {
				return steps, i, inputErr(errAllowExec)
			}
			argv, err := splitShell(f.Exec)
			if err != nil || len(argv) == 0 {
				return steps, i, inputErr(fmt.Errorf("exec command %q must be valid: %v", f.Exec, err))
			}
			st.argv = argv
		case f.Image != "":
			img, err := resolveImage(ctx, f, opts, latest)
			if err != nil {
				return steps, i, err
			}
			st.image = img
			if opts.AllowImage != nil {
				if err := opts.AllowImage(img); err != nil {
					return steps, i, err
				}
			}
		default:
			return steps, i, inputErr(fmt.Errorf("must specify `exec` or `image` to execute a function"))
		}
		steps = append(steps, st)
	}
	return steps, -1, nil
}

// fnRun is the record of one function call.
type fnRun struct {
	result  FnResult
	results []*kptv1.Result
}

// runFunction runs st on input as kpt's FunctionRunner does: input must be
// KRM; ids set so comments and field order are copied back; output path
// invariants and KRM-ness enforced; results parsed. keep false says the
// caller discards the output (a validator's): its comments are not copied
// back (see runFilter); results and failures are the same.
func (r *renderer) runFunction(st *fnStep, pn *pkgNode, input []*yaml.RNode, fnConfig *yaml.RNode, showCount, keep bool) ([]*yaml.RNode, *FnResult, error) {
	pr := r.pr
	if r.opts.AllowWasm && (r.opts.KptTranscript || st.wasmExec()) {
		// kpt's transcript under --allow-alpha-wasm names every function
		// so; kptr's names only what runs as wasm before it is resolved (a
		// .wasm exec function), not every container image
		pr.printf("[RUNNING] WASM %q", st.name())
	} else {
		pr.printf("[RUNNING] %q", st.name())
	}
	if showCount {
		pr.printf(" on %d resource(s)", len(input))
	}
	if pn != nil {
		pr.printf(" on package %q", pn.display)
	}
	pr.printf("\n")
	t0 := time.Now()
	r.pulled, r.reused = 0, false
	fr := &FnResult{Image: st.image, ExecPath: st.exec}
	output, err := r.doFunction(st, pn, input, fnConfig, fr, keep)
	// The function's time, as kpt main prints it: truncated to the
	// millisecond and printed with %v ("in 0s", "in 397ms", "in 1.204s"),
	// kpt's time.Since(t0).Truncate(time.Millisecond) in FunctionRunner.Filter
	// (pkg/fn/runtime/runner.go since the render logging change 3aa209b;
	// beta.56 to beta.67 truncated to 100 ms). It leaves out the image pull
	// (printed on its own line when it happens).
	elapsed := (time.Since(t0) - r.pulled).Truncate(time.Millisecond)
	if ierr := r.interrupted(); err != nil && ierr != nil {
		// ended by the interruption, not failed: no [FAIL] block
		return nil, fr, ierr
	}
	if err != nil {
		pr.printf("[FAIL] %q in %v\n", st.name(), elapsed)
		printResults(pr, fr.Results)
		var ee *execError
		if errors.As(err, &ee) {
			// kpt's printFnExecErr: the stderr, then one line (no blank
			// line since 3aa209b)
			printStderr(pr, ee.stderr)
			pr.printf("  Exit code: %d\n", ee.exitCode)
		}
		return nil, fr, err
	}
	if r.reused {
		// memoised (package memo): the function did not run now
		pr.printf("[PASS] %q in %v (cached result)\n", st.name(), elapsed)
	} else {
		pr.printf("[PASS] %q in %v\n", st.name(), elapsed)
	}
	printResults(pr, fr.Results)
	printStderr(pr, fr.Stderr)
	return output, fr, nil
}

// execStartError returns the error kpt's ExecFn.Run gives for an exec
// function whose command could not be started (not found on PATH, missing,
// not executable): not an ExecError but "unexpected function error: <the
// error of exec.Cmd.Run>", so the function fails with exit code 1 and no
// stderr (pkg/fn/runtime/exec.go). The path is the one the Kptfile or
// --exec gave, as kpt's exec.Cmd reports it. It returns nil for any other
// error, and for image functions.
func execStartError(st *fnStep, err error) error {
	if st.image != "" {
		return nil
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return fmt.Errorf("unexpected function error: %w", ee)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		err := fmt.Errorf("unexpected function error: %w", &fs.PathError{Op: pe.Op, Path: st.argv[0], Err: pe.Err})
		if errors.Is(pe.Err, syscall.ENOEXEC) && isWasmModule(pe.Path) {
			// kpt's words, and what the user meant: a wasm exec function
			err = fmt.Errorf("%w (the file is a wasm module: run it with --allow-alpha-wasm)", err)
		}
		return err
	}
	return nil
}

// isWasmModule reports whether the file at path starts with wasm's magic.
func isWasmModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "\x00asm"
}

func (r *renderer) doFunction(st *fnStep, pn *pkgNode, input []*yaml.RNode, fnConfig *yaml.RNode, fr *FnResult, keep bool) ([]*yaml.RNode, error) {
	if err := kptv1.AreKRM(input); err != nil {
		return nil, inputErr(fmt.Errorf("input resource list must contain only KRM resources: %s", err.Error()))
	}
	var stderr []byte
	run := func(in []byte) ([]byte, error) {
		res, err := r.invoke(st, bytes.NewReader(in))
		stderr = res.Stderr
		if err != nil {
			if se := execStartError(st, err); se != nil {
				return nil, se
			}
			stderr = []byte(err.Error() + "\n")
			if st.image != "" {
				stderr = []byte(runtimeFailure(st.image, err))
			}
			return nil, &execError{exitCode: 125, stderr: string(stderr)}
		}
		if st.image != "" && len(stderr) > 0 {
			stderr = []byte(containerStderr(stderr))
		}
		if res.ExitCode != 0 {
			return res.Stdout, &execError{exitCode: res.ExitCode, stderr: string(stderr)}
		}
		return res.Stdout, nil
	}
	output, rlResults, err := runFilter(run, fnConfig, input, r.opts.Limits, keep)
	fr.Stderr = string(stderr)
	// the filter numbers its input in place; the numbers must not outlive
	// the call (a failed call never gets to remove them)
	parallel(len(input), func(i int) {
		_ = clearAnnotations(input[i], kioutil.IdAnnotation, kioutil.LegacyIdAnnotation) //nolint:staticcheck
		_ = clearEmptyAnnotations(input[i])
	})
	var ee *execError
	if le := (*OutputLimitError)(nil); errors.As(err, &le) {
		le.Function = st.name()
	}
	if err != nil && !errors.As(err, &ee) {
		// the function's output could not be parsed
		r.results.ExitCode = 1
		fr.ExitCode = 1
		r.results.Items = append(r.results.Items, *fr)
		return nil, err
	}
	if pn != nil {
		for _, n := range output {
			if pkgPathOf(n) == "" {
				if e := setAnnotation(n, pkgPathAnnotation, pn.dir); e != nil {
					return nil, e
				}
			}
		}
	}
	if perr := enforcePathInvariants(output); perr != nil {
		return nil, perr
	}
	if kerr := kptv1.AreKRM(output); kerr != nil {
		return nil, fmt.Errorf("output resource list must contain only KRM resources: %s", kerr.Error())
	}
	if err := r.held.charge(r.opts.Results, rlResults); err != nil {
		// over the render's budget: failed as a function over its own limit
		err.(*OutputLimitError).Function = st.name()
		r.results.ExitCode = 1
		fr.ExitCode = 1
		r.results.Items = append(r.results.Items, *fr)
		return nil, err
	}
	results, rerr := parseResults(rlResults)
	if rerr != nil {
		return nil, rerr
	}
	fr.Results = results
	if ee != nil {
		fr.ExitCode = ee.exitCode
		fr.Stderr = ee.stderr
		r.results.ExitCode = 1
		r.results.Items = append(r.results.Items, *fr)
		return nil, ee
	}
	fr.ExitCode = 0
	kept := *fr
	if r.opts.FailedResultsOnly {
		kept.Results = nil // printed (runFunction), not kept
	}
	r.results.Items = append(r.results.Items, kept)
	return output, nil
}

// containerStderr is an image function's stderr as kpt records it: read
// back through its container CLI filter (filterDockerCLIOutput in kpt's
// pkg/fn/runtime/container.go), which splits it into lines, drops the
// docker CLI's own pull messages and joins the rest with "\n", so the
// trailing newline (and any "\r" before a newline) goes.
func containerStderr(b []byte) string {
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 0, 64*1024), len(b)+1)
	var lines []string
	for s.Scan() {
		if !dockerCLIOutput(s.Text()) {
			lines = append(lines, s.Text())
		}
	}
	return strings.Join(lines, "\n")
}

// dockerCLIOutput is kpt's isdockerCLIoutput: a line docker prints while
// pulling, which kpt drops from a function's stderr.
func dockerCLIOutput(l string) bool {
	for _, m := range []string{": Already exists", ": Pulling fs layer", ": Verifying Checksum", ": Download complete",
		": Pulling from", ": Waiting", ": Pull complete", "Digest: sha256", "Status: Downloaded newer image",
		"Status: Image is up to date for", "Unable to find image"} {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

// runtimeFailure is the stderr recorded when an image function could not be
// started (exit code 125): an image that is not in the cache under
// --image-pull-policy Never, or that the registry does not have, is
// reported in the words docker and podman use ("No such image", "image not
// known"); other causes as they are.
func runtimeFailure(image string, err error) string {
	cause := cache.Describe(err)
	var ce *cache.Error
	if errors.As(err, &ce) {
		cause = cache.Describe(ce.Err) // without the image name the message already starts with
	}
	var te *transport.Error
	switch {
	case errors.Is(err, cache.ErrNotCached):
		return fmt.Sprintf("Error: No such image: %s: image not known: %s", image, cause)
	case errors.As(err, &te) && (te.StatusCode == 404 || hasDiagnostic(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode)):
		return fmt.Sprintf("Error: No such image: %s: image not known: the registry does not have it: %s", image, cause)
	}
	return cache.Describe(err)
}

func hasDiagnostic(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// invocation is how every function of this render is called, with stdin in.
func (r *renderer) invocation(in io.Reader) runtime.Invocation {
	return runtime.Invocation{
		Stdin:         in,
		Env:           r.opts.Env,
		Network:       r.opts.AllowNetwork,
		Mounts:        r.opts.Mounts,
		AsCurrentUser: r.opts.AsCurrentUser,
		Timeout:       r.opts.Timeout,
		MaxOutput:     r.opts.MaxOutput,
	}
}

// nextImage is the image of the step after steps[i] ("" when there is none
// or it is an exec function).
func nextImage(steps []*fnStep, i int) string {
	if i+1 < len(steps) {
		return steps[i+1].image
	}
	return ""
}

// wasmExec reports whether st is an exec function naming a .wasm file,
// which runs as wasm under --allow-alpha-wasm, as kpt runs it.
func (st *fnStep) wasmExec() bool {
	return st.image == "" && len(st.argv) > 0 && strings.HasSuffix(st.argv[0], ".wasm")
}

// invoke resolves (images only) and runs the function with stdin in.
func (r *renderer) invoke(st *fnStep, in io.Reader) (runtime.Result, error) {
	inv := r.invocation(in)
	if r.opts.AllowWasm && st.wasmExec() {
		// kpt runs an exec function naming a .wasm file as wasm under
		// --allow-alpha-wasm (its arguments are not passed: kpt's wasm
		// runtime takes none)
		if r.opts.WasmRunner == nil {
			return runtime.Result{}, fmt.Errorf("no wasm runner configured for %s", st.exec)
		}
		p, err := filepath.Abs(st.argv[0])
		if err != nil {
			return runtime.Result{}, err
		}
		return r.opts.WasmRunner.Run(r.ctx, bundle.Bundle{Ref: st.exec, Wasm: p}, inv)
	}
	if st.image == "" {
		bin := st.argv[0]
		if !strings.Contains(bin, "/") {
			p, err := exec.LookPath(bin)
			if err != nil {
				return runtime.Result{}, err
			}
			bin = p
		} else if abs, err := filepath.Abs(bin); err == nil {
			bin = abs
		}
		b := bundle.Bundle{Ref: st.exec, Config: v1.Config{Entrypoint: []string{bin}, Cmd: st.argv[1:]}}
		runner := r.opts.ExecRunner
		if runner == nil {
			runner = runtime.Host{}
		}
		return runner.Run(r.ctx, b, inv)
	}
	if r.opts.Resolver == nil || r.opts.Runner == nil {
		return runtime.Result{}, fmt.Errorf("no image resolver or runner configured for %s", st.image)
	}
	r.waitEarly()
	b, err := r.opts.Resolver.Resolve(r.ctx, st.image)
	if err != nil {
		return runtime.Result{}, err
	}
	if b.Wasm != "" && !r.opts.AllowWasm {
		return runtime.Result{}, fmt.Errorf("%s: %w", st.image, cache.ErrWasmNotAllowed)
	}
	if b.Pulled > 0 {
		r.pulled += b.Pulled
	}
	if b.Pulled > 0 && !r.opts.KptTranscript {
		r.pr.printf("  Pulled in %v\n", b.Pulled.Truncate(100*time.Millisecond))
	}
	res, err := r.opts.Runner.Run(r.ctx, b, inv)
	r.reused = res.Reused
	return res, err
}

// enforcePathInvariants rejects output outside the package and duplicate
// (path, index) pairs within a package.
func enforcePathInvariants(nodes []*yaml.RNode) error {
	seen := map[string]map[string]map[string]bool{}
	for _, n := range nodes {
		pkg := pkgPathOf(n)
		if seen[pkg] == nil {
			seen[pkg] = map[string]map[string]bool{}
		}
		p, idx := pathAndIndex(n)
		// kpt's enforcePathInvariants (internal/fnruntime/runner.go)
		// refuses only paths that climb out; an absolute one is mapped
		// inside the package later (adjustRelPath). Characters no file name
		// may hold are refused here, before anything is staged.
		if err := checkPathChars(p); err != nil {
			return fmt.Errorf("function output: resource has invalid %s: %w", kioutil.PathAnnotation, err)
		}
		fp := path.Clean(p)
		if strings.HasPrefix(fp, "../") || fp == ".." {
			return fmt.Errorf("function must not modify resources outside of package: resource has path %s", p)
		}
		if seen[pkg][fp] == nil {
			seen[pkg][fp] = map[string]bool{}
		}
		if seen[pkg][fp][idx] {
			return fmt.Errorf("resource at path %q and index %q already exists", fp, idx)
		}
		seen[pkg][fp][idx] = true
	}
	return nil
}

// newConfigMap is kpt's functionConfig for `configMap:` (and eval's -- k=v).
func newConfigMap(data map[string]string) (*yaml.RNode, error) {
	node := yaml.NewMapRNode(nil)
	if err := node.PipeE(yaml.SetField("apiVersion", yaml.NewScalarRNode("v1"))); err != nil {
		return nil, err
	}
	if err := node.PipeE(yaml.SetField("kind", yaml.NewScalarRNode("ConfigMap"))); err != nil {
		return nil, err
	}
	if err := node.PipeE(yaml.SetK8sName("function-input")); err != nil {
		return nil, err
	}
	if len(data) > 0 {
		if err := node.LoadMapIntoConfigMapData(data); err != nil {
			return nil, err
		}
	}
	return node, nil
}

// splitShell splits a command line shell-style: quotes and backslashes, no expansion.
func splitShell(s string) ([]string, error) {
	var args []string
	var cur bytes.Buffer
	inArg, sq, dq := false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case sq:
			if c == '\'' {
				sq = false
			} else {
				cur.WriteByte(c)
			}
		case dq:
			switch c {
			case '"':
				dq = false
			case '\\':
				if i+1 < len(s) && strings.ContainsRune("\"\\$`", rune(s[i+1])) {
					i++
					cur.WriteByte(s[i])
				} else {
					cur.WriteByte(c)
				}
			default:
				cur.WriteByte(c)
			}
		case c == '\'':
			sq, inArg = true, true
		case c == '"':
			dq, inArg = true, true
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
				inArg = true
			}
		case c == ' ' || c == '\t' || c == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if sq || dq {
		return nil, errors.New("unterminated quote")
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}
