package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/internal/lazyre"
	"github.com/spf13/pflag"
)

// The operator policy of `kptr generate`.
//
// Argo CD runs `kptr generate` with the sidecar's environment (the operator's,
// trusted) merged with the request's variables. Everything under PARAM_* and
// ARGOCD_ENV_* is written by whoever may edit an Application: untrusted. The
// policy is therefore built in two steps:
//
//  1. operatorPolicy: kptr's own flags (from plugin.yaml's command) and KPTR_*
//     variables (from the sidecar's pod spec). These decide everything.
//  2. applyAppParameters: the few settings an Application may choose. It may
//     only pick a value the operator's policy already permits (a domain for
//     metadata annotations, a shorter function timeout); it can never enable
//     exec, network, another image, or change where and how images are pulled.
//     All other PARAM_* / ARGOCD_ENV_* variables, including ones that spell
//     kptr flags or KPTR_* names, are ignored.
//
// The function chain enforces it (fnenv.Policy) at the two seams the
// pipeline cannot bypass: resolving (no image outside the allow-list is ever
// resolved or pulled) and running (no exec function, no network, no host
// mounts unless allowed).

// defaultAllowedImages is the allow-list when the operator sets none: the kpt
// function catalog at its current and its former home.
var defaultAllowedImages = []string{
	"ghcr.io/kptdev/krm-functions-catalog/*",
	"gcr.io/kpt-fn/*",
}

// policy is what a generate call may do.
type policy struct {
	// AllowedImages are glob patterns (see matchImage); an image must match one.
	AllowedImages []string
	// AllowExec permits Kptfile `exec:` functions (host binaries, unsandboxed).
	AllowExec bool
	// AllowNetwork gives functions the host network instead of loopback only.
	AllowNetwork bool
	// AllowWasm runs wasm function images (kpt's alpha --allow-alpha-wasm)
	// in-process, beside container images.
	AllowWasm bool
	// AllowEmpty lets a render that produced no resources succeed.
	AllowEmpty bool
	// AnnotationDomain, when set, annotates every resource with the app's
	// metadata under this domain (e.g. "kptr.dev" → kptr.dev/app-name).
	AnnotationDomain string
	// FnTimeout is the time limit of one function run.
	FnTimeout time.Duration
	// Timeout bounds the whole generate call (0: only the caller's deadline).
	Timeout time.Duration
	// FetchTimeout bounds a background fetch (fetch.go): the pull of an
	// image that goes on after the render that needed it ended.
	FetchTimeout time.Duration
	// MaxOutputBytes bounds the manifests printed (Argo CD's gRPC message
	// limit is 100 MiB); larger output fails with a clear message instead.
	MaxOutputBytes int64
}

// policyFlags registers generate's operator settings on fs, each defaulting to
// its KPTR_* variable. Both come from the operator: the flags from plugin.yaml,
// the variables from the sidecar's pod spec.
func policyFlags(fs *pflag.FlagSet, env func(string) string, p *policy) {
	allowed := defaultAllowedImages
	if v := env("KPTR_ALLOWED_IMAGES"); strings.TrimSpace(v) != "" {
		allowed = splitList(v)
	}
	fs.StringSliceVar(&p.AllowedImages, "allowed-images", allowed, "image glob patterns functions may use, comma-separated; '*' stops at '/', '**' does not (KPTR_ALLOWED_IMAGES)")
	fs.BoolVar(&p.AllowExec, "allow-exec", envBool(env("KPTR_ALLOW_EXEC")), "allow Kptfile exec: functions (host binaries, unsandboxed) (KPTR_ALLOW_EXEC)")
	fs.BoolVar(&p.AllowNetwork, "allow-network", envBool(env("KPTR_ALLOW_NETWORK")), "give functions the host network (KPTR_ALLOW_NETWORK)")
	fs.BoolVar(&p.AllowWasm, "allow-alpha-wasm", envBool(env("KPTR_ALLOW_WASM")), "run wasm function images (js/wasm, wasip1/wasm) in-process, beside container images; alpha, as in kpt (KPTR_ALLOW_WASM)")
	fs.BoolVar(&p.AllowEmpty, "allow-empty", envBool(env("KPTR_ALLOW_EMPTY")), "succeed when the render produced no resources (KPTR_ALLOW_EMPTY)")
	fs.StringVar(&p.AnnotationDomain, "annotation-domain", env("KPTR_ANNOTATION_DOMAIN"), "annotate resources with the app's metadata under this domain; an app may choose its own with the annotation-domain parameter (KPTR_ANNOTATION_DOMAIN)")
	fs.DurationVar(&p.Timeout, "timeout", envDuration(env("KPTR_TIMEOUT"), 0), "time limit of the whole generate call, 0 for none (KPTR_TIMEOUT)")
	fs.DurationVar(&p.FetchTimeout, "fetch-timeout", envDuration(env("KPTR_FETCH_TIMEOUT"), defaultFetchTimeout), "time limit of an image pull that goes on in the background after the render that started it ends (KPTR_FETCH_TIMEOUT)")
	fs.Int64Var(&p.MaxOutputBytes, "max-output-bytes", envInt64(env("KPTR_MAX_OUTPUT_BYTES"), 100<<20), "largest manifest stream printed (KPTR_MAX_OUTPUT_BYTES)")
}

func envInt64(v string, def int64) int64 {
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		return n
	}
	return def
}

// chainPolicy is the part of p the function chain enforces.
func (p *policy) chainPolicy() *fnenv.Policy {
	return &fnenv.Policy{AllowedImages: p.AllowedImages, AllowExec: p.AllowExec, AllowNetwork: p.AllowNetwork}
}

// validate checks the operator's settings once, so that a bad pod spec fails
// every render with the same clear message.
func (p *policy) validate() error {
	for _, pat := range p.AllowedImages {
		if _, err := fnenv.CompileImagePattern(pat); err != nil {
			return fmt.Errorf("KPTR_ALLOWED_IMAGES: %w", err)
		}
	}
	if p.AnnotationDomain != "" && !validDomain(p.AnnotationDomain) {
		return fmt.Errorf("KPTR_ANNOTATION_DOMAIN: %q is not a DNS subdomain", p.AnnotationDomain)
	}
	if p.MaxOutputBytes <= 0 {
		return fmt.Errorf("KPTR_MAX_OUTPUT_BYTES must be positive")
	}
	if p.Timeout < 0 {
		return fmt.Errorf("KPTR_TIMEOUT (--timeout) must not be negative (0: no limit), got %s", p.Timeout)
	}
	if p.FetchTimeout <= 0 {
		return fmt.Errorf("KPTR_FETCH_TIMEOUT (--fetch-timeout) must be positive, got %s", p.FetchTimeout)
	}
	return nil
}

// appParameter names: what plugin.yaml announces, and the two spellings Argo
// CD gives them in the environment (a parameter `annotation-domain` arrives
// as PARAM_ANNOTATION_DOMAIN; a plugin.env entry as ARGOCD_ENV_ANNOTATION_DOMAIN).
const (
	paramAnnotationDomain = "ANNOTATION_DOMAIN"
	paramFnTimeout        = "FN_TIMEOUT"
)

// appParam returns an Application-supplied setting, the parameter winning over
// the plugin env entry.
func appParam(env func(string) string, key string) (string, bool) {
	if v := env("PARAM_" + key); v != "" {
		return strings.TrimSpace(v), true
	}
	if v := env("ARGOCD_ENV_" + key); v != "" {
		return strings.TrimSpace(v), true
	}
	return "", false
}

// applyAppParameters lets the Application narrow or decorate the operator's
// policy. It returns an error for a value it refuses, so that the app's owner
// sees why (rather than silently getting something else).
func (p *policy) applyAppParameters(env func(string) string, fnTimeout *time.Duration) error {
	if v, ok := appParam(env, paramAnnotationDomain); ok {
		if !validDomain(v) {
			return fmt.Errorf("parameter annotation-domain: %q is not a DNS subdomain", v)
		}
		p.AnnotationDomain = v
	}
	if v, ok := appParam(env, paramFnTimeout); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("parameter fn-timeout: %q is not a positive duration", v)
		}
		if d > *fnTimeout {
			return fmt.Errorf("parameter fn-timeout: %s exceeds the operator's limit %s", d, *fnTimeout)
		}
		*fnTimeout = d
	}
	return nil
}

var domainRE = lazyre.New(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// validDomain reports whether d can prefix an annotation key (a DNS subdomain).
func validDomain(d string) bool { return len(d) <= 253 && domainRE().MatchString(d) }
