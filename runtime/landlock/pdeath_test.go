package landlock

import (
	"testing"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/internal/runtimetest"
)

// diesWithKptr is runtimetest.DiesWithKptr with the landlock tier's
// run-state directory.
func diesWithKptr(t *testing.T, name string, run func(marker string)) {
	t.Helper()
	runtimetest.DiesWithKptr(t, name, runtime.DefaultStateDir(), run)
}
