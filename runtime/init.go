package runtime

import (
	"fmt"
	"os"
	"strconv"

	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/runtime/containerinit"
)

// probeArg is the hidden first argument of a probe child (see probe.go).
const probeArg = "__kptr_probe"

// reexecEnv marks a process that already tried the sealed re-exec.
const reexecEnv = "_KPTR_SEALED_REEXEC"

// Which code a sandbox's processes start in. The namespace tier's
// container init is, by default, runtime/nsinit's C constructor in a
// re-executed kptr: it sets the container up and executes the function
// before the Go runtime would start (launch.go says when libcontainer starts
// a run instead). libcontainer's own container init runs from the package
// init of runtime/containerinit, before most of kptr's packages are
// initialised (that package says how); kptr no longer links kyaml's
// fn/framework (kube-openapi's strfmt and govalidator compiled ~3 ms of
// regexps at every start, see pipeline/kptfile/v1.Result), and kptr's own
// packages compute nothing at init; cmd/kptr's TestStartupImports keeps the
// dropped ones out. The landlock tier's launcher and confiner and the probe
// child still start through HandleInit, after every package init: their
// code lives in this package, which needs the cache and the rest.

// HandleInit must run first in main (and in TestMain of any test binary that
// starts sandboxes), before flags are parsed or goroutines started: when the
// process was started as libcontainer's container init ("init" with its
// init pipe), a probe child or one of the landlock tier's helper processes
// (landlock_child.go) it does that job and never returns. The importing main package must also
// import github.com/opencontainers/runc/libcontainer/nsenter.
func HandleInit() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "init":
		// libcontainer starts exactly "/proc/self/exe init" with its init
		// pipe in the environment, normally run already from
		// runtime/containerinit's package init; anything else is
		// `kptr init -- CMD` (ProcessInit), which the command line handles.
		if !containerinit.IsInit() {
			return
		}
		containerinit.Run() // never returns
	case probeArg:
		os.Exit(probeChild(os.Args[2:]))
	case landlockProbeArg:
		if len(os.Args) > 2 {
			landlockProbeMain(os.Args[2])
		}
		os.Exit(2)
	}
}

// ReexecSealed makes sure libcontainer never copies the kptr binary on a
// sandbox start. libcontainer refuses to hand a container a path to the real
// binary (CVE-2019-5736): unless /proc/self/exe is already a sealed memfd it
// clones the binary on every start, through a read-only overlayfs where the
// kernel lets kptr mount one (root: no copy, as cheap as a sealed memfd), else
// by copying the whole binary into a memfd. So ReexecSealed tries the overlay
// once (exeseal.CloneSelfExe, as libcontainer does): when it works, nothing
// more is needed; otherwise it re-executes kptr once from the sealed memfd
// copy that made instead, and the copy is paid once per kptr process rather
// than once per function. On any failure kptr carries on unsealed (slower,
// equally safe).
func ReexecSealed() {
	if os.Getenv(reexecEnv) != "" {
		os.Unsetenv(reexecEnv)
		sealMode = SealReexec
		return
	}
	if os.Getenv("KPTR_NO_REEXEC") != "" {
		return
	}
	if exeseal.IsSelfExeCloned() {
		sealMode = SealReexec
		return
	}
	// libcontainer's overlay takes the run state directory as a second
	// (empty) layer, and the kernel refuses layers that overlap (the binary's
	// directory inside it or the other way round): try with the same one.
	dir := DefaultStateDir()
	if ensurePrivateDir(dir) != nil {
		dir = os.TempDir()
	}
	sealed, err := exeseal.CloneSelfExe(dir)
	if err != nil {
		return
	}
	if !exeseal.IsCloned(sealed) {
		// A read-only overlayfs view of the binary (an O_PATH fd, no
		// copy): libcontainer makes the same on every start; nsinit
		// starts its inits from this one (sealedExe).
		keepSealed(sealed)
		sealMode = SealOverlay
		return
	}
	os.Setenv(reexecEnv, "1")
	err = unix.Exec("/proc/self/fd/"+strconv.Itoa(int(sealed.Fd())), os.Args, os.Environ())
	// Only reached when exec failed.
	os.Unsetenv(reexecEnv)
	sealed.Close()
	fmt.Fprintf(os.Stderr, "kptr: re-exec from sealed copy failed (%v); continuing\n", err)
}

// How ReexecSealed spared libcontainer its per-start copy of the binary.
const (
	SealNone    = ""        // not at all (KPTR_NO_REEXEC, or everything failed): a copy per start
	SealReexec  = "reexec"  // /proc/self/exe is a sealed memfd copy
	SealOverlay = "overlay" // libcontainer seals through a read-only overlayfs, no copy
)

var sealMode string

// SealMode says how ReexecSealed spared libcontainer its per-start copy.
func SealMode() string { return sealMode }
