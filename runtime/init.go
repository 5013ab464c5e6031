package runtime

import (
	"fmt"
	"os"
	"strconv"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"
)

// probeArg is the hidden first argument of a probe child (see probe.go).
const probeArg = "__kptr_probe"

// reexecEnv marks a process that already tried the sealed re-exec.
const reexecEnv = "_KPTR_SEALED_REEXEC"

// HandleInit must run first in main (and in TestMain of any test binary that
// starts sandboxes), before flags are parsed or goroutines started: when the
// process was started as a container init ("init") or as a probe child it
// does that job and never returns. The importing main package must also
// import github.com/opencontainers/runc/libcontainer/nsenter.
func HandleInit() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case "init":
		// libcontainer sets the parent-death signal only on its first
		// nsexec stage, which exits; the container init it ends up as keeps
		// whatever it finds here and restores it across its credential
		// changes. Set it so that when kptr dies (SIGKILL from Argo CD at its
		// deadline) the init dies too, and with it the run's pid namespace.
		_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
		libcontainer.Init() // never returns
	case probeArg:
		os.Exit(probeChild(os.Args[2:]))
	}
}

// ReexecSealed re-executes the current binary once from a sealed memfd copy
// of itself. libcontainer refuses to hand a container a path to the real
// binary (CVE-2019-5736) and, rootless, copies the whole binary into a memfd
// on every start; once /proc/self/exe is already a sealed memfd it skips
// that, so the copy is paid once per kptr process instead of once per
// function. On any failure kptr carries on unsealed (slower, equally safe).
func ReexecSealed() {
	if os.Getenv(reexecEnv) != "" {
		os.Unsetenv(reexecEnv)
		return
	}
	if os.Getenv("KPTR_NO_REEXEC") != "" || exeseal.IsSelfExeCloned() {
		return
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return
	}
	st, err := self.Stat()
	if err != nil {
		self.Close()
		return
	}
	sealed, err := exeseal.CloneBinary(self, st.Size(), "kptr", os.TempDir())
	self.Close()
	if err != nil || !exeseal.IsCloned(sealed) {
		if sealed != nil {
			sealed.Close()
		}
		return
	}
	os.Setenv(reexecEnv, "1")
	err = unix.Exec("/proc/self/fd/"+strconv.Itoa(int(sealed.Fd())), os.Args, os.Environ())
	// Only reached when exec failed.
	os.Unsetenv(reexecEnv)
	sealed.Close()
	fmt.Fprintf(os.Stderr, "kptr: re-exec from sealed copy failed (%v); continuing\n", err)
}
