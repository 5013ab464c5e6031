package main

import (
	"os"

	// The container init half of libcontainer (cgo, runs before the Go
	// runtime when kptr is started as "kptr init").
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/kptr-dev/kptr/internal/gcfloor"
	"github.com/kptr-dev/kptr/runtime"

	// Every sandbox tier, registered with runtime (runtime.Tiers).
	_ "github.com/kptr-dev/kptr/runtime/tiers"
)

// startup runs before anything else in main. Started as libcontainer's
// container init (already run from runtime/containerinit's package init), a
// sandbox probe child or the sidecar's init (kptr init -- CMD), kptr does
// that job and exits here.
// Otherwise, for commands that may start several sandboxes, kptr makes sure
// libcontainer never copies the whole binary on a function start (see
// runtime.ExpectManyStarts, the namespace tier's ReexecSealed; nothing at all for a binary no run can write, an
// installed one of root's): as root it seals it through a read-only overlayfs
// instead; unprivileged, kptr re-executes itself once from a sealed
// in-memory copy.
func startup() {
	runtime.HandleInit()
	if code, ok := initFast(os.Args, os.Stderr); ok {
		os.Exit(code)
	}
	if mayStartManySandboxes(os.Args) {
		runtime.ExpectManyStarts()
	}
	gcfloor.Set()
}

// mayStartManySandboxes is false for commands that never start a sandbox
// and for fn eval, which starts one: they skip the re-exec, whose one-time
// copy and second Go start-up of kptr (~30 ms for a 20 MB kptr) pay off
// only from a second sandbox start on (otherwise nsinit seals one copy per
// process when it first starts a run, and libcontainer one per start; see
// runtime/namespace/launch.go's sealedExe and BENCHMARKS.md).
func mayStartManySandboxes(argv []string) bool {
	if len(argv) < 2 {
		return false
	}
	switch argv[1] {
	case "version", "--version", "help", "-h", "--help", "cache", "doctor", "prewarm", "init",
		"completion", "__complete", "__completeNoDesc":
		return false
	case "fn":
		// fn source / fn sink only read and write packages (also as kpt
		// fn ...); fn eval runs one function.
		return len(argv) < 3 || (argv[2] != "source" && argv[2] != "sink" && argv[2] != "eval")
	}
	return true
}
