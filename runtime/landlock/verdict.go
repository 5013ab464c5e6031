package landlock

import (
	"fmt"

	"github.com/kptr-dev/kptr/runtime"
)

const verdictLandlock = "landlock"

var probeLandlock = Probe

// probeLandlockCached is probeLandlock with its verdict cached as
// ProbeCached caches the namespace tier's, for the state directory dir.
func ProbeCached(dir string, fresh bool) (results []runtime.ProbeResult, cached bool) {
	if runtime.EnsurePrivateDir(dir) != nil {
		return probeLandlock(dir), false // which reports the directory's failure
	}
	key, ok := runtime.VerdictKeyNow(verdictLandlock, dir, fmt.Sprintf("landlock-abi=%d", abiNow()))
	if ok && !fresh {
		if v, hit := runtime.LoadVerdict(key); hit {
			return v.Results, true
		}
	}
	results = probeLandlock(dir)
	if ok {
		runtime.KeepVerdict(runtime.Verdict{Key: key, Results: results})
	}
	return results, false
}

// abiNow is the kernel's Landlock ABI, part of the verdict's key.
func abiNow() int {
	abi, _ := landlockVersion()
	return abi
}
