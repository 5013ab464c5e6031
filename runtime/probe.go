package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Status of one probe.
type Status string

const (
	StatusOK       Status = "ok"
	StatusDegraded Status = "degraded" // works through a fallback, or a limit is not enforced
	StatusFailed   Status = "failed"   // the sandbox cannot run
)

// ProbeResult is what one prerequisite probe found.
type ProbeResult struct {
	Name   string // userns, mount, proc, netns, ipc-uts, cgroupns, overlay, cgroups, seccomp
	Status Status
	Detail string
	// Fix says which pod securityContext field or node setting fixes a
	// failed or degraded probe.
	Fix string
}

// ProbeError is returned by New when a required probe failed.
type ProbeError struct{ Result ProbeResult }

func (e *ProbeError) Error() string {
	return fmt.Sprintf("sandbox unavailable: probe %q failed: %s", e.Result.Name, e.Result.Detail)
}

// Required reports the first failed probe, if any.
func Required(results []ProbeResult) error {
	for _, r := range results {
		if r.Status == StatusFailed {
			return &ProbeError{Result: r}
		}
	}
	return nil
}

// CanMapRange: kptr is root with the whole uid/gid space mapped (the
// initial user namespace, or one that maps the range functions get), so it
// may give each run container ids 0-65535 on host ids RootHostIDBase+.
// Root inside a user namespace that maps only itself is treated as
// unprivileged: one id, container root.
func CanMapRange() bool {
	if os.Geteuid() != 0 {
		return false
	}
	covers := func(file string) bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		for _, l := range strings.Split(string(b), "\n") {
			var in, out, n uint64
			if _, err := fmt.Sscan(l, &in, &out, &n); err == nil && in <= RootHostIDBase && in+n >= RootHostIDBase+RootHostIDSize {
				return true
			}
		}
		return false
	}
	return covers("/proc/self/uid_map") && covers("/proc/self/gid_map")
}

// RemoveTree removes dir like os.RemoveAll, first making every directory
// below it searchable and writable by its owner (a function may leave a
// mode-000 directory in its upper layer; unprivileged, kptr would otherwise
// fail to remove it).
func RemoveTree(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	var fix func(string)
	fix = func(d string) {
		_ = os.Chmod(d, 0o700)
		des, _ := os.ReadDir(d)
		for _, de := range des {
			if de.IsDir() {
				fix(filepath.Join(d, de.Name()))
			}
		}
	}
	fix(dir)
	_ = os.RemoveAll(dir)
}
