// Package seccomp is kptr's system-call policy and the classic-BPF
// assembler that turns it into the program the sandbox tiers load, for
// amd64 and arm64, in Go (golang.org/x/sys/unix; no libseccomp). It is not
// a tier: runtime/nsinit loads its program into the namespace tier's
// container init, and the landlock tier's confiner loads it before it
// executes the function.
//
// The policy (policy.go) refuses with EPERM every call Docker's and
// containerd's default profiles refuse to a container without capabilities
// and a few more, clone with any namespace flag, and clone3 with ENOSYS (so
// libc falls back to clone, whose flags a filter can read); calls of a
// foreign architecture kill the process. The number tables (sysnum*.go)
// are checked against libseccomp's by a test.
package seccomp
