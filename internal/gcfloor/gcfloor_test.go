package gcfloor

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

var sink [][]byte

// allocate makes n bytes of garbage in 64 KiB pieces.
func allocate(n int) {
	for i := 0; i < n>>16; i++ {
		sink = append(sink[:0], make([]byte, 64<<10))
	}
}

func numGC() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}

// Below the floor nothing is collected; the first collection restores the
// runtime's pacing (GOGC=100, no limit).
func TestFloorThenDefaultPacing(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set: the floor is left alone (TestUserSettingsWin)")
	}
	Set()
	t.Cleanup(restore)
	before := numGC()
	allocate(Floor / 2)
	if n := numGC() - before; n != 0 {
		t.Fatalf("%d collections below the floor", n)
	}
	allocate(4 * Floor) // past it: the first collection comes, and its cleanup
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) != math.MaxInt64 {
		if time.Now().After(deadline) {
			t.Fatalf("the memory limit still %d after %d collections", debug.SetMemoryLimit(-1), numGC()-before)
		}
		runtime.Gosched()
		allocate(Floor)
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC %d after the first collection, want 100", p)
	}
}

// A GOGC or GOMEMLIMIT in the environment is left as the user set it.
func TestUserSettingsWin(t *testing.T) {
	t.Setenv("GOGC", "50")
	prev := debug.SetGCPercent(50)
	defer debug.SetGCPercent(prev)
	Set()
	if p := debug.SetGCPercent(50); p != 50 {
		t.Errorf("GOGC=50 in the environment, Set made it %d", p)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Errorf("Set put a memory limit of %d despite GOGC in the environment", l)
	}
}
