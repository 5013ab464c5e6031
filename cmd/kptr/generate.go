package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/internal/lazyre"
	"github.com/kptr-dev/kptr/pipeline"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// `kptr generate` is the generate command of Argo CD's config-management
// plugin (plugin.yaml). Argo CD runs it with the working directory set to the
// Application's path inside a fresh checkout and reads its stdout as the
// Application's manifests. Its guarantees:
//
//   - the package tree is rendered in memory; the checkout is never written;
//   - stdout carries the manifests and nothing else, written in one piece
//     after everything succeeded: on any failure it stays empty and the exit
//     code is non-zero, because Argo CD treats empty output as "zero
//     resources" and, with auto-sync and prune, would delete the whole app;
//   - a failure is one line on stderr (Argo CD shows it in the UI), with
//     credentials redacted;
//   - local-config resources (the Kptfiles included) are not in the output;
//   - what the render may do is the operator's policy (policy.go).

func (g *globals) generateCmd() *cobra.Command {
	var p policy
	c := g.command(&cobra.Command{
		Use:         "generate [DIR]",
		Annotations: map[string]string{ownSignals: "true"},
		Short:       "Render the package at the current directory for Argo CD (config-management plugin)",
		Long: `The generate command of kptr's Argo CD config-management plugin (plugin.yaml):
render the package tree at DIR (default: the current directory, the
Application's path) in memory, never writing the checkout, and print its
manifests on stdout, local-config resources left out. What the render may do
is the operator's policy (the flags below and their KPTR_* variables in the
sidecar's pod spec); an Application's parameters can only narrow it.

On any failure stdout stays empty and stderr carries one line (credentials
redacted): Argo CD would take empty output as "delete everything". Exit codes:
1 a function failed, 2 a usage error or a policy refusal, 3 the sandbox, a
registry or the cache.`,
		Example: `  # what Argo CD runs, in the Application's path
  kptr generate

  # try a package as the sidecar would render it
  KPTR_ALLOWED_IMAGES='ghcr.io/kptdev/krm-functions-catalog/*' kptr generate apps/web`,
	}, fnScopes, func(ctx context.Context, c *cobra.Command, args []string) error {
		return g.runGenerate(ctx, c, &p, args)
	})
	// Every failure that reaches the command, a bad setting included, is
	// generate's one line.
	run := c.RunE
	c.RunE = func(c *cobra.Command, args []string) error { return generateFailed(g, run(c, args)) }
	policyFlags(c.Flags(), g.getenv, &p)
	return c
}

// runGenerate is generate after its flags were parsed.
func (g *globals) runGenerate(ctx context.Context, c *cobra.Command, p *policy, args []string) error {
	// Argo CD's deadline kill (SIGTERM with SIGKILL) ends generate as it
	// always did, not as a user's interruption
	ctx, stop := withoutInterruption(ctx)
	defer stop()
	if len(args) > 1 {
		return usageError("at most one directory, got %d", len(args))
	}
	// Argo CD shows the whole stderr of a failed generate: keep it to the
	// one error line unless the operator asked for logs.
	if !c.Flags().Changed("log-level") && g.getenv("KPTR_LOG_LEVEL") == "" {
		g.logLevel = "error"
	}
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	if err := p.validate(); err != nil {
		return withCode(exitUsage, err)
	}
	if err := p.applyAppParameters(g.getenv, &g.fnTimeout); err != nil {
		return withCode(exitUsage, err)
	}
	env := g.generateEnv(p)
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	out, err := generateMemoised(ctx, g, env, p, dir)
	if err != nil {
		if p.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Say which limit struck: the cause underneath is only
			// "context deadline exceeded" at whatever step was running.
			err = &exitError{Code: exitCodeOf(err), Err: fmt.Errorf("timed out after %s (the operator's limit, KPTR_TIMEOUT / --timeout): %w", p.Timeout, err)}
		}
		return err
	}
	if _, err := g.stdout.Write(out); err != nil {
		return withCode(exitEnv, fmt.Errorf("writing manifests: %w", err))
	}
	return nil
}

// generate renders dir and returns the manifest stream to print.
func generate(ctx context.Context, g *globals, env *fnenv.Env, p *policy, dir string) ([]byte, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	if abs, err = resolvePkgSymlink(abs, nil); err != nil {
		return nil, withCode(exitUsage, err)
	}
	if _, err := os.Stat(filepath.Join(abs, "Kptfile")); err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("no Kptfile in the application path %s", displayPath(abs)))
	}
	nodes, err := renderForGenerate(ctx, g, env, p, abs)
	if err != nil {
		return nil, err
	}
	nodes, err = finishManifests(nodes, p.AnnotationDomain, appMetadata(g.getenv))
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 && !p.AllowEmpty {
		return nil, fmt.Errorf("the package rendered no resources; refusing to return an empty manifest set, which Argo CD would sync as \"delete everything\" (set KPTR_ALLOW_EMPTY=true to allow it)")
	}
	var buf bytes.Buffer
	if err := pipeline.WriteManifests(&buf, nodes); err != nil {
		return nil, fmt.Errorf("writing manifests: %w", err)
	}
	if int64(buf.Len()) > p.MaxOutputBytes {
		return nil, fmt.Errorf("the manifests are %d bytes, more than the limit of %d (KPTR_MAX_OUTPUT_BYTES; Argo CD accepts at most 100 MiB)", buf.Len(), p.MaxOutputBytes)
	}
	return buf.Bytes(), nil
}

// displayPath shows a path relative to Argo CD's per-request work directory
// when it is inside one, so that messages do not carry random temp names.
func displayPath(abs string) string {
	if i := strings.Index(abs, "/_cmp_server/"); i >= 0 {
		rest := abs[i+len("/_cmp_server/"):]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			return rest[j+1:]
		}
		return "."
	}
	return abs
}

// localConfigAnnotation marks resources that configure tools, not the cluster.
const localConfigAnnotation = "config.kubernetes.io/local-config"

// bookkeepingAnnotations are kyaml's and kpt's per-resource bookkeeping; they
// describe the checkout, not the object, and must not reach the cluster.
var bookkeepingAnnotations = []string{
	kioutil.PathAnnotation, kioutil.IndexAnnotation,
	kioutil.LegacyPathAnnotation, kioutil.LegacyIndexAnnotation,
	kioutil.IdAnnotation, kioutil.LegacyIdAnnotation,
	kioutil.SeqIndentAnnotation, kioutil.InternalAnnotationsMigrationResourceIDAnnotation,
	"internal.config.kubernetes.io/package-path",
}

// appMetadataKeys maps the annotation names generate writes to the Argo CD
// request variables they come from, in output order.
var appMetadataKeys = []struct{ annotation, env string }{
	{"app-name", "ARGOCD_APP_NAME"},
	{"revision", "ARGOCD_APP_REVISION"},
	{"repo-url", "ARGOCD_APP_SOURCE_REPO_URL"},
	{"target-revision", "ARGOCD_APP_SOURCE_TARGET_REVISION"},
	{"source-path", "ARGOCD_APP_SOURCE_PATH"},
}

// appMetadata collects the Application's metadata Argo CD passes in the
// environment, credentials in URLs redacted.
func appMetadata(env func(string) string) [][2]string {
	var md [][2]string
	for _, k := range appMetadataKeys {
		if v := env(k.env); v != "" {
			md = append(md, [2]string{k.annotation, redact(v)})
		}
	}
	return md
}

// finishManifests turns rendered resources into what Argo CD applies: local
// config dropped, bookkeeping annotations removed and, with a domain, the
// app's metadata added.
func finishManifests(nodes []*yaml.RNode, domain string, md [][2]string) ([]*yaml.RNode, error) {
	out := make([]*yaml.RNode, 0, len(nodes))
	for _, n := range nodes {
		if isLocalConfig(n) {
			continue
		}
		if err := clearAnnotations(n, bookkeepingAnnotations...); err != nil {
			return nil, err
		}
		for _, kv := range md {
			if domain == "" {
				break
			}
			// A string node: a revision like "1234" must stay a string.
			if err := n.PipeE(yaml.LookupCreate(yaml.MappingNode, yaml.MetadataField, yaml.AnnotationsField), yaml.SetField(domain+"/"+kv[0], yaml.NewStringRNode(kv[1]))); err != nil {
				return nil, fmt.Errorf("annotating %s: %w", resourceID(n), err)
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// isLocalConfig reports whether n is a Kptfile or marked local-config.
func isLocalConfig(n *yaml.RNode) bool {
	if n.GetKind() == "Kptfile" && strings.HasPrefix(n.GetApiVersion(), "kpt.dev/") {
		return true
	}
	return strings.TrimSpace(n.GetAnnotations()[localConfigAnnotation]) == "true"
}

// clearAnnotations removes keys and, if nothing is left, the empty
// annotations map, so that output matches what a user wrote.
func clearAnnotations(n *yaml.RNode, keys ...string) error {
	for _, k := range keys {
		if err := n.PipeE(yaml.ClearAnnotation(k)); err != nil {
			return fmt.Errorf("cleaning %s: %w", resourceID(n), err)
		}
	}
	meta := n.Field(yaml.MetadataField)
	if meta == nil {
		return nil
	}
	if a := meta.Value.Field(yaml.AnnotationsField); a != nil && len(a.Value.Content()) == 0 {
		_, err := meta.Value.Pipe(yaml.Clear(yaml.AnnotationsField))
		return err
	}
	return nil
}

func resourceID(n *yaml.RNode) string {
	id := n.GetKind() + "/" + n.GetName()
	if ns := n.GetNamespace(); ns != "" {
		id = ns + "/" + id
	}
	return id
}

// generateFailed prints err as the single line Argo CD will show and marks
// it reported. Nothing has been written to stdout at this point.
func generateFailed(g *globals, err error) error {
	if err == nil {
		return nil
	}
	fmt.Fprintf(g.stderr, "kptr generate: %s\n", oneLine(redact(err.Error())))
	return &exitError{Code: exitCodeOf(err), Err: errReported}
}

// oneLine folds a multi-line message (a function's stderr tail) into one line.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	kept := lines[:0]
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, " | ")
}

var (
	urlUserinfo = lazyre.New(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@`)
	bearer      = lazyre.New(`(?i)((?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]+`)
	secretKV    = lazyre.New(`(?i)((?:password|passwd|token|secret|access_token)=)[^&\s]+`)
)

// redact removes credentials a message might carry: user:password@ in URLs,
// Authorization header values and token-like query parameters.
func redact(s string) string {
	s = urlUserinfo().ReplaceAllString(s, "${1}REDACTED@")
	s = bearer().ReplaceAllString(s, "${1}REDACTED")
	return secretKV().ReplaceAllString(s, "${1}REDACTED")
}

// generateEnv is the chain of generate's functions: the operator's policy
// around it, memoised by default (Argo CD regenerates unchanged apps on
// every commit), its pulls background fetches (fetch.go).
func (g *globals) generateEnv(p *policy) *fnenv.Env {
	cfg := g.fnConfig(g.memoOn(true), p.AllowWasm, p.chainPolicy())
	cfg.Background = &fnenv.Background{Start: g.backgroundFetch(p.FetchTimeout), Timeout: p.FetchTimeout}
	return fnenv.New(cfg)
}

// renderForGenerate renders the package tree at dir in memory through env
// (the operator's policy enforced around the cache and the runners). The
// cache and the sandbox are opened only when a function image actually
// runs.
func renderForGenerate(ctx context.Context, g *globals, env *fnenv.Env, p *policy, dir string) ([]*yaml.RNode, error) {
	resultsDir, err := os.MkdirTemp("", "kptr-generate-")
	if err != nil {
		return nil, withCode(exitEnv, err)
	}
	defer os.RemoveAll(resultsDir)
	var transcript io.Writer // kpt's [RUNNING]/[PASS] lines: only when debugging
	if strings.EqualFold(g.logLevel, "debug") {
		transcript = g.stderr
	}
	opts := env.Options()
	// only the failed function's results are reported (failedFunctionDetail)
	opts.FailedResultsOnly = true
	opts.Stderr = transcript
	opts.Output, opts.ResultsDir = pipeline.OutputMemory, resultsDir
	out, err := pipeline.Render(ctx, dir, opts)
	if err != nil {
		msg := err.Error()
		if d := failedFunctionDetail(resultsDir); d != "" {
			// what the function said, shown in Argo CD's UI and logs
			msg += ": " + pipeline.Printable(d)
		}
		msg = strings.ReplaceAll(msg, dir, displayPath(dir))
		code := exitCodeOf(err)
		var refused *fnenv.PolicyError
		if errors.As(err, &refused) {
			code = refused.ExitCode()
		}
		// kpt's refusal names a flag the Application's owner cannot pass;
		// in generate the operator's policy decides.
		if kptExec := "must run with `--allow-exec` option to allow running function binaries"; !p.AllowExec && strings.Contains(msg, kptExec) {
			msg = strings.Replace(msg, kptExec, "exec functions are not allowed by the operator's policy (KPTR_ALLOW_EXEC / --allow-exec)", 1)
			code = exitUsage
		}
		if cause := env.Cause(); cause != nil && failedExitCode(resultsDir) == 125 {
			// The function could not run: the exit code is the cause's
			// (2 policy refusal or bad reference, 3 registry, cache or sandbox).
			code = exitCodeOf(cause)
		}
		if !p.AllowWasm && errors.Is(env.Cause(), cache.ErrWasmNotAllowed) {
			// the flag kpt names is the operator's setting here
			msg = strings.Replace(msg, "--allow-alpha-wasm", "the operator's policy (KPTR_ALLOW_WASM / --allow-alpha-wasm)", 1)
			code = exitUsage // a setting to change, as exec's
		}
		return nil, &exitError{Code: code, Err: errors.New(msg)}
	}
	return out.Resources, nil
}

// failedExitCode is the exit code of the render's failed function in its
// results.yaml (0 when none failed or there are no results).
func failedExitCode(resultsDir string) int {
	b, err := os.ReadFile(filepath.Join(resultsDir, "results.yaml"))
	if err != nil {
		return 0
	}
	var rl pipeline.ResultList
	if err := yaml.Unmarshal(b, &rl); err != nil {
		return 0
	}
	for i := len(rl.Items) - 1; i >= 0; i-- {
		if rl.Items[i].ExitCode != 0 {
			return rl.Items[i].ExitCode
		}
	}
	return 0
}

// failedFunctionDetail returns what the failed function said (its error
// results and the tail of its stderr) from the render's results.yaml: the
// part of a failure the app's owner needs to fix it.
func failedFunctionDetail(resultsDir string) string {
	b, err := os.ReadFile(filepath.Join(resultsDir, "results.yaml"))
	if err != nil {
		return ""
	}
	var rl pipeline.ResultList
	if err := yaml.Unmarshal(b, &rl); err != nil {
		return ""
	}
	for i := len(rl.Items) - 1; i >= 0; i-- {
		it := rl.Items[i]
		if it.ExitCode == 0 {
			continue
		}
		var parts []string
		for _, r := range it.Results {
			if r != nil && r.Severity == kptv1.Error {
				parts = append(parts, strings.TrimSpace(r.Message))
			}
		}
		if t := tail(it.Stderr, 3, 600); t != "" {
			parts = append(parts, t)
		}
		d := fmt.Sprintf("exit code %d", it.ExitCode)
		if len(parts) > 0 {
			d += ": " + strings.Join(parts, "; ")
		}
		return d
	}
	return ""
}

// tail keeps the last n non-empty lines of s, at most max bytes.
func tail(s string, n, max int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t := strings.Join(lines, " | ")
	if len(t) > max {
		t = "..." + t[len(t)-max:]
	}
	return t
}
