package namespace

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/opencontainers/runc/libcontainer/exeseal"
	"golang.org/x/sys/unix"
)

// probeArg is the hidden first argument of a probe child (see probe.go).
const probeArg = "__kptr_probe"

// reexecEnv marks a process that already tried the sealed re-exec.
const reexecEnv = "_KPTR_SEALED_REEXEC"

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
// equally safe). None of this is needed, and nothing is done, when no run
// can write the binary (sealNeeded): then only libcontainer, the fallback
// launcher, seals, at each of its starts.
func ReexecSealed() {
	if os.Getenv(reexecEnv) != "" {
		os.Unsetenv(reexecEnv)
		sealMode = SealReexec
		return
	}
	if os.Getenv("KPTR_NO_REEXEC") != "" {
		return
	}
	if !selfSealNeeded() {
		sealMode = SealNotNeeded
		return
	}
	if exeseal.IsSelfExeCloned() {
		sealMode = SealReexec
		return
	}
	// libcontainer's overlay takes the run state directory as a second
	// (empty) layer, and the kernel refuses layers that overlap (the binary's
	// directory inside it or the other way round): try with the same one.
	dir := runtime.DefaultStateDir()
	if runtime.EnsurePrivateDir(dir) != nil {
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
	// no run can write the binary (sealNeeded): nsinit starts from it as it
	// is, and only libcontainer's starts seal (their own way)
	SealNotNeeded = "not-needed"
)

// sealAlwaysEnv makes kptr seal its binary as if a run could write it
// (tests of the sealing itself, where the binary is root's).
const sealAlwaysEnv = "_KPTR_SEAL_ALWAYS"

// selfSealNeeded is sealNeeded for the running binary, read once; true
// (seal) when it cannot be read.
var selfSealNeeded = sync.OnceValue(func() bool {
	if os.Getenv(sealAlwaysEnv) != "" {
		return true
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return true
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return true
	}
	_, aerr := unix.Fgetxattr(int(f.Fd()), "system.posix_acl_access", nil)
	acl := aerr == nil || (aerr != unix.ENODATA && aerr != unix.EOPNOTSUPP)
	return sealNeeded(st, acl)
})

// sealNeeded says whether a function could write the kptr binary whose file
// is st (acl: it has an access ACL, or that could not be read), were it to
// reach it (through /proc/<pid>/exe: CVE-2019-5736, why libcontainer and
// kptr start inits from a sealed copy). Every run is in a user namespace
// whose ids are unprivileged host ids (kptr's own uid when kptr is not
// root, RootHostIDBase's range when it is), never host root, and its
// capabilities count only on files whose owner is mapped in it. So a file
// of root's, without a group or other write bit and without an ACL, is one
// no run can write: true (seal) for anything else. An installed kptr
// (/usr/local/bin, the sidecar image) is such a file; a kptr built or
// installed by its user is that user's, and is sealed as before.
func sealNeeded(st unix.Stat_t, acl bool) bool {
	return st.Uid != 0 || st.Mode&0o022 != 0 || acl
}

var sealMode string

// SealMode says how ReexecSealed spared libcontainer its per-start copy.
func SealMode() string { return sealMode }
