//go:build !amd64 && !arm64

package runtime

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// loadSeccomp: the landlock tier's filter is written for amd64 and arm64 only.
func loadSeccomp(bool, bool) error {
	return fmt.Errorf("the landlock tier's seccomp filter is not built for this architecture")
}

// ownSeccompFilter: seccompFilter is not built for this architecture.
const ownSeccompFilter = false

func seccompFilter(bool, bool) []unix.SockFilter { return nil }
