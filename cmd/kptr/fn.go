package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/pipeline"
	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
)

// fnFailure reports a failed fn command as kpt does (its "Error: <msg> "
// line, nothing when the transcript already showed the failure) and picks
// the exit code. Invoked as kpt it is 1, as kpt's. As kptr it is the
// README's class: 3 when a function could not run because of the sandbox, a
// registry or the cache (what kpt reports as the function's exit code 125:
// the cause env recorded decides), 2 when the package itself is unusable (no
// Kptfile, an unreadable or invalid one), 1 when a function or validator
// failed. env may be nil (fn source, fn sink); dir is the package ("" when
// there is none, as for eval reading stdin).
func (g *globals) fnFailure(err error, dir string, env *fnenv.Env) error {
	g.printKptError(err)
	code := exitCodeOf(err)
	var ke *kptv1.KptfileError
	var ve *kptv1.ValidateError
	switch {
	case g.kpt:
		code = exitFunction
	case env != nil && env.Cause() != nil:
		code = exitCodeOf(env.Cause())
	case errors.As(err, &ke), errors.As(err, &ve), dir != "" && !hasKptfile(dir):
		code = exitUsage
	}
	return withCode(code, errReported)
}

// printKptError prints err as kpt's CLI does: "Error: <msg> " ("error: <msg>"
// for eval), nothing when the transcript already showed the failure.
func (g *globals) printKptError(err error) {
	var pe *pipeline.Error
	if errors.As(err, &pe) && pe.Interrupted {
		return // run says "interrupted"
	}
	if !errors.As(err, &pe) {
		fmt.Fprintf(g.stderr, "Error: %v \n", err)
	} else {
		fmt.Fprint(g.stderr, pe.Line()) // eval's failures as kpt's eval prints them
	}
}

// hasKptfile reports whether dir holds a Kptfile (for the exit code only: the
// pipeline reports the error itself, in kpt's words).
func hasKptfile(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, kptv1.KptFileName))
	return err == nil
}

// packageDir resolves the package argument of fn render and fn eval as kpt
// does (a symlink is followed, with kpt's warning) and refuses, as an input
// error, a path that does not exist or is not a directory: a file given as
// the package used to fail deep in the write as ".kptr-tx/journal: not a
// directory".
func (g *globals) packageDir(cmd, dir string) (string, error) {
	rp, err := kptResolveSymlink(dir, g.stderr)
	if err != nil {
		return "", g.inputFailure(g.packageError(cmd, dir, err))
	}
	st, err := os.Stat(rp)
	if err != nil {
		return "", g.inputFailure(g.packageError(cmd, dir, err))
	}
	if !st.IsDir() {
		return "", g.inputFailure(fmt.Errorf("%s is a file: %s takes a package directory (the one holding the Kptfile)", dir, cmd))
	}
	return rp, nil
}

// packageError words a package path that cannot be read: kpt's own text
// ("lstat nosuch: no such file or directory") when invoked as kpt, the
// package and what to do otherwise.
func (g *globals) packageError(cmd, dir string, err error) error {
	var pe *fs.PathError
	if g.kpt || !errors.As(err, &pe) {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) && filepath.Clean(pe.Path) == filepath.Clean(dir) {
		return fmt.Errorf("package %s: no such directory (%s takes a package directory)", dir, cmd)
	}
	return pathWords("package", dir, err)
}

// pathWords names what a path is (a package, a source) in a file system
// error, instead of the bare "lstat x: no such file or directory".
func pathWords(what, path string, err error) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	if filepath.Clean(pe.Path) == filepath.Clean(path) {
		return fmt.Errorf("%s %s: %w", what, path, pe.Err)
	}
	return fmt.Errorf("%s %s: %s: %w", what, path, pe.Path, pe.Err)
}

// inputFailure reports an unusable input in kpt's format: exit 2 for kptr,
// 1 when invoked as kpt.
func (g *globals) inputFailure(err error) error {
	g.printKptError(err)
	if g.kpt {
		return withCode(exitFunction, errReported)
	}
	return withCode(exitUsage, errReported)
}

// evalUsage reports an invalid eval invocation: exit 2 for kptr; as kpt
// (whose eval checks its flags in PreRunE) "error: <msg>" and exit 1.
func (g *globals) evalUsage(err error) error {
	if g.kpt {
		fmt.Fprintf(g.stderr, "error: %v\n", err)
		return withCode(exitFunction, errReported)
	}
	return err
}

// baseOptions are the pipeline options every fn command shares; env, the
// chain its functions go through, opens the cache and the sandbox when a
// function image first runs, and pulls a render's images ahead.
func (g *globals) baseOptions(allowWasm bool) (pipeline.Options, *fnenv.Env) {
	// memoisation is opt-in for fn render and fn eval: kpt users expect
	// every function to run (README, Memoised function results)
	cfg := g.fnConfig(g.memoOn(false), allowWasm, nil)
	cfg.FetchAhead = true
	env := fnenv.New(cfg)
	opts := env.Options()
	opts.Stderr, opts.Stdout = g.stderr, g.stdout
	// as kpt, kpt's transcript line for line (no pull-time line)
	opts.KptTranscript = g.kpt
	return opts, env
}

// fnScopes are the shared settings of the commands that run functions.
const fnScopes = scopeCache | scopePull | scopeNames | scopeRun | scopeLog

// renderCmd is fn render, also installed at the top level as kptr render.
func (g *globals) renderCmd(name, short string) *cobra.Command {
	var allowExec, allowNetwork, truncate, allowWasm bool
	var output, resultsDir string
	c := g.command(&cobra.Command{
		Use:   name + " [PKG_PATH]",
		Short: short,
		Long: `Render the package at PKG_PATH (default: the current directory) as kpt fn render
does: its subpackages first, then its own Kptfile pipeline (mutators, then
validators), each function the exact image the Kptfile names, pulled into
kptr's cache and run in its sandbox. The package is rewritten in place
atomically (all files or none) unless -o names another destination. Results
go to --results-dir as a FunctionResultList.

Exit codes: 0 rendered; 1 a function or validator failed; 2 a usage or input
error (no such directory, a file instead of a package, no Kptfile, an invalid
Kptfile, a package file that does not parse, a resource that is not KRM, an
exec function without --allow-exec, a tag no tag of the registry matches, an
-o DIR that exists); 3 a function could not run because of the sandbox, a
registry or the cache (kpt reports these as the function's exit code 125);
130 / 143 interrupted (Ctrl-C, SIGTERM): nothing written into the package.`,
		Example: `  # render the package in the current directory in place
  kptr fn render

  # write the rendered resources to stdout as plain YAML
  kptr fn render my-package -o unwrap

  # offline, from a cache filled beforehand (kptr prewarm, kptr cache import)
  kptr fn render my-package --offline --cache-dir /var/cache/kptr

  # results for CI
  kptr fn render my-package --results-dir results`,
	}, fnScopes, func(ctx context.Context, c *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageError("expected at most one package path, got %d", len(args))
		}
		dir := "."
		if len(args) == 1 {
			dir = args[0]
		}
		dir, err := g.packageDir("fn render", dir)
		if err != nil {
			return err
		}
		if err := prepareResultsDir(resultsDir, output); err != nil {
			return g.inputFailure(err)
		}
		opts, env := g.baseOptions(allowWasm)
		opts.AllowExec, opts.AllowNetwork = allowExec, allowNetwork
		opts.Output, opts.ResultsDir = output, resultsDir
		opts.Memo = g.renderMemo(ctx, env, allowExec, allowNetwork, output, resultsDir, truncate)
		if _, err := pipeline.Render(ctx, dir, opts); err != nil {
			return g.fnFailure(err, dir, env)
		}
		return nil
	})
	fs := c.Flags()
	fs.BoolVar(&allowExec, "allow-exec", envBool(g.getenv("KPTR_ALLOW_EXEC")), "allow exec: functions (host binaries) (KPTR_ALLOW_EXEC)")
	fs.BoolVar(&allowNetwork, "allow-network", envBool(g.getenv("KPTR_ALLOW_NETWORK")), "give image functions the host network (KPTR_ALLOW_NETWORK)")
	fs.StringVarP(&output, "output", "o", "", "stdout (ResourceList), unwrap (plain YAML) or a directory that must not exist; default: in place")
	fs.StringVar(&resultsDir, "results-dir", "", "write results.yaml (a FunctionResultList) into this directory")
	fs.BoolVar(&truncate, "truncate-output", true, "accepted for kpt compatibility (kptr never truncates)")
	fs.BoolVar(&allowWasm, "allow-alpha-wasm", envBool(g.getenv("KPTR_ALLOW_WASM")), "run wasm function images (js/wasm, wasip1/wasm) in-process, beside container images (KPTR_ALLOW_WASM)")
	return c
}

func (g *globals) evalCmd() *cobra.Command {
	var fn pipeline.EvalFunction
	var execPath, output, resultsDir string
	var network, asCurrentUser, truncate, allowWasm, save bool
	var fnType string
	var env, mounts []string
	var matchLabels, matchAnns, exclLabels, exclAnns []string
	c := g.command(&cobra.Command{
		Use:   "eval [DIR|-] (--image IMAGE | --exec CMD) [flags] [-- KEY=VALUE...]",
		Short: "Run one function over a package, as kpt fn eval does",
		Long: `Run one function, an image (-i) or a host binary (--exec), over the resources of
DIR (default: the current directory; '-' reads a ResourceList or a YAML
stream from stdin and writes to stdout), as kpt fn eval does. Arguments after
'--' become the function's ConfigMap; --fn-config names a file instead.
Selectors (--match-*) and exclusions (--exclude-*) choose the resources the
function sees; the others are kept as they are.

Exit codes: 0 ok; 1 the function failed; 2 a usage or input error; 3 the
function could not run because of the sandbox, a registry or the cache.`,
		Example: `  # set a label on every resource of my-package, in place
  kptr fn eval my-package -i set-labels:v0.2.0 -- app=web

  # only Deployments, with a host binary
  kptr fn eval my-package --exec ./my-fn --match-kind Deployment

  # in a pipe
  kptr fn source my-package | kptr fn eval - -i set-namespace:v0.4.1 -- namespace=prod`,
	}, fnScopes, func(ctx context.Context, c *cobra.Command, args []string) error {
		if err := pipeline.CheckSave(save, fnType); err != nil {
			return g.evalUsage(usageError("%v", err))
		}
		if save {
			fn.SaveAs = fnType
		}
		if execPath != "" && fn.Exec == "" {
			fn.Exec = execPath
		}
		pos := args
		var kv []string
		if d := c.ArgsLenAtDash(); d >= 0 {
			pos, kv = args[:d], args[d:]
		}
		if len(pos) > 1 {
			return usageError("expected at most one package path, got %d", len(pos))
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
			return g.inputFailure(err)
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
			return err
		}
		if fn.Selector.Annotations, err = kvMap(matchAnns); err != nil {
			return err
		}
		if fn.Exclusion.Labels, err = kvMap(exclLabels); err != nil {
			return err
		}
		if fn.Exclusion.Annotations, err = kvMap(exclAnns); err != nil {
			return err
		}
		opts, lazy := g.baseOptions(allowWasm)
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
				return err
			}
			opts.Mounts = append(opts.Mounts, mt)
		}
		if dir != "-" {
			if fn.FnConfig != "" {
				if _, err := os.Stat(fn.FnConfig); os.IsNotExist(err) {
					return g.evalUsage(usageError("missing function config file: %s", fn.FnConfig))
				}
			}
			// kpt's eval resolves the package path as render does, with its warning
			if dir, err = g.packageDir("fn eval", dir); err != nil {
				return err
			}
		}
		if save {
			if err := pipeline.CheckSaveFnConfig(dir, fn.FnConfig); err != nil {
				return g.evalUsage(usageError("%v", err))
			}
		}
		if _, err := pipeline.Eval(ctx, dir, fn, opts, g.stdin); err != nil {
			// eval needs no Kptfile: only a recorded cause changes the class
			return g.fnFailure(err, "", lazy)
		}
		return nil
	})
	fs := c.Flags()
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
	fs.BoolVar(&allowWasm, "allow-alpha-wasm", envBool(g.getenv("KPTR_ALLOW_WASM")), "run wasm function images (js/wasm, wasip1/wasm) in-process, beside container images (KPTR_ALLOW_WASM)")
	return c
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
