package runtime_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/namespace"
	_ "github.com/kptr-dev/kptr/runtime/tiers"
)

var testTmp string

func TestMain(m *testing.M) {
	runtime.HandleInit()
	namespace.ReexecSealed()
	var err error
	if testTmp, err = os.MkdirTemp("", "kptr-runtime-test-"); err != nil {
		panic(err)
	}
	os.Chmod(testTmp, 0o755) // a function's mapped uid must reach the rootfs
	code := m.Run()
	closeTiers()
	if n := namespace.NsinitFallbacks.Load(); n > 0 && code == 0 {
		// Here nsinit must start every run it is given: a fallback to
		// libcontainer would hide its failure behind a passing suite.
		fmt.Fprintf(os.Stderr, "FAIL: nsinit failed to start %d run(s) and libcontainer started them (last: %v)\n", n, namespace.NsinitLastFail.Load())
		code = 1
	}
	os.RemoveAll(testTmp)
	os.Exit(code)
}

// opened holds each registered tier's sandbox, opened once per test binary.
var opened struct {
	sync.Mutex
	sb  map[string]runtime.Sandbox
	err map[string]error
}

// open returns the tier's sandbox. The first tier --sandbox=auto tries
// must open here (its failure fails the test); another tier whose probes
// fail here is skipped, saying why (a kernel without Landlock).
func open(t testing.TB, tr runtime.Tier) runtime.Sandbox {
	t.Helper()
	opened.Lock()
	defer opened.Unlock()
	name := tr.Info().Name
	if opened.sb == nil {
		opened.sb, opened.err = map[string]runtime.Sandbox{}, map[string]error{}
	}
	sb, ok := opened.sb[name]
	err := opened.err[name]
	if !ok && err == nil {
		sb, err = tr.Open()
		opened.sb[name], opened.err[name] = sb, err
	}
	if err != nil {
		if tr.Info().Auto == 1 {
			t.Fatalf("%s tier: %v", name, err)
		}
		t.Skipf("%s tier unavailable here: %v", name, err)
	}
	return sb
}

func closeTiers() {
	for _, sb := range opened.sb {
		if sb != nil {
			sb.Close()
		}
	}
}
