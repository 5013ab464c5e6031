package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kptr-dev/kptr/runtime"
)

// Sandbox tiers (--sandbox, KPTR_SANDBOX).
const (
	sandboxAuto      = "auto"      // the namespace tier, else the landlock tier, else refuse
	sandboxNamespace = "namespace" // the namespace tier or refuse
	sandboxLandlock  = "landlock"  // the landlock tier or refuse
	sandboxNone      = "none"      // no sandbox (the operator's explicit choice)
)

const sandboxModes = "auto, namespace, landlock or none"

// newRunner returns the function runner the global flags describe: under
// --sandbox=auto (the default) the namespace tier where its probes pass,
// else the landlock tier (saying so once on stderr), else a refusal with
// exit code 3 naming both tiers' failed probes and their fixes. kptr never
// falls back to running images unsandboxed on its own; --sandbox=none is the
// operator's explicit choice.
func (g *globals) newRunner() (runtime.Runner, error) {
	r, notice, err := g.openRunner()
	fmt.Fprint(g.stderr, notice)
	return r, err
}

// openRunner is newRunner that returns the landlock fallback's line for
// stderr (notice, "" if none) instead of printing it, so that a caller
// opening the runner ahead of a function's turn prints it at that turn.
func (g *globals) openRunner() (_ runtime.Runner, notice string, _ error) {
	opts := []runtime.Option{runtime.WithTimeout(g.fnTimeout), runtime.WithLogger(g.logger())}
	switch g.sandbox {
	case sandboxNone:
		return runtime.Host{Timeout: g.fnTimeout}, "", nil
	case sandboxLandlock:
		ll, err := runtime.NewLandlock(opts...)
		if err != nil {
			return nil, "", refusal(err, "")
		}
		if err := g.landlockCacheReach(); err != nil {
			return nil, "", withCode(exitEnv, err)
		}
		return ll, "", nil
	case sandboxAuto, "", sandboxNamespace:
	default:
		return nil, "", usageError("--sandbox: want %s, got %q", sandboxModes, g.sandbox)
	}
	if g.getenv("KPTR_OVERLAY") == "0" {
		// The read-only view of the image even where an overlay works
		// (upper layers then never take space in the run-state directory).
		opts = append(opts, runtime.WithOverlay(false))
	}
	sb, err := runtime.New(opts...)
	if err == nil {
		// closed when the command ends: prepared sandboxes and the run-state lock go
		g.onExit(sb.Close)
		return sb, "", nil
	}
	if g.sandbox == sandboxNamespace {
		return nil, "", refusal(err, "")
	}
	ll, lerr := runtime.NewLandlock(opts...)
	if lerr != nil {
		return nil, "", refusal(err, "; the landlock tier cannot run either: "+lerr.Error())
	}
	if rerr := g.landlockCacheReach(); rerr != nil {
		return nil, "", withCode(exitEnv, fmt.Errorf("namespace sandbox unavailable (%v), and %w", err, rerr))
	}
	return ll, fmt.Sprintf("kptr: namespace sandbox unavailable (%v); running functions in the landlock tier (no namespaces: functions cannot read their own image's files by absolute path; 'kptr doctor' says what each tier gives)\n", err), nil
}

// refusal is the exit-3 error for a sandbox that cannot run, with the fix
// of the failed probe.
func refusal(err error, more string) error {
	var pe *runtime.ProbeError
	if errors.As(err, &pe) {
		return withCode(exitEnv, fmt.Errorf("%w%s; fix: %s; run 'kptr doctor' to check every prerequisite, or pass --sandbox=none to run functions without a sandbox", err, more, pe.Result.Fix))
	}
	return withCode(exitEnv, fmt.Errorf("sandbox: %w%s; run 'kptr doctor'", err, more))
}

// landlockCacheReach says why the landlock tier cannot run images from the
// cache the command uses, nil when it can. As root (container ids mapped)
// that tier runs each function as an unprivileged host uid, which must
// traverse every directory above the image's rootfs; a cache under a 0700
// home (root's default, $HOME/.cache/kptr) is out of its reach, and every
// function would fail at its start. doctor shows the same verdict as its
// "cache" line.
func (g *globals) landlockCacheReach() error {
	_, feat, _ := runtime.ProbeCached(false)
	if !feat.Root || g.cacheDir == "" {
		return nil
	}
	blocked := untraversableAbove(g.cacheDir)
	if blocked == "" {
		return nil
	}
	return fmt.Errorf("the landlock tier cannot run images from the cache %s: %s is not traversable by other users, and as root this tier runs functions as an unprivileged uid that must reach the image; "+
		"fix: use a cache directory whose whole path every user may traverse (--cache-dir / KPTR_CACHE_DIR, e.g. /var/cache/kptr), or chmod o+x %s", g.cacheDir, blocked, blocked)
}

// untraversableAbove returns the first existing directory on dir's path
// (dir itself, or its nearest existing ancestor, up to /) that other users
// cannot traverse (no o+x), "" when there is none. A directory not yet
// created is judged by the ancestors it will be created in (the cache
// creates its directories 0755).
func untraversableAbove(dir string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return d
		}
		if d == "/" {
			return ""
		}
		d = filepath.Dir(d)
	}
}
