package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/pipeline"
	"github.com/kptr-dev/kptr/runtime"
)

func init() {
	register(&command{name: "fn render", summary: "render a package as `kpt fn render` does", run: runFnRender})
	register(&command{name: "render", summary: "short for `fn render`", run: runFnRender})
	register(&command{name: "fn eval", summary: "run one function over a package as `kpt fn eval` does", run: runFnEval})
}

// lazyEnv opens the cache and the sandbox only when a function image is
// actually run, so exec-only packages and Kptfile errors never need them,
// and a failure to open them is a runtime failure of that function
// (exit code 125 in kpt's terms).
type lazyEnv struct {
	ctx  context.Context
	g    *globals
	once sync.Once
	c    *cache.Cache
	r    runtime.Runner
	err  error
}

func (l *lazyEnv) init() error {
	l.once.Do(func() {
		c, err := l.g.openCache(l.ctx)
		if err != nil {
			l.err = err
			return
		}
		r, err := l.g.newRunner()
		if err != nil {
			l.err = err
			return
		}
		l.c, l.r = c, r
	})
	return l.err
}

func (l *lazyEnv) Resolve(ctx context.Context, ref string) (cache.Bundle, error) {
	if err := l.init(); err != nil {
		return cache.Bundle{}, err
	}
	return l.c.Resolve(ctx, ref)
}

func (l *lazyEnv) ResolveConstraint(ctx context.Context, repo, constraint string) (string, error) {
	if err := l.init(); err != nil {
		return "", err
	}
	var cr any = l.c
	if r, ok := cr.(pipeline.ConstraintResolver); ok {
		return r.ResolveConstraint(ctx, repo, constraint)
	}
	return "", errors.New("the image cache cannot resolve tag constraints")
}

func (l *lazyEnv) Run(ctx context.Context, b cache.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	if err := l.init(); err != nil {
		return runtime.Result{}, err
	}
	return l.r.Run(ctx, b, inv)
}

// kptFailure prints a pipeline error as kpt does ("Error: <msg> ") and
// returns the exit code 1 error main reports silently.
func (g *globals) kptFailure(err error) error {
	var pe *pipeline.Error
	if errors.As(err, &pe) {
		fmt.Fprint(g.stderr, pe.Line())
	} else {
		fmt.Fprintf(g.stderr, "Error: %v \n", err)
	}
	return withCode(exitFunction, errReported)
}

// usage reports a flag error: exit 2 for kptr, exit 1 in kpt's format when
// invoked as kpt.
func (g *globals) usage(err error) error {
	if kptMode && !errors.Is(err, errHelp) {
		fmt.Fprintf(g.stderr, "Error: %v \n", err)
		return withCode(exitFunction, errReported)
	}
	return err
}

// evalUsage reports an invalid eval invocation: exit 2 for kptr; as kpt
// (whose eval checks its flags in PreRunE) "error: <msg>" and exit 1.
func (g *globals) evalUsage(err error) error {
	if kptMode && !errors.Is(err, errHelp) {
		fmt.Fprintf(g.stderr, "error: %v\n", err)
		return withCode(exitFunction, errReported)
	}
	return err
}

func (g *globals) baseOptions(ctx context.Context) pipeline.Options {
	env := &lazyEnv{ctx: ctx, g: g}
	// KPTR_FN_MAX_OUTPUT caps a function's stdout and stderr (bytes).
	maxOut, _ := strconv.ParseInt(g.getenv("KPTR_FN_MAX_OUTPUT"), 10, 64)
	return pipeline.Options{
		Resolver:    env,
		Runner:      env,
		ExecRunner:  runtime.Host{Timeout: g.fnTimeout, MaxOutput: maxOut},
		MaxOutput:   maxOut,
		ImagePrefix: g.imagePrefix,
		Timeout:     g.fnTimeout,
		Stderr:      g.stderr,
		Stdout:      g.stdout,
	}
}

func runFnRender(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("fn render", "[PKG_PATH] [flags]")
	var allowExec, allowNetwork, truncate, allowWasm bool
	var output, resultsDir string
	fs.BoolVar(&allowExec, "allow-exec", envBool(g.getenv("KPTR_ALLOW_EXEC")), "allow exec: functions (host binaries) (KPTR_ALLOW_EXEC)")
	fs.BoolVar(&allowNetwork, "allow-network", envBool(g.getenv("KPTR_ALLOW_NETWORK")), "give image functions the host network (KPTR_ALLOW_NETWORK)")
	fs.StringVarP(&output, "output", "o", "", "stdout (ResourceList), unwrap (plain YAML) or a directory that must not exist; default: in place")
	fs.StringVar(&resultsDir, "results-dir", "", "write results.yaml (a FunctionResultList) into this directory")
	fs.BoolVar(&truncate, "truncate-output", true, "accepted for kpt compatibility (kptr never truncates)")
	fs.BoolVar(&allowWasm, "allow-alpha-wasm", false, "not supported by kptr")
	if err := g.parse(fs, args); err != nil {
		return g.usage(err)
	}
	if allowWasm {
		return g.usage(usageError("--allow-alpha-wasm is not supported by kptr"))
	}
	if fs.NArg() > 1 {
		return g.usage(usageError("expected at most one package path, got %d", fs.NArg()))
	}
	dir := "."
	if fs.NArg() == 1 {
		dir = fs.Arg(0)
	}
	dir, err := kptResolveSymlink(dir, g.stderr)
	if err != nil {
		return g.kptFailure(err)
	}
	if err := prepareResultsDir(resultsDir, output); err != nil {
		return g.kptFailure(err)
	}
	opts := g.baseOptions(ctx)
	opts.AllowExec, opts.AllowNetwork = allowExec, allowNetwork
	opts.Output, opts.ResultsDir = output, resultsDir
	if _, err := pipeline.Render(ctx, dir, opts); err != nil {
		return g.kptFailure(err)
	}
	return nil
}

func runFnEval(ctx context.Context, g *globals, args []string) error {
	fs := g.flagSet("fn eval", "[DIR|-] (--image IMAGE | --exec CMD) [--fn-config FILE] [flags] [-- k=v ...]")
	var fn pipeline.EvalFunction
	var execPath, output, resultsDir string
	var network, asCurrentUser, truncate, allowWasm, save bool
	var fnType string
	var env, mounts []string
	var matchLabels, matchAnns, exclLabels, exclAnns []string
	fs.StringVarP(&fn.Image, "image", "i", "", "function image (a name without '/' gets the image prefix)")
	fs.StringVar(&fn.Exec, "exec", "", "function binary and arguments, run on the host")
	fs.StringVar(&execPath, "exec-path", "", "alias of --exec")
	fs.StringVar(&fn.FnConfig, "fn-config", "", "file holding the functionConfig")
	fs.StringVar(&fn.Selector.APIVersion, "match-api-version", "", "select resources of this apiVersion")
	fs.StringVar(&fn.Selector.Kind, "match-kind", "", "select resources of this kind")
	fs.StringVar(&fn.Selector.Name, "match-name", "", "select resources of this name")
	fs.StringVar(&fn.Selector.Namespace, "match-namespace", "", "select resources of this namespace")
	fs.StringSliceVar(&matchLabels, "match-labels", nil, "select resources with these labels (k=v,...)")
	fs.StringSliceVar(&matchAnns, "match-annotations", nil, "select resources with these annotations (k=v,...)")
	fs.StringVar(&fn.Exclusion.APIVersion, "exclude-api-version", "", "exclude resources of this apiVersion")
	fs.StringVar(&fn.Exclusion.Kind, "exclude-kind", "", "exclude resources of this kind")
	fs.StringVar(&fn.Exclusion.Name, "exclude-name", "", "exclude resources of this name")
	fs.StringVar(&fn.Exclusion.Namespace, "exclude-namespace", "", "exclude resources of this namespace")
	fs.StringSliceVar(&exclLabels, "exclude-labels", nil, "exclude resources with these labels (k=v,...)")
	fs.StringSliceVar(&exclAnns, "exclude-annotations", nil, "exclude resources with these annotations (k=v,...)")
	fs.StringVarP(&output, "output", "o", "", "stdout, unwrap or a directory that must not exist; default: in place")
	fs.StringVar(&resultsDir, "results-dir", "", "write results.yaml into this directory")
	fs.BoolVar(&network, "network", false, "give the function the host network")
	fs.BoolVar(&network, "allow-network", false, "alias of --network")
	fs.Bool("allow-exec", true, "accepted for symmetry with render: --exec needs no further permission")
	fs.StringArrayVar(&mounts, "mount", nil, "type=bind,src=HOST,dst=CONTAINER[,rw=true], repeatable")
	fs.StringArrayVarP(&env, "env", "e", nil, "KEY=VALUE or KEY (from the environment) for the function, repeatable")
	fs.BoolVar(&asCurrentUser, "as-current-user", false, "run the function as the current uid/gid instead of nobody")
	fs.BoolVar(&truncate, "truncate-output", true, "accepted for kpt compatibility")
	fs.BoolVarP(&save, "save", "s", false, "add the function and its arguments to the Kptfile's pipeline after a successful run (needs --type)")
	fs.StringVarP(&fnType, "type", "t", "", "mutator or validator: the Kptfile pipeline list --save adds the function to")
	fs.StringVar(&fn.Tag, "tag", "", "replace the --image tag: a semver constraint picks the highest matching tag, anything else is used literally")
	fs.BoolVar(&allowWasm, "allow-alpha-wasm", false, "not supported by kptr")
	if err := g.parse(fs, args); err != nil {
		return g.usage(err)
	}
	if allowWasm {
		return g.usage(usageError("--allow-alpha-wasm is not supported by kptr"))
	}
	if err := pipeline.CheckSave(save, fnType); err != nil {
		return g.evalUsage(usageError("%v", err))
	}
	if save {
		fn.SaveAs = fnType
	}
	if execPath != "" && fn.Exec == "" {
		fn.Exec = execPath
	}
	pos := fs.Args()
	var kv []string
	if d := fs.ArgsLenAtDash(); d >= 0 {
		pos, kv = pos[:d], pos[d:]
	}
	if len(pos) > 1 {
		return g.usage(usageError("expected at most one package path, got %d", len(pos)))
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	if fn.Image == "" && fn.Exec == "" {
		return g.evalUsage(usageError("must specify --image or --exec"))
	}
	if fn.Image != "" && fn.Exec != "" {
		return g.evalUsage(usageError("must specify exactly one of --image and --exec"))
	}
	if err := prepareResultsDir(resultsDir, output); err != nil {
		return g.kptFailure(err)
	}
	if len(kv) > 0 {
		if fn.FnConfig != "" {
			return g.evalUsage(usageError("function arguments can only be specified without function config file"))
		}
		fn.ConfigMap = map[string]string{}
		for i, a := range kv {
			k, v, ok := strings.Cut(a, "=")
			if !ok && i == 0 {
				// kpt: the first argument may be the functionConfig's kind
				fn.ConfigKind = a
				continue
			}
			if !ok {
				return g.evalUsage(usageError("args must have keys and values separated by ="))
			}
			fn.ConfigMap[k] = v
		}
	}
	var err error
	if fn.Selector.Labels, err = kvMap(matchLabels); err != nil {
		return g.usage(err)
	}
	if fn.Selector.Annotations, err = kvMap(matchAnns); err != nil {
		return g.usage(err)
	}
	if fn.Exclusion.Labels, err = kvMap(exclLabels); err != nil {
		return g.usage(err)
	}
	if fn.Exclusion.Annotations, err = kvMap(exclAnns); err != nil {
		return g.usage(err)
	}
	if dir != "-" {
		// kpt's eval resolves the package path as render does, with its warning
		if fn.FnConfig != "" {
			if _, err := os.Stat(fn.FnConfig); os.IsNotExist(err) {
				return g.evalUsage(usageError("missing function config file: %s", fn.FnConfig))
			}
		}
		if dir, err = kptResolveSymlink(dir, g.stderr); err != nil {
			return g.evalUsage(err)
		}
	}
	if save {
		if err := pipeline.CheckSaveFnConfig(dir, fn.FnConfig); err != nil {
			return g.evalUsage(usageError("%v", err))
		}
	}
	opts := g.baseOptions(ctx)
	opts.AllowNetwork = network
	opts.AsCurrentUser = asCurrentUser
	opts.Output, opts.ResultsDir = output, resultsDir
	for _, e := range env {
		if !strings.Contains(e, "=") {
			e = e + "=" + g.getenv(e)
		}
		opts.Env = append(opts.Env, e)
	}
	for _, m := range mounts {
		mt, err := parseMount(m)
		if err != nil {
			return g.usage(err)
		}
		opts.Mounts = append(opts.Mounts, mt)
	}
	if _, err := pipeline.Eval(ctx, dir, fn, opts, g.stdin); err != nil {
		return g.kptFailure(err)
	}
	return nil
}

func kvMap(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, usageError("%q must be KEY=VALUE", p)
		}
		m[k] = v
	}
	return m, nil
}

// parseMount parses docker's --mount syntax (type=bind only).
func parseMount(s string) (pipeline.Mount, error) {
	m := pipeline.Mount{ReadOnly: true}
	for _, f := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(f, "=")
		switch strings.ToLower(k) {
		case "type":
			if v != "bind" {
				return m, usageError("--mount %q: only type=bind is supported", s)
			}
		case "src", "source":
			m.Source = v
		case "dst", "destination", "target":
			m.Target = v
		case "rw":
			m.ReadOnly = v != "true"
		case "readonly", "ro":
			m.ReadOnly = v != "false"
		default:
			return m, usageError("--mount %q: unknown field %q", s, k)
		}
	}
	if m.Source == "" || m.Target == "" {
		return m, usageError("--mount %q: src and dst are required", s)
	}
	return m, nil
}
