// Package containerinit is the sandbox's container init entry: libcontainer
// starts it as "<kptr> init" (from /proc/self/exe or a sealed clone of it),
// and this package runs libcontainer's init from its own package init,
// before most of kptr is initialised.
//
// Go initialises packages in import-path order as soon as their imports
// are (the language specification since Go 1.21), and a package init
// that never returns ends the start-up there. This package imports only
// libcontainer (and nsenter, its cgo half, which has already run before
// the Go runtime started), so when it runs, the packages it does not need
// and that sort after it have not been initialised and never will be in an
// init process: kyaml and kube-openapi, go-containerregistry's remote and
// its HTTP and TLS stack, cobra and pflag, kptr's own pipeline and cache
// (measured: 159 of the binary's 181 package inits, ~190 fewer page faults
// and ~15% less CPU per sandbox start; GODEBUG=inittrace=1 and perf stat).
// libcontainer offers no way to start anything but /proc/self/exe; the
// namespace tier's default launcher, runtime/launcher, avoids the Go start
// altogether (runtime/namespace/launch.go), and this init serves the runs it leaves
// to libcontainer.
//
// Importing the package is enough (runtime does); Run is also what
// runtime.HandleInit calls for "init", for a binary whose inits were
// ordered otherwise.
package containerinit

import (
	"fmt"
	"os"
	"os/signal"

	"github.com/opencontainers/runc/libcontainer"
	// The container init half of libcontainer (cgo, runs before the Go
	// runtime when the binary is started as "init").
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/runtime/seccomp"
)

// Policy is the namespace tier's seccomp policy: the common one, with every
// socket family it allows (a run has its own network namespace) and
// metadata calls allowed (the image is never written: read-only binds or an
// overlay's lower layer). nsinit's runs load it as a BPF program
// (runtime/namespace), libcontainer's from here.
var Policy = seccomp.Policy{Network: true}

// FilterSignal asks a libcontainer container init to load Policy: kptr
// sends it once libcontainer has set the container up and the init waits
// to execute the function (libcontainer loads filters only through
// libseccomp, cgo, which kptr does not link).
const FilterSignal = unix.SIGUSR2

// filterFailed is the init's exit code when it could not load the filter:
// the function never runs unfiltered.
const filterFailed = 126

// initPipeEnv is set by libcontainer for every init it starts; the entry
// runs only with it and only for exactly "<kptr> init", so that the
// sidecar's `kptr init -- CMD` (runtime.ProcessInit) is left to kptr's
// command line.
const initPipeEnv = "_LIBCONTAINER_INITPIPE"

func init() {
	if IsInit() {
		Run()
	}
}

// IsInit reports whether this process was started by libcontainer as a
// container init.
func IsInit() bool {
	return len(os.Args) == 2 && os.Args[1] == "init" && os.Getenv(initPipeEnv) != ""
}

// Run becomes the container init; it never returns.
func Run() {
	// libcontainer sets the parent-death signal only on its first nsexec
	// stage, which exits; the container init it ends up as keeps whatever
	// it finds here and restores it across its credential changes. Set it
	// so that when kptr dies (SIGKILL from Argo CD at its deadline) the
	// init dies too, and with it the run's pid namespace.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	loadFilterOnSignal()
	libcontainer.Init() // never returns
}

// loadFilterOnSignal makes the init load Policy into all its threads at
// once (SECCOMP_FILTER_FLAG_TSYNC) when kptr sends FilterSignal: by then
// libcontainer's set-up (mounts, pivot_root, capabilities, no_new_privs,
// credentials) is done and its main thread waits on the exec fifo, so the
// filter is in force in the thread that executes the function; kptr checks
// that from outside (Seccomp: 2 in every thread's status) before it opens
// the fifo. The loading thread sets no_new_privs on itself first
// (libcontainer sets it on its own thread only), which lets an
// unprivileged thread install a filter. If loading fails, the init exits
// (filterFailed) and the function never runs.
func loadFilterOnSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, FilterSignal)
	go func() {
		<-sig
		signal.Stop(sig)
		if err := seccomp.LoadAllThreads(Policy); err != nil {
			fmt.Fprintf(os.Stderr, "kptr container init: %v\n", err)
			os.Exit(filterFailed)
		}
	}()
}
