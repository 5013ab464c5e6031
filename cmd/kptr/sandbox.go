package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kptr-dev/kptr/runtime"
)

// Sandbox modes (--sandbox, KPTR_SANDBOX): auto, none, or a registered
// tier's name (runtime.Tiers: namespace, landlock).
const (
	sandboxAuto = runtime.Auto // the strongest tier whose probes pass, else refuse
	sandboxNone = "none"       // no sandbox (the operator's explicit choice)
)

// sandboxModes lists the modes --sandbox takes: auto, every registered
// tier, none.
func sandboxModes() string {
	modes := []string{sandboxAuto}
	for _, t := range runtime.Tiers() {
		modes = append(modes, t.Info().Name)
	}
	return strings.Join(modes, ", ") + " or " + sandboxNone
}

// newRunner returns the function runner the global flags describe: under
// --sandbox=auto (the default) the strongest tier whose probes pass (the
// namespace tier, else the landlock tier, saying so once on stderr), else a
// refusal with exit code 3 naming every tier's failed probe and its fix.
// kptr never falls back to running images unsandboxed on its own;
// --sandbox=none is the operator's explicit choice.
func (g *globals) newRunner() (runtime.Runner, error) {
	r, notice, err := g.openRunner()
	fmt.Fprint(g.stderr, notice)
	return r, err
}

// openRunner is newRunner that returns auto's fallback line for stderr
// (notice, "" if none) instead of printing it, so that a caller opening the
// runner ahead of a function's turn prints it at that turn.
func (g *globals) openRunner() (_ runtime.Runner, notice string, _ error) {
	opts := []runtime.Option{runtime.WithTimeout(g.fnTimeout), runtime.WithLogger(g.logger()), runtime.WithImageDir(g.cacheDir)}
	switch g.sandbox {
	case sandboxNone:
		return runtime.Host{Timeout: g.fnTimeout}, "", nil
	case sandboxAuto, "":
	default:
		if _, ok := runtime.Lookup(g.sandbox); !ok {
			return nil, "", usageError("--sandbox: want %s, got %q", sandboxModes(), g.sandbox)
		}
	}
	if g.envOff("KPTR_OVERLAY") {
		// The read-only view of the image even where an overlay works
		// (upper layers then never take space in the run-state directory).
		opts = append(opts, runtime.WithOverlay(false))
	}
	sb, notice, err := runtime.Open(g.sandbox, opts...)
	if err != nil {
		return nil, "", refusal(err, "")
	}
	// closed when the command ends: prepared sandboxes and the run-state lock go
	g.onExit(sb.Close)
	return sb, notice, nil
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
