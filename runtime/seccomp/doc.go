// Package seccomp is kptr's system-call policy and the classic-BPF
// assembler that turns it into the program the sandbox tiers load, for
// amd64 and arm64, in Go (golang.org/x/sys/unix; no libseccomp). It is not
// a tier: runtime/launcher loads its program into the namespace tier's
// container init, and the landlock tier's confiner loads it before it
// executes the function.
//
// The policy (policy.go) is an allow-list: it admits the calls Docker's
// default profile admits to a container without capabilities, less a few;
// it refuses with EPERM every call Docker's and containerd's defaults
// refuse (DeniedSyscalls) and clone with any namespace flag; every other
// call, known or newer than the tables, fails with ENOSYS, as on a kernel
// without it (clone3 among them: libc falls back to clone, whose flags a
// filter can read); calls of a foreign architecture kill the process. A
// tier's Policy adds what it needs (the landlock tier: no socket but
// AF_UNIX without the network, no socket(AF_UNIX) at all, no metadata
// changes). The program (filter.go) is a binary search over the call
// number. The number tables (numbers_*.go, compiled on every architecture)
// are checked against libseccomp's by a test, for amd64 and arm64.
package seccomp
