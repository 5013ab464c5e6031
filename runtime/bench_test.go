package runtime

import (
	"fmt"
	"os"
	"strconv"

	"github.com/opencontainers/runc/libcontainer"

	"bytes"
	"context"
	"github.com/kptr-dev/kptr/cache"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchInput is a small ResourceList, what a trivial function copies.
var benchInput = []byte(strings.Repeat("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", 20))

// BenchmarkRun compares, in one run, the per-call cost of a warm trivial
// function (copies stdin to stdout) executed bare, under bubblewrap with
// every namespace, in kptr's sandbox, and under podman with runc.
// init-rss-KB / init-anon-KB are the resident and private (anonymous) memory
// of kptr's container init just before it execs the function, the sandbox's
// own cost per concurrent run; B/op is what the calling kptr process
// allocates per run.
func BenchmarkRun(b *testing.B) {
	rootfs := testRootfs(b)
	fn := rootfs + "/usr/local/bin/function"
	check := func(b *testing.B, out []byte) {
		if !bytes.Equal(out, benchInput) {
			b.Fatalf("output %q", out)
		}
	}
	execRun := func(b *testing.B, name string, args ...string) {
		if _, err := exec.LookPath(name); err != nil {
			b.Skipf("%s not installed", name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Stdin = bytes.NewReader(benchInput)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Skipf("%s does not work here: %v: %s", name, err, firstLine(out))
		}
		b.ReportAllocs()
		var ds durations
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			cmd := exec.Command(name, args...)
			cmd.Stdin = bytes.NewReader(benchInput)
			out, err := cmd.Output()
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			check(b, out)
		}
		ds.report(b)
	}
	b.Run("bare", func(b *testing.B) { execRun(b, fn, "cat") })
	b.Run("bwrap", func(b *testing.B) {
		broot := directRootfs(b)
		execRun(b, "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", broot, "/",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/usr/local/bin/function", "cat")
	})
	b.Run("kptr", func(b *testing.B) {
		s := sandbox(b)
		bd := bundle(b, "cat")
		bd.Rootfs = directRootfs(b)
		b.ReportAllocs()
		var ds durations
		b.ResetTimer()
		for b.Loop() {
			start := time.Now()
			res, err := s.Run(context.Background(), bd, Invocation{Stdin: bytes.NewReader(benchInput)})
			if err != nil || res.ExitCode != 0 {
				b.Fatal(err, res.ExitCode, string(res.Stderr))
			}
			ds = append(ds, time.Since(start))
			check(b, res.Stdout)
		}
		ds.report(b)
		rss, anon := initRSS(b, s, bd)
		b.ReportMetric(float64(rss), "init-rss-KB")
		b.ReportMetric(float64(anon), "init-anon-KB")
	})
	b.Run("podman-runc", func(b *testing.B) {
		execRun(b, "podman", "run", "--rm", "-i", "--runtime", "runc", "--network", "none",
			"--rootfs", rootfs, "/usr/local/bin/function", "cat")
	})
}

// durations are per-call wall times; the median is robust against the
// noise of a shared machine.
type durations []time.Duration

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
// container init then waits on its exec fifo) and reads the init's resident
// set: the memory the sandbox itself costs per run, on top of the function.
func initRSS(b *testing.B, s *Sandbox, bd cache.Bundle) (rssKB, anonKB int64) {
	proc, err := resolveProcess(bd.Rootfs, bd.Config, Invocation{}, s.feat.Root)
	must(b, err)
	entries, err := s.topEntries(bd.Rootfs)
	must(b, err)
	spec := runSpec{ID: "kptr-rss-probe", Image: bd.Rootfs, Entries: entries, Proc: proc, Limits: s.limits, Feat: s.feat}
	spec.Direct = s.directRoot(bd.Rootfs, spec)
	if !spec.Direct {
		b.Fatal("bench rootfs is not direct")
	}
	cfg, err := buildConfig(spec)
	must(b, err)
	c, err := libcontainer.Create(s.stateDir, spec.ID, cfg)
	must(b, err)
	defer c.Destroy()
	p := &libcontainer.Process{Args: proc.Args, Env: proc.Env, Cwd: proc.Cwd, Init: true}
	must(b, c.Start(p))
	defer func() { _ = c.Signal(syscall.SIGKILL); _, _ = p.Wait() }()
	pid, err := p.Pid()
	must(b, err)
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(b, err)
	for _, l := range strings.Split(string(st), "\n") {
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
