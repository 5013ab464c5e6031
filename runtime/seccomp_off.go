//go:build !seccomp || !cgo

package runtime

// seccompBuilt: built without the seccomp tag; no filter is loaded.
const seccompBuilt = false
