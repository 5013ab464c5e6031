// Package sigverifytest builds kptr's signature verifier (cmd/kptr-sigverify)
// for tests: beside the running test binary, where package signature looks
// for it as it looks beside kptr, or into a directory of the test's choice
// (beside a kptr the test built).
package sigverifytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/kptr-dev/kptr/internal/sigwire"
)

// Build builds the verifier into dir and returns its path.
func Build(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(dir, sigwire.Name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/kptr-sigverify")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", sigwire.Name, err, b)
	}
	return out, nil
}

var beside struct {
	once sync.Once
	err  error
}

// BesideExecutable builds the verifier beside the running test binary, once
// per process: what `go test` runs lives in a directory of its own.
func BesideExecutable() error {
	beside.once.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			beside.err = err
			return
		}
		// A test binary run by hand (make test-unpriv runs the cache suite
		// as uid 999, without a Go toolchain) finds it built beside it.
		if fi, err := os.Stat(filepath.Join(filepath.Dir(exe), sigwire.Name)); err == nil && fi.Mode()&0o111 != 0 {
			return
		}
		_, beside.err = Build(filepath.Dir(exe))
	})
	return beside.err
}
