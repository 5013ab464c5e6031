package landlock

import (
	"os"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

var testTmp string

func TestMain(m *testing.M) {
	runtime.HandleInit()
	var err error
	if testTmp, err = os.MkdirTemp("", "kptr-runtime-test-"); err != nil {
		panic(err)
	}
	os.Chmod(testTmp, 0o755) // a function's mapped uid must reach the rootfs
	code := m.Run()
	os.RemoveAll(testTmp)
	os.Exit(code)
}
