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

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// timedRunner runs bundles on the host and adds up the functions' own time
// (process start to exit as the runner measures it).
type timedRunner struct {
	inner runtime.Runner
	total atomic.Int64
}

func (r *timedRunner) Run(ctx context.Context, b cache.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	res, err := r.inner.Run(ctx, b, inv)
	r.total.Add(int64(res.Duration))
	return res, err
}

// genPackage writes a package of n ConfigMaps (or, with setters, kpt's
// setter shape: see setterResource), 100 per file, plus a Kptfile naming
// three functions (images resolved to host fixture binaries).
func genPackage(b *testing.B, dir string, n int, commented, setters bool) {
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
		if setters {
			sb.WriteString(setterResource(i))
			if i%100 == 99 || i == n-1 {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%04d.yaml", i/100)), []byte(sb.String()), 0o644); err != nil {
					b.Fatal(err)
				}
				sb.Reset()
			} else {
				sb.WriteString("---\n")
			}
			continue
		}
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

// setterResource is resource i of a package in kpt's setter shape: 40%
// Deployments with setter comments on fields, on fields of container
// list items and on scalar list items, 30% Services with a commented
// port, 30% ConfigMaps.
func setterResource(i int) string {
	switch i % 10 {
	case 0, 1, 2, 3:
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d # kpt-set: app-${suffix}
  labels:
    app: app-%[1]d
spec:
  replicas: 3 # kpt-set: ${replicas}
  selector:
    matchLabels:
      app: app-%[1]d
  template:
    metadata:
      labels:
        app: app-%[1]d
    spec:
      containers:
      - name: app
        image: nginx:1.25 # kpt-set: ${image}
        args:
        - --port=8080 # kpt-set: --port=${port}
        - --verbose
        ports:
        - containerPort: 8080 # kpt-set: ${port}
        env:
        - name: MODE
          value: prod # kpt-set: ${mode}
        resources:
          limits:
            memory: 128Mi # kpt-set: ${memory}
`, i)
	case 4, 5, 6:
		return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: svc-%[1]d
spec:
  selector:
    app: app-%[1]d
  ports:
  - port: 80
    targetPort: 8080 # kpt-set: ${port}
`, i)
	}
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  mode: prod # kpt-set: ${mode}\n", i)
}

func copyTree(b *testing.B, src, dst string) {
	entries, err := os.ReadDir(src)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			b.Fatal(err)
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
		n                  int
		commented, setters bool
	}{{1000, false, false}, {10000, false, false}, {1000, true, false}, {1000, false, true}}
	for _, c := range cases {
		n := c.n
		name := fmt.Sprintf("resources=%d", n)
		if c.commented {
			// a comment in every resource: those go through yaml.v3 and
			// kpt's comment copy-back, not the fast paths
			name += "/commented"
		}
		if c.setters {
			// kpt's setter shape, comments inside lists (copyWalk)
			name += "/setters"
		}
		b.Run(name, func(b *testing.B) {
			src := b.TempDir()
			genPackage(b, src, n, c.commented, c.setters)
			fake := &fakeResolver{fx: fx, images: map[string][]string{}, fail: map[string]error{}}
			res := func(ref string, argv ...string) { fake.images[ref] = argv }
			res("ghcr.io/kptdev/krm-functions-catalog/label:latest", "op=label", "key=rendered", "value=yes")
			res("ghcr.io/kptdev/krm-functions-catalog/count:latest", "op=count")
			catResolver := &benchResolver{fake: fake, cat: cat}
			var total, fnTime, selfCPU, fnCPU time.Duration
			var peak int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "pkg")
				copyTree(b, src, dir)
				runner := &timedRunner{inner: runtime.Host{}}
				resetPeakRSS()
				b.StartTimer()
				t0 := time.Now()
				self0, children0 := cpuTimes()
				out, err := Render(context.Background(), dir, Options{Resolver: catResolver, Runner: runner})
				total += time.Since(t0)
				self1, children1 := cpuTimes()
				b.StopTimer()
				selfCPU += self1 - self0
				fnCPU += children1 - children0
				if err != nil {
					b.Fatal(err)
				}
				if out.Functions != 3 || len(out.Resources) != n+1 {
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
			// the same split in CPU time, which parallelism and the
			// machine's other load do not blur: kptr's own (all its
			// threads, GC included) against the functions' processes
			b.ReportMetric(float64(selfCPU.Milliseconds())/float64(b.N), "kptr-cpu-ms/op")
			b.ReportMetric(float64(fnCPU.Milliseconds())/float64(b.N), "functions-cpu-ms/op")
			b.ReportMetric(100*float64(selfCPU)/float64(selfCPU+fnCPU), "kptr-cpu-%")
		})
	}
}

// benchResolver sends "cat" to the cat fixture and the rest to fakeResolver.
type benchResolver struct {
	fake *fakeResolver
	cat  string
}

func (r *benchResolver) Resolve(ctx context.Context, ref string) (cache.Bundle, error) {
	if ref == "ghcr.io/kptdev/krm-functions-catalog/cat:latest" {
		b := cache.Bundle{Ref: ref}
		b.Config.Entrypoint = []string{r.cat}
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
