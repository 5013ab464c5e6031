//go:build !seccomp || !cgo

package namespace

// seccompBuilt: built without the seccomp tag; no filter is loaded.
const SeccompBuilt = false
