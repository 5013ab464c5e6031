package pipeline

import (
	"context"
	"io"
	"time"

	"github.com/kptr-dev/kptr/runtime"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Output destinations for Options.Output. Any other non-empty value is a
// directory that must not exist yet (kpt's -o DIR).
const (
	// OutputInPlace rewrites the package (the default).
	OutputInPlace = ""
	// OutputStdout writes one ResourceList keeping path and index annotations.
	OutputStdout = "stdout"
	// OutputUnwrap writes a plain multi-document YAML stream.
	OutputUnwrap = "unwrap"
	// OutputMemory writes nothing and returns the resources in Result.Resources.
	OutputMemory = "memory"
)

// Options configure Render and Eval.
type Options struct {
	// Resolver turns an image reference (prefix and tag rules applied, e.g.
	// "ghcr.io/kptdev/krm-functions-catalog/set-labels:latest") into a bundle.
	// If it also implements ConstraintResolver, Kptfile `tag:` semver
	// constraints are resolved through it.
	Resolver Resolver
	// Runner runs image bundles (the sandbox).
	Runner Runner
	// ExecRunner runs `exec:` functions: bundles with an empty Rootfs whose
	// Config.Entrypoint is the resolved host binary and its arguments. Nil
	// means runtime.Host{} (kpt runs exec functions on the host with the
	// whole environment too).
	ExecRunner Runner
	// ImagePrefix is prepended to names without '/' as kpt does it
	// (imageref.ApplyPrefix: its trailing '/'s do not matter); empty means
	// imageref.DefaultPrefix, imageref.NoPrefix no prefix at all.
	ImagePrefix string
	// AllowExec permits `exec:` functions (kpt's --allow-exec).
	AllowExec bool
	// AllowNetwork gives image functions the host network.
	AllowNetwork bool
	// AllowWasm permits wasm functions (kpt's --allow-alpha-wasm): images
	// the Resolver returns as wasm bundles (Bundle.Wasm) run through Runner
	// as any image does, and an `exec:` naming a `.wasm` file runs through
	// WasmRunner. The Resolver must be configured alike (cache.WithWasm).
	AllowWasm bool
	// WasmRunner runs `.wasm` exec functions (runtime/wasm); nil refuses them.
	WasmRunner Runner
	// AllowImage, when set, is asked about every image before it is resolved;
	// an error fails the render before anything runs (operator allow-lists).
	AllowImage func(ref string) error
	// Timeout limits one function run; 0 means the runner's default (5m).
	Timeout time.Duration
	// MaxOutput caps a function's stdout and stderr each; 0 means the runner's default.
	MaxOutput int64
	// Limits bound what is read from a function's stdout beyond its size:
	// items, results, YAML nodes (aliases expanded), nesting depth. Zero
	// fields mean the defaults (DefaultMaxItems...).
	Limits OutputLimits
	// Results bound the results the whole render holds, over all its
	// functions (zero fields: DefaultMaxRenderResults...).
	Results ResultBudget
	// FailedResultsOnly keeps the results of failed functions alone in
	// Output.Results, results.yaml and the render status (generate, which
	// reports only those); the budget counts every function's all the same.
	FailedResultsOnly bool
	// PkgLimits bound what is read from the package tree's files: bytes
	// and YAML nodes, measured before decoding. Zero fields mean the
	// defaults (DefaultMaxPackageBytes...).
	PkgLimits PackageLimits
	// Stderr receives kpt's transcript ([RUNNING], [PASS], results); nil discards it.
	Stderr io.Writer
	// KptTranscript leaves out of the transcript what kpt never prints (the
	// time an image took to pull): set when kptr is invoked as kpt, whose
	// users and tests compare transcripts line by line.
	KptTranscript bool
	// Output selects the destination: OutputInPlace, OutputStdout,
	// OutputUnwrap, OutputMemory, or a directory path.
	Output string
	// Stdout receives OutputStdout / OutputUnwrap output.
	Stdout io.Writer
	// ResultsDir, when set, receives results.yaml (a kpt.dev/v1 FunctionResultList).
	ResultsDir string
	// Env is added to each function's environment (eval's -e/--env).
	Env []string
	// Mounts, AsCurrentUser: eval's --mount and --as-current-user.
	Mounts        []Mount
	AsCurrentUser bool
	// Memo, when set, replays a whole Render recorded before (see
	// RenderMemo). The Output of a replayed render holds only its counts
	// (Functions, Packages): no Resources, no Results. Eval ignores it.
	Memo RenderMemo
}

// ConstraintResolver is the optional Resolver extension that picks the
// highest tag of repo matching a semver constraint and returns the full
// reference (cache.Cache implements it).
type ConstraintResolver interface {
	ResolveConstraint(ctx context.Context, repo, constraint string) (string, error)
}

// Output is what a render or eval produced.
type Output struct {
	// Resources are the rendered resources in output order, each annotated
	// with config.kubernetes.io/path (relative to the root package) and
	// config.kubernetes.io/index. Set for every output mode.
	Resources []*yaml.RNode
	// Results is the FunctionResultList kpt writes with --results-dir.
	Results *ResultList
	// Functions is the number of functions run, Packages the number of packages rendered.
	Functions, Packages int
}

// Mount is a bind mount for eval's --mount.
type Mount = runtime.Mount
