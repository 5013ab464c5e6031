package landlock

import (
	"context"
	"os"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

func init() {
	runtime.Register(tier{})
	runtime.RegisterChild(landlockProbeArg, func(args []string) {
		if len(args) > 0 {
			landlockProbeMain(args[0])
		}
		os.Exit(2)
	})
}

// Name is the tier's name (--sandbox=landlock).
const Name = "landlock"

// tier is the landlock tier as runtime.Tier.
type tier struct{}

func (tier) Info() runtime.TierInfo {
	return runtime.TierInfo{
		Name:    Name,
		Summary: "no namespaces: a child of kptr confined by Landlock, seccomp and rlimits",
		Auto:    2,
		Caveat:  "no namespaces: functions cannot read their own image's files by absolute path",
	}
}

func (tier) Probe(stateDir string, fresh bool) []runtime.ProbeResult {
	if stateDir == "" {
		stateDir = runtime.DefaultStateDir()
	}
	results, _ := ProbeCached(stateDir, fresh)
	return results
}

func (tier) Open(opts ...runtime.Option) (runtime.Sandbox, error) {
	s, err := New(opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Prepare does nothing: a landlock run has nothing to set up ahead that
// would not cost the same at its start.
func (l *Sandbox) Prepare(context.Context, cache.Bundle, runtime.Invocation) {}

// Close does nothing: a landlock run holds nothing once Run returns.
func (l *Sandbox) Close() error { return nil }

var _ runtime.Sandbox = (*Sandbox)(nil)

// Report names what a function cannot do in this tier.
func (tier) Report(string) []string {
	return []string{"note: in the landlock tier the image is not the function's root: absolute paths resolve against the host and are denied, so a function that reads its own image's files by absolute path fails"}
}
