// Package tiers is the registry of kptr's sandbox tiers: importing it
// registers every tier with package runtime (runtime.Tiers,
// runtime.Open), strongest first as --sandbox=auto tries them. A new tier
// is one import line here and one runtime.Register call in its package's
// init; the tier test suite (runtime/tiers_test.go) then runs the whole
// isolation suite against it.
package tiers

import (
	// The namespace tier: own namespaces, the image as root (auto: first).
	_ "github.com/kptr-dev/kptr/runtime/namespace"
	// The landlock tier: Landlock, seccomp and rlimits (auto: second).
	_ "github.com/kptr-dev/kptr/runtime/landlock"
	// The wasm tier: wasm modules in kptr's process (auto: never; opened
	// for wasm images beside the tier that runs container images).
	_ "github.com/kptr-dev/kptr/runtime/wasm"
)
