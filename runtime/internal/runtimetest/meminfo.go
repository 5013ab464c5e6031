package runtimetest

import (
	"os"
	"strconv"
	"strings"
)

// ShmemKiB is the host's Shmem of /proc/meminfo: every page of tmpfs,
// memfds, System V and shared anonymous memory, whoever holds it (0 when
// it cannot be read).
func ShmemKiB() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Shmem:"); ok {
			if fs := strings.Fields(v); len(fs) > 0 {
				kb, _ := strconv.ParseInt(fs[0], 10, 64)
				return kb
			}
		}
	}
	return 0
}
