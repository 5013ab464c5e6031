package main

import (
	"fmt"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/runtime"
)

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
	r, notice, closeSandbox, err := fnenv.OpenSandbox(fnenv.SandboxConfig{
		Mode: g.sandbox, Timeout: g.fnTimeout, Log: g.logger(), ImageDir: g.cacheDir,
		NoOverlay: g.envOff("KPTR_OVERLAY"),
	})
	if err != nil {
		return nil, "", err
	}
	if closeSandbox != nil {
		// closed when the command ends: prepared sandboxes and the run-state lock go
		g.onExit(closeSandbox)
	}
	return r, notice, nil
}

// refusal is the exit-3 error for a sandbox that cannot run (fnenv.Refusal).
func refusal(err error, more string) error { return fnenv.Refusal(err, more) }
