package main

import (
	"errors"
	"fmt"

	"github.com/kptr-dev/kptr/runtime"
)

// newRunner returns the function runner the global flags describe: the
// rootless sandbox (--sandbox=auto, the default), or the host runner under
// --sandbox=none. When the sandbox cannot work here kptr refuses with exit
// code 3, naming the failed probe and its fix; it never falls back to running
// images unsandboxed on its own.
func (g *globals) newRunner() (runtime.Runner, error) {
	switch g.sandbox {
	case "none":
		return runtime.Host{Timeout: g.fnTimeout}, nil
	case "auto", "":
	default:
		return nil, usageError("--sandbox: want auto or none, got %q", g.sandbox)
	}
	opts := []runtime.Option{runtime.WithTimeout(g.fnTimeout), runtime.WithLogger(g.logger())}
	if g.getenv("KPTR_OVERLAY") == "0" {
		// The read-only view of the image even where an overlay works
		// (upper layers then never take space in the run-state directory).
		opts = append(opts, runtime.WithOverlay(false))
	}
	sb, err := runtime.New(opts...)
	if err != nil {
		var pe *runtime.ProbeError
		if errors.As(err, &pe) {
			return nil, withCode(exitEnv, fmt.Errorf("%w; fix: %s; run 'kptr doctor' to check every prerequisite, or pass --sandbox=none to run functions without a sandbox", err, pe.Result.Fix))
		}
		return nil, withCode(exitEnv, fmt.Errorf("sandbox: %w; run 'kptr doctor'", err))
	}
	g.atExit = append(g.atExit, sb.Close)
	return sb, nil
}
