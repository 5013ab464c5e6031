package namespace

import (
	"context"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/internal/runtimetest"
)

// When kptr itself is SIGKILLed (Argo CD does so 5 s after its deadline),
// the function it was running dies with it: nothing of the run is left.
func TestFunctionDiesWithKptr(t *testing.T) {
	diesWithKptr(t, "TestFunctionDiesWithKptr", func(marker string) {
		_, err := sandbox(t).Run(context.Background(), testBundle(t, "sleep-ignore", marker), runtime.Invocation{Timeout: time.Minute})
		t.Fatalf("the run ended: %v", err)
	})
}

// diesWithKptr is runtimetest.DiesWithKptr with the test sandbox's
// run-state directory.
func diesWithKptr(t *testing.T, name string, run func(marker string)) {
	t.Helper()
	runtimetest.DiesWithKptr(t, name, sandbox(t).stateDir, run)
}
