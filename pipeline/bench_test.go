package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/bench/pkggen"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// timedRunner runs bundles on the host and adds up the functions' own time
// (process start to exit as the runner measures it).
type timedRunner struct {
	inner runtime.Runner
	total atomic.Int64
}

func (r *timedRunner) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	res, err := r.inner.Run(ctx, b, inv)
	r.total.Add(int64(res.Duration))
	return res, err
}

// genPackage writes a package of n ConfigMaps, 100 per file, plus a Kptfile
// naming three functions (images resolved to host fixture binaries).
func genPackage(b *testing.B, dir string, n int, commented bool) {
	kf := kptfile("bench", `pipeline:
  mutators:
    - image: cat
    - image: label
  validators:
    - image: count
`)
	if err := os.WriteFile(filepath.Join(dir, "Kptfile"), []byte(kf), 0o644); err != nil {
		b.Fatal(err)
	}
	var sb strings.Builder
	for i := 0; i < n; i++ {
		comment := ""
		if commented {
			comment = "  # the value\n"
		}
		fmt.Fprintf(&sb, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: ns-%d\n  labels:\n    app: bench\ndata:\n%s  key: value-%d\n  other: |\n    multi\n    line\n", i, i%10, comment, i)
		if i%100 == 99 || i == n-1 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%04d.yaml", i/100)), []byte(sb.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			sb.Reset()
		} else {
			sb.WriteString("---\n")
		}
	}
}

// peakRSS resets (clear_refs 5) or reads VmHWM of this process, in KiB.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v
		}
	}
	return -1
}

// BenchmarkRender renders a generated package of 1k and 10k resources in
// place through three functions (cat, label, count as a validator) and
// reports kptr's own overhead: total time minus the functions' run time, as
// a share of the total and per resource, and the peak RSS of the process.
func BenchmarkRender(b *testing.B) {
	cat := fnimage.Binary(b, "cat")
	fx := fnimage.Binary(b, "kptr-fx")
	cases := []struct {
		n         int
		commented bool
	}{{1000, false}, {10000, false}, {1000, true}}
	for _, c := range cases {
		n := c.n
		name := fmt.Sprintf("resources=%d", n)
		if c.commented {
			// a comment in every resource: those go through yaml.v3 and
			// kpt's comment copy-back, not the fast paths
			name += "/commented"
		}
		b.Run(name, func(b *testing.B) {
			src := b.TempDir()
			genPackage(b, src, n, c.commented)
			fake := &fakeResolver{fx: fx, images: map[string][]string{}, fail: map[string]error{}}
			res := func(ref string, argv ...string) { fake.images[ref] = argv }
			res("ghcr.io/kptdev/krm-functions-catalog/label:latest", "op=label", "key=rendered", "value=yes")
			res("ghcr.io/kptdev/krm-functions-catalog/count:latest", "op=count")
			catResolver := &fixtureResolver{fake: fake, bins: map[string]string{"ghcr.io/kptdev/krm-functions-catalog/cat:latest": cat}}
			measureRender(b, src, n+1, 3, catResolver)
		})
	}
}

// measureRender renders a copy of the package src in place b.N times
// (wantResources resources out, wantFns functions run) and reports
// kptr's own overhead: total time minus the functions' run time, as a
// share of the total and per resource, the peak RSS of the process, and
// the same split in CPU time.
func measureRender(b *testing.B, src string, wantResources, wantFns int, resolver Resolver) {
	n := wantResources
	var total, fnTime, selfCPU, fnCPU time.Duration
	var peak int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "pkg")
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			b.Fatal(err)
		}
		runner := &timedRunner{inner: runtime.Host{}}
		resetPeakRSS()
		b.StartTimer()
		t0 := time.Now()
		self0, children0 := cpuTimes()
		out, err := Render(context.Background(), dir, Options{Resolver: resolver, Runner: runner})
		total += time.Since(t0)
		self1, children1 := cpuTimes()
		b.StopTimer()
		selfCPU += self1 - self0
		fnCPU += children1 - children0
		if err != nil {
			b.Fatal(err)
		}
		if out.Functions != wantFns || len(out.Resources) != n {
			b.Fatalf("rendered %d resources with %d functions", len(out.Resources), out.Functions)
		}
		fnTime += time.Duration(runner.total.Load())
		if p := peakRSS(); p > peak {
			peak = p
		}
		b.StartTimer()
	}
	b.StopTimer()
	overhead := total - fnTime
	b.ReportMetric(float64(overhead.Milliseconds())/float64(b.N), "overhead-ms/op")
	b.ReportMetric(100*float64(overhead)/float64(total), "overhead-%")
	b.ReportMetric(float64(overhead.Microseconds())/float64(b.N)/float64(n), "overhead-µs/resource")
	b.ReportMetric(float64(fnTime.Milliseconds())/float64(b.N), "functions-ms/op")
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
	// the same split in CPU time, which parallelism and the machine's
	// other load do not blur: kptr's own (all its threads, GC included)
	// against the functions' processes
	b.ReportMetric(float64(selfCPU.Milliseconds())/float64(b.N), "kptr-cpu-ms/op")
	b.ReportMetric(float64(fnCPU.Milliseconds())/float64(b.N), "functions-cpu-ms/op")
	b.ReportMetric(100*float64(selfCPU)/float64(selfCPU+fnCPU), "kptr-cpu-%")
}

// BenchmarkRenderRealistic renders issue 13's realistic package
// (test/bench/pkggen: setter comments inside lists, a subpackage,
// apply-setters, set-namespace, set-labels as mutators and a validator,
// the catalog-shaped fixtures run on the host) at 50, 500 and 5,000
// resources, reporting what BenchmarkRender reports.
func BenchmarkRenderRealistic(b *testing.B) {
	fake := &fakeResolver{images: map[string][]string{}, fail: map[string]error{}}
	res := &fixtureResolver{fake: fake, bins: map[string]string{}}
	for _, f := range pkggen.Fixtures {
		res.bins[pkggen.ImageRef(f)] = fnimage.Binary(b, f)
	}
	for _, n := range []int{50, 500, 5000} {
		b.Run(fmt.Sprintf("resources=%d", n), func(b *testing.B) {
			src := filepath.Join(b.TempDir(), "pkg")
			if err := pkggen.Write(src, pkggen.Options{Resources: n}); err != nil {
				b.Fatal(err)
			}
			// the resources, both Kptfiles and setters.yaml
			measureRender(b, src, n+3, len(pkggen.Fixtures), res)
		})
	}
}

// fixtureResolver resolves the images it knows to host fixture binaries.
type fixtureResolver struct {
	fake *fakeResolver
	bins map[string]string
}

func (r *fixtureResolver) Resolve(ctx context.Context, ref string) (bundle.Bundle, error) {
	if p, ok := r.bins[ref]; ok {
		b := bundle.Bundle{Ref: ref}
		b.Config.Entrypoint = []string{p}
		return b, nil
	}
	return r.fake.Resolve(ctx, ref)
}

// cpuTimes is the CPU time (user+system) of this process and of its waited-for children.
func cpuTimes() (self, children time.Duration) {
	var s, c syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	tv := func(r *syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return tv(&s), tv(&c)
}
