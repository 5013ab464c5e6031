package signature_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/kptr-dev/kptr/internal/sigverifytest"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestMain puts the verifier beside the test binary, where Evaluate looks
// for it as it looks beside kptr.
func TestMain(m *testing.M) {
	if err := sigverifytest.BesideExecutable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
