package namespace

import (
	"os"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/containerinit"
)

// Which code a sandbox's processes start in. The namespace tier's
// container init is, by default, runtime/launcher's C constructor in a
// re-executed kptr: it sets the container up and executes the function
// before the Go runtime would start (launch.go says when libcontainer starts
// a run instead). libcontainer's own container init runs from the package
// init of runtime/containerinit, before most of kptr's packages are
// initialised (that package says how); kptr no longer links kyaml's
// fn/framework (kube-openapi's strfmt and govalidator compiled ~3 ms of
// regexps at every start, see pipeline/kptfile/v1.Result), and kptr's own
// packages compute nothing at init; cmd/kptr's TestStartupImports keeps the
// dropped ones out. The probe child starts through runtime.HandleInit,
// after every package init.

func init() {
	runtime.Register(tier{})
	runtime.RegisterManyStarts(ReexecSealed)
	runtime.RegisterChild("init", func([]string) {
		// libcontainer starts exactly "/proc/self/exe init" with its init
		// pipe in the environment, normally run already from
		// runtime/containerinit's package init; anything else is
		// `kptr init -- CMD` (runtime.ProcessInit), which the command line
		// handles.
		if containerinit.IsInit() {
			containerinit.Run() // never returns
		}
	})
	runtime.RegisterChild(probeArg, func(args []string) { os.Exit(probeChild(args)) })
}

// Name is the tier's name (--sandbox=namespace).
const Name = "namespace"

// tier is the namespace tier as runtime.Tier.
type tier struct{}

func (tier) Info() runtime.TierInfo {
	return runtime.TierInfo{
		Name:    Name,
		Summary: "own user, mount, pid, network, ipc and uts namespaces; the image is the function's root",
		Auto:    1,
	}
}

// Probe probes afresh or answers from the verdict cached for the default
// run-state directory (the namespace tier's probes do not depend on
// stateDir but for the overlay step, checked again by New).
func (tier) Probe(_ string, fresh bool) []runtime.ProbeResult {
	results, _, _ := ProbeCached(fresh)
	return results
}

func (tier) Open(opts ...runtime.Option) (runtime.Sandbox, error) {
	s, err := New(opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

var _ runtime.Sandbox = (*Sandbox)(nil)

// Report says how runs of images cached in cacheDir start here.
func (tier) Report(cacheDir string) []string {
	return []string{"launcher: " + LauncherSummary(cacheDir)}
}
