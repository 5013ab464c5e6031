//go:build seccomp && cgo

package namespace

// seccompBuilt: libcontainer can load seccomp filters (libseccomp linked in).
const SeccompBuilt = true
