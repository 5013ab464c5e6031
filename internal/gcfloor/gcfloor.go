// Package gcfloor gives a kptr process a heap floor: no garbage collection
// until its memory reaches the floor, then the Go runtime's usual pacing.
//
// Most kptr commands are short and allocate little: a 50-resource render
// allocates ~15 MB in all, and with Go's default pacing (a first goal of
// 4 MB) it ran five collections, about 3 % of its CPU, on the two cores the
// functions also need (BENCHMARKS.md). The floor is Go's documented recipe for a
// minimum heap — GOGC off under a memory limit — kept only until the first
// collection: a cleanup that this collection runs restores GOGC=100 and
// lifts the limit, so a large render paces as before (its peak is far above
// the floor anyway) and a long-lived process (kptr init) never holds more
// than the floor uncollected. A GOGC or GOMEMLIMIT in the environment is the
// user's choice and is left alone.
package gcfloor

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
)

// Floor is the memory a kptr process may reach before its first collection.
const Floor = 32 << 20

// Set applies the floor to this process (once, at its start).
func Set() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(Floor)
	// Unreachable from the start, so the first collection frees it and
	// runs the cleanup.
	runtime.AddCleanup(new(sentinel), func(struct{}) { restore() }, struct{}{})
}

// sentinel is large enough and holds a pointer, so that it is an object of
// its own (never batched with others by the tiny allocator).
type sentinel struct {
	_ *int
	_ [16]byte
}

// restore is the runtime's default pacing: GOGC=100, no memory limit.
func restore() {
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
}
