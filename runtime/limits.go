package runtime

import (
	_ "github.com/opencontainers/cgroups/devices"
)

// RootHostIDBase is where container ids 0..65535 land on the host when kptr
// runs as root: a range no real account uses, so a function never holds host
// root (or any host user's uid) even though kptr does.
const (
	RootHostIDBase = 1 << 30
	RootHostIDSize = 65536
)

// Limits bound what one run may use.
type Limits struct {
	// Memory in bytes, enforced by the namespace tier through the memory
	// cgroup when cgroups are delegated (see Features.Cgroups), by the
	// landlock tier through RLIMIT_DATA and its watchdog; 0 means no limit.
	Memory int64
	// Pids bounds the processes of a run: RLIMIT_NPROC inside the run's own
	// user namespace always, and the pids cgroup when delegated.
	Pids int64
	// TmpSize bounds each tmpfs (/tmp, $HOME) in bytes; the landlock
	// tier's run directory (its $HOME and $TMPDIR) holds twice as much.
	TmpSize int64
	// NoFile is RLIMIT_NOFILE; 0 keeps kptr's own.
	NoFile uint64
}

// DefaultLimits are applied by New unless overridden.
var DefaultLimits = Limits{Memory: 2 << 30, Pids: 1024, TmpSize: 256 << 20}
