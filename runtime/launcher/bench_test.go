package launcher_test

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime/launcher"
)

// BenchmarkStart is one container's whole life through nsinit (Start,
// Setup, Release, Wait) of a static binary that exits at once, with the
// set-up runtime.Sandbox asks for (fresh /proc, tmpfs /dev with four nodes,
// tmpfs /tmp, masked and read-only /proc paths, read-only root, hostname,
// loopback, rlimits, every namespace), interleaved with bubblewrap running
// the same binary in the same root with every namespace. It reports the
// median of each in ms (ns/op is the pair).
func BenchmarkStart(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bwrap not installed")
	}
	root := newRoot(b)
	s := spec(root, "noread")
	ctx := context.Background()
	var ns, bw []time.Duration
	for b.Loop() {
		t0 := time.Now()
		p, err := launcher.Start(s, exe, nil, nil, nil)
		must(b, err)
		must(b, p.Setup(ctx))
		must(b, p.Release(ctx))
		st, err := p.Wait()
		must(b, err)
		if !st.Success() {
			b.Fatalf("nsinit: %v", st)
		}
		ns = append(ns, time.Since(t0))

		t0 = time.Now()
		out, err := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", root, "/",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/bin/probe", "noread").CombinedOutput()
		if err != nil {
			b.Fatalf("bwrap: %v %s", err, out)
		}
		bw = append(bw, time.Since(t0))
	}
	b.ReportMetric(medianMS(ns), "nsinit-median-ms")
	b.ReportMetric(medianMS(bw), "bwrap-median-ms")
}

func medianMS(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2]) / float64(time.Millisecond)
}
