package namespace

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

var testTmp string

func TestMain(m *testing.M) {
	runtime.HandleInit()
	ReexecSealed()
	var err error
	if testTmp, err = os.MkdirTemp("", "kptr-runtime-test-"); err != nil {
		panic(err)
	}
	os.Chmod(testTmp, 0o755) // a function's mapped uid must reach the rootfs
	code := m.Run()
	if n := NsinitFallbacks.Load(); n > 0 && code == 0 {
		// Here nsinit must start every run it is given: a fallback to
		// libcontainer would hide its failure behind a passing suite.
		fmt.Fprintf(os.Stderr, "FAIL: nsinit failed to start %d run(s) and libcontainer started them (last: %v)\n", n, NsinitLastFail.Load())
		code = 1
	}
	os.RemoveAll(testTmp)
	os.Exit(code)
}

// bothRootfs runs f against each way the sandbox builds its root.
func bothRootfs(t *testing.T, f func(t *testing.T, rootfs string)) {
	t.Run("bound", func(t *testing.T) { f(t, testRootfs(t)) })
	t.Run("direct", func(t *testing.T) { f(t, directRootfs(t)) })
}

var (
	sbOnce sync.Once
	sb     *Sandbox
	sbErr  error
)

func sandbox(t testing.TB) *Sandbox {
	sbOnce.Do(func() { sb, sbErr = New() })
	if sbErr != nil {
		t.Fatalf("New: %v", sbErr)
	}
	return sb
}

// run runs the hostile fixture with args and returns its output as
// "key: value" facts.
func run(t *testing.T, inv runtime.Invocation, args ...string) (runtime.Result, map[string]string) {
	t.Helper()
	return runIn(t, testRootfs(t), inv, args...)
}

// runIn is run with another rootfs (directRootfs: the sandbox's root is
// the cached rootfs itself rather than a directory of binds).
func runIn(t *testing.T, rootfs string, inv runtime.Invocation, args ...string) (runtime.Result, map[string]string) {
	t.Helper()
	b := testBundle(t, args...)
	b.Rootfs = rootfs
	res, err := sandbox(t).Run(context.Background(), b, inv)
	if err != nil {
		t.Fatalf("run %v: %v (stderr %q)", args, err, res.Stderr)
	}
	if res.ExitCode != 0 {
		t.Fatalf("run %v: exit %d, stderr %q", args, res.ExitCode, res.Stderr)
	}
	return res, facts(string(res.Stdout))
}
