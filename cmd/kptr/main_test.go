package main

import (
	"os"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
)

// TestMain lets this test binary act as a sandbox probe child or container
// init, as kptr itself does in startup.
func TestMain(m *testing.M) {
	runtime.HandleInit()
	os.Exit(m.Run())
}
