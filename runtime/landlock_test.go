package runtime

import (
	"context"
	"sync"
	"testing"
)

var (
	llOnce sync.Once
	ll     *Landlock
	llErr  error
)

// landlock is the landlock tier shared by the tests (skipped where the
// kernel has no Landlock).
func landlock(t testing.TB) *Landlock {
	llOnce.Do(func() { ll, llErr = NewLandlock() })
	if llErr != nil {
		if landlockABI() == 0 {
			t.Skipf("no Landlock here: %v", llErr)
		}
		t.Fatalf("NewLandlock: %v", llErr)
	}
	return ll
}

func TestLandlockSmoke(t *testing.T) {
	for _, args := range [][]string{{"id"}, {"env"}, {"read", "/etc/passwd", "/proc/self/status"}, {"connect", "127.0.0.1:22"}, {"unshare"}} {
		res, err := landlock(t).Run(context.Background(), bundle(t, args...), Invocation{})
		t.Logf("%v: err %v exit %d\n%s\n%s", args, err, res.ExitCode, res.Stdout, res.Stderr)
	}
}
