//go:build !amd64 && !arm64

package seccomp

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Load: the landlock tier's filter is written for amd64 and arm64 only.
func Load(bool, bool) error {
	return fmt.Errorf("the landlock tier's seccomp filter is not built for this architecture")
}

// Supported: Filter is not built for this architecture.
const Supported = false

func Filter(bool, bool) []unix.SockFilter { return nil }
