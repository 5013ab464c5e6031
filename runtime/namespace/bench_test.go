package namespace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// benchInput is a small ResourceList, what a trivial function copies.
var benchInput = []byte(strings.Repeat("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", 20))

// BenchmarkRun compares, in one run, the per-call cost of a warm trivial
// function (copies stdin to stdout) executed bare, under bubblewrap with
// every namespace, in kptr's sandbox started cold (kptr), prepared ahead
// (kptr-pipelined, kptr-prepared: see benchWays), and under podman with runc.
// init-rss-KB / init-anon-KB are the resident and private (anonymous) memory
// of kptr's container init just before it execs the function, the sandbox's
// own cost per concurrent run; B/op is what the calling kptr process
// allocates per run; cpu-ms/op the CPU time per call of this process and its
// children (the container init, the function).
func BenchmarkRun(b *testing.B) {
	rootfs := testRootfs(b)
	benchWays(b, directRootfs(b), []string{"/usr/local/bin/function", "cat"}, benchInput, func(b *testing.B, out []byte) {
		if !bytes.Equal(out, benchInput) {
			b.Fatalf("output %q", out)
		}
	})
	b.Run("podman-runc", func(b *testing.B) {
		execRun(b, benchInput, func(*testing.B, []byte) {}, "podman", "run", "--rm", "-i", "--runtime", "runc", "--network", "none",
			"--rootfs", rootfs, "/usr/local/bin/function", "cat")
	})
}

// BenchmarkRunKRM is BenchmarkRun with a function shaped like the catalog's
// (the set-labels fixture: kyaml's fn framework, a Go binary that parses
// and writes the ResourceList): the function itself now takes time, which
// a pipeline can overlap with preparing the next function's sandbox.
func BenchmarkRunKRM(b *testing.B) {
	rootfs := krmRootfs(b)
	var in bytes.Buffer
	in.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: fc\n  data:\n    env: prod\nitems:\n")
	for i := range 20 {
		fmt.Fprintf(&in, "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: cm-%d\n  data:\n    k: v\n", i)
	}
	benchWays(b, rootfs, []string{"/usr/local/bin/function"}, in.Bytes(), func(b *testing.B, out []byte) {
		if n := bytes.Count(out, []byte("env: prod")); n < 20 {
			b.Fatalf("%d labels set: %q", n, out)
		}
	})
}

var (
	krmOnce sync.Once
	krmDir  string
)

// krmRootfs is directRootfs with the set-labels fixture as the function.
func krmRootfs(b *testing.B) string {
	krmOnce.Do(func() {
		dir := filepath.Join(testTmp, "cache", "rootfs-krm")
		if out, err := exec.Command("cp", "-a", directRootfs(b), dir).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		must(b, os.Remove(filepath.Join(dir, "usr/local/bin/function")))
		copyFile(b, fnimage.Binary(b, "set-labels"), filepath.Join(dir, "usr/local/bin/function"), 0o755)
		krmDir = dir
	})
	if krmDir == "" {
		b.Fatal("krm rootfs could not be built")
	}
	return krmDir
}

// execRun benchmarks a command that reads input on stdin.
func execRun(b *testing.B, input []byte, check func(*testing.B, []byte), name string, args ...string) {
	if _, err := exec.LookPath(name); err != nil {
		b.Skipf("%s not installed", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Skipf("%s does not work here: %v: %s", name, err, firstLine(out))
	}
	b.ReportAllocs()
	var ds durations
	cpu0 := cpuNow()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command(name, args...)
		cmd.Stdin = bytes.NewReader(input)
		out, err := cmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
		check(b, out)
	}
	if filepath.IsAbs(name) {
		// bare only: bwrap's and podman's processes inside their pid
		// namespace are never accounted to us, their CPU would be undercounted
		reportCPU(b, cpu0, len(ds))
	}
	ds.report(b)
}

// benchWays runs the function argv (a path inside rootfs, which must be
// usable as the sandbox's root directly) on input, per call:
//   - bare: exec of the binary on the host, no isolation;
//   - bwrap: bubblewrap with every namespace, the rootfs bound read-only;
//   - kptr: (*Sandbox).Run, the sandbox started cold for every call;
//   - kptr-libcontainer: the same, started by libcontainer (launch.go);
//   - (the landlock tier's row is runtime/landlock's BenchmarkRun);
//   - kptr-pipelined: a sequence of calls as a pipeline of functions makes
//     them: before each Run, Prepare for the next call (pipeline/ does so for
//     the next function when its image is cached), so the next sandbox
//     starts while this call runs; back to back, nothing in between;
//   - kptr-prepared: one call whose sandbox is already prepared (untimed
//     Prepare, waited for): release, the function, its output. What a call
//     costs when the previous function ran at least as long as a start.
//
// prepared-used is the share of calls that got a prepared sandbox.
func benchWays(b *testing.B, rootfs string, argv []string, input []byte, check func(*testing.B, []byte)) {
	b.Run("bare", func(b *testing.B) { execRun(b, input, check, rootfs+argv[0], argv[1:]...) })
	b.Run("bwrap", func(b *testing.B) {
		execRun(b, input, check, "bwrap", append([]string{"--unshare-all", "--die-with-parent", "--ro-bind", rootfs, "/",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}, argv...)...)
	})
	bd := testBundle(b)
	bd.Rootfs = rootfs
	bd.Config.Entrypoint, bd.Config.Cmd = argv, nil
	inv := func() runtime.Invocation { return runtime.Invocation{Stdin: bytes.NewReader(input)} }
	cold := func(b *testing.B, s runtime.Runner) {
		b.ReportAllocs()
		var ds durations
		cpu0 := cpuNow()
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			res, err := s.Run(context.Background(), bd, inv())
			if err != nil || res.ExitCode != 0 {
				b.Fatal(err, res.ExitCode, string(res.Stderr))
			}
			ds = append(ds, time.Since(start))
			check(b, res.Stdout)
		}
		reportCPU(b, cpu0, len(ds))
		ds.report(b)
		if sb, ok := s.(*Sandbox); ok {
			rss, anon := initRSS(b, sb, bd)
			b.ReportMetric(float64(rss), "init-rss-KB")
			b.ReportMetric(float64(anon), "init-anon-KB")
		}
	}
	// kptr: the writable overlay view where the kernel allows it;
	// kptr-readonly: the same with the overlay forced off (read-only image,
	// tmpfs /tmp and $HOME), what the difference costs per run.
	b.Run("kptr", func(b *testing.B) { cold(b, sandbox(b)) })
	// kptr-libcontainer: the same sandbox started by libcontainer (the
	// launcher before nsinit, still used where nsinit cannot start a run).
	b.Run("kptr-libcontainer", func(b *testing.B) {
		s, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-bench-lc")), WithLauncher(LauncherLibcontainer))
		must(b, err)
		defer s.Close()
		cold(b, s)
	})
	b.Run("kptr-readonly", func(b *testing.B) {
		s, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-bench-ro")), runtime.WithOverlay(false))
		must(b, err)
		defer s.Close()
		cold(b, s)
	})
	prepBench := func(b *testing.B, ahead bool, opts ...runtime.Option) {
		s, err := New(append([]runtime.Option{runtime.WithStateDir(filepath.Join(testTmp, "state-bench"))}, opts...)...)
		must(b, err)
		defer s.Close()
		ctx := context.Background()
		if ahead {
			s.Prepare(ctx, bd, inv())
		}
		b.ReportAllocs()
		var ds durations
		n := 0
		hits := s.prepHits.Load()
		cpu0 := cpuNow()
		b.ResetTimer()
		for b.Loop() {
			if !ahead {
				b.StopTimer()
				s.Prepare(ctx, bd, inv())
				waitPrepared(s)
				b.StartTimer()
			}
			start := time.Now()
			if ahead {
				s.Prepare(ctx, bd, inv()) // the next call's, while this one runs
			}
			res, err := s.Run(ctx, bd, inv())
			if err != nil || res.ExitCode != 0 {
				b.Fatal(err, res.ExitCode, string(res.Stderr))
			}
			ds = append(ds, time.Since(start))
			n++
			check(b, res.Stdout)
		}
		b.StopTimer()
		if ahead {
			reportCPU(b, cpu0, n) // (kptr-prepared: would count the untimed starts)
		}
		ds.report(b)
		b.ReportMetric(float64(s.prepHits.Load()-hits)/float64(max(n, 1)), "prepared-used")
	}
	b.Run("kptr-pipelined", func(b *testing.B) { prepBench(b, true) })
	b.Run("kptr-prepared", func(b *testing.B) { prepBench(b, false) })
	b.Run("kptr-prepared-readonly", func(b *testing.B) { prepBench(b, false, runtime.WithOverlay(false)) })
}

// waitPrepared waits until every prepared sandbox of s is set up.
func waitPrepared(s *Sandbox) {
	s.mu.Lock()
	prs := append([]*prepared(nil), s.prepared...)
	s.mu.Unlock()
	for _, pr := range prs {
		<-pr.ready
	}
}

// durations are per-call wall times; the median is robust against the
// noise of a shared machine.
type durations []time.Duration

// cpuNow is the CPU time (user + system) used so far by this process and
// its reaped children: the sandbox's parent side, the container inits and
// the functions.
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

// reportCPU reports the CPU time per call since cpu0 (cpuNow), in ms.
func reportCPU(b *testing.B, cpu0 time.Duration, n int) {
	if n > 0 {
		b.ReportMetric(float64((cpuNow()-cpu0).Microseconds())/1000/float64(n), "cpu-ms/op")
	}
}

func (ds durations) report(b *testing.B) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "median-ms")
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// initRSS starts one sandbox without letting it exec the function (the
// container init then waits to be released) and reads the init's resident
// set: the memory the sandbox itself costs per run, on top of the function.
func initRSS(b *testing.B, s *Sandbox, bd bundle.Bundle) (rssKB, anonKB int64) {
	st, err := s.setup(bd, runtime.Invocation{})
	must(b, err)
	defer st.destroy(s.log)
	must(b, st.ct.start(false))
	pid, err := st.ct.pid()
	must(b, err)
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL); _, _ = st.ct.wait() }()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(b, err)
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "VmRSS:" {
			rssKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) >= 2 && f[0] == "RssAnon:" {
			anonKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return rssKB, anonKB
}
