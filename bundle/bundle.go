// Package bundle holds Bundle, what the cache hands to the runtime: a
// leaf, so the runtime and its tiers run functions without importing the
// cache, and tests hand a runner a bundle without building one.
package bundle

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Bundle is a runnable function image: an extracted root filesystem and the
// image config that says how to start it. It is what the cache hands to the
// runtime. Rootfs is shared by every run of the image and must never be
// modified; the runtime gives each run its own writable view.
type Bundle struct {
	// Ref is the reference as the caller named it, after kpt's prefix and
	// tag rules were applied (for example "gcr.io/kpt-fn/set-labels:v0.1.5").
	Ref string
	// Digest is the manifest digest of the image that was resolved; the
	// platform-specific one when Ref names an index.
	Digest v1.Hash
	// Rootfs is the absolute path of the extracted, read-only root filesystem.
	// Empty for bundles that run a host binary (kpt's exec functions).
	Rootfs string
	// Wasm, when set, says the bundle is a wasm function (runtime/wasm runs
	// it): the path of its module beneath Rootfs for an image whose index
	// entry or config names a wasm platform (js/wasm, wasip1/wasm; kpt's
	// `kpt alpha wasm push` format), or a host path for a `.wasm` exec
	// function (no Rootfs).
	Wasm string
	// Config is the image config: Entrypoint, Cmd, Env, WorkingDir, User.
	Config v1.Config
	// Pulled is how long this Resolve spent fetching and extracting the
	// image; 0 when the cache already held it. Callers that time a function
	// leave it out of the function's time.
	Pulled time.Duration
}
