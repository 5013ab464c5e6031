//go:build seccomp && cgo

package runtime

// seccompBuilt: libcontainer can load seccomp filters (libseccomp linked in).
const seccompBuilt = true
