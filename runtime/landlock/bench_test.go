package landlock

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
)

// BenchmarkRun/landlock is the per-call cost of a warm trivial function
// (copies stdin to stdout) in the landlock tier: every call starts its
// launcher and confiner (no prepared mode). The namespace tier's ways are
// runtime/namespace's BenchmarkRun, with the same metrics: median-ms, the
// median wall time of a call; cpu-ms/op, the CPU time per call of this
// process and its children.
func BenchmarkRun(b *testing.B) {
	input := []byte(strings.Repeat("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", 20))
	b.Run("landlock", func(b *testing.B) {
		s := landlock(b)
		bd := bundle(b, "cat")
		b.ReportAllocs()
		var ds []time.Duration
		cpu0 := cpuNow()
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			res, err := s.Run(context.Background(), bd, runtime.Invocation{Stdin: bytes.NewReader(input)})
			if err != nil || res.ExitCode != 0 || !bytes.Equal(res.Stdout, input) {
				b.Fatal(err, res.ExitCode, string(res.Stderr))
			}
			ds = append(ds, time.Since(start))
		}
		if len(ds) > 0 {
			b.ReportMetric(float64((cpuNow()-cpu0).Microseconds())/1000/float64(len(ds)), "cpu-ms/op")
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "median-ms")
		}
	})
}

// cpuNow is the CPU time (user + system) used so far by this process and
// its reaped children.
func cpuNow() time.Duration {
	var t time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			t += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return t
}
