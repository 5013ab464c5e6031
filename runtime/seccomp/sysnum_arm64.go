package seccomp

import (
	"golang.org/x/sys/unix"
)

// archSysnums: arm64 has no call of Sysnums that amd64 lacks (it lacks
// several of amd64's); a name missing from commonSysnums is not a system
// call on arm64.
var archSysnums = map[string]uint32{}

// auditArch is the seccomp_data.arch of native calls (arm64 has no x32-like
// second ABI: x32Bit 0 disables that check).
const (
	auditArch = unix.AUDIT_ARCH_AARCH64
	x32Bit    = 0
)
