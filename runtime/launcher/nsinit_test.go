package launcher_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	// kptr links libcontainer's nsenter constructor too: the tests run with
	// both, each acting only in its own init.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/runtime/launcher"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// The tests run as root and as uid 999 without capabilities (the Makefile's
// run-unpriv way): as root container ids map to an unprivileged range, as
// uid 999 only container root is mapped, to 999.
const (
	rootHostIDBase = 1 << 30 // as runtime/config.go maps them
	rootHostIDSize = 65536
	notInitArg     = "__kptr_not_nsinit"
)

var (
	exe     string   // a sealed memfd copy of this test binary: the init
	exeFile *os.File // holds exe's descriptor open
	testTmp string
	probe   string // test/fixtures/hostile, static
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == launcher.InitArg || os.Args[1] == notInitArg) {
		// The constructor let this process through to Go: say what it
		// left (TestConstructorInert).
		inertReport()
		os.Exit(0)
	}
	var err error
	if exe, err = sealedSelf(); err != nil {
		fmt.Fprintln(os.Stderr, "sealed copy:", err)
		os.Exit(1)
	}
	if probe, err = fnimage.Compile("hostile"); err != nil {
		fmt.Fprintln(os.Stderr, "fixture:", err)
		os.Exit(1)
	}
	if testTmp, err = os.MkdirTemp("", "kptr-nsinit-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(testTmp, 0o755) // the functions' mapped uids must reach the roots
	code := m.Run()
	os.RemoveAll(testTmp)
	os.Exit(code)
}

// sealedSelf copies the test binary into a sealed memfd: the container's
// mapped uids cannot reach go test's private build directory, and the
// runtime execs a sealed copy too.
func sealedSelf() (string, error) {
	fd, err := unix.MemfdCreate("nsinit-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), "memfd")
	exeFile = f // open for the life of the test binary
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return "", err
	}
	defer src.Close()
	if _, err := io.Copy(f, src); err != nil {
		return "", err
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		return "", err
	}
	return "/proc/self/fd/" + strconv.Itoa(fd), nil
}

func inertReport() {
	fmt.Printf("go: started %s\n", os.Args[1])
	for _, fd := range []int{3, 4} {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		fmt.Printf("fd%d: %d %v\n", fd, flags, err)
	}
}

// newRoot is a root filesystem for one test: the probe as /bin/probe,
// mount points /proc /dev /tmp, /work (the cwd) and /etc.
func newRoot(t testing.TB) string {
	t.Helper()
	root, err := os.MkdirTemp(testTmp, "root-")
	must(t, err)
	must(t, os.Chmod(root, 0o755))
	for _, d := range []string{"bin", "proc", "dev", "tmp", "work", "etc"} {
		must(t, os.Mkdir(filepath.Join(root, d), 0o755))
	}
	b, err := os.ReadFile(probe)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "bin/probe"), b, 0o755))
	return root
}

// spec is the container runtime.Sandbox builds, for root.
func spec(root string, args ...string) *launcher.Spec {
	s := &launcher.Spec{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC |
			unix.CLONE_NEWUTS | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP,
		Root: root,
		Mounts: []launcher.Mount{
			{Source: "proc", Target: "/proc", FSType: "proc", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
			{Source: "tmpfs", Target: "/dev", FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_STRICTATIME | unix.MS_NOEXEC, Data: "mode=755,size=64k"},
			{Source: "tmpfs", Target: "/tmp", FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: "mode=1777,size=1m"},
		},
		Devices: []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"},
		MaskPaths: []string{"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
			"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
			"/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"},
		ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		ReadonlyRoot:  true,
		Hostname:      "nsinit-test",
		Loopback:      true,
		OOMScoreAdj:   1000,
		Rlimits: []launcher.Rlimit{
			{Resource: unix.RLIMIT_NOFILE, Cur: 300, Max: 300},
			{Resource: unix.RLIMIT_CORE},
		},
		Umask: 0o022,
		Cwd:   "/work",
		Args:  append([]string{"/bin/probe"}, args...),
		Env:   []string{"PATH=/bin", "ONLY=this"},
	}
	if os.Geteuid() == 0 {
		m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: rootHostIDBase, Size: rootHostIDSize}}
		s.UIDMappings, s.GIDMappings, s.Setgroups = m, m, true
	} else {
		s.UIDMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		s.GIDMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return s
}

type result struct {
	out   string
	facts map[string]string
	state *os.ProcessState
}

// run starts, sets up, releases and waits for one container; an error of
// Setup or Release is returned (the init reaped).
func run(t *testing.T, s *launcher.Spec, stdin string) (result, error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	must(t, err)
	defer inR.Close()
	_, err = inW.WriteString(stdin)
	must(t, err)
	inW.Close()
	outR, outW, err := os.Pipe()
	must(t, err)
	defer outR.Close()
	p, err := launcher.Start(s, exe, inR, outW, outW)
	outW.Close()
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.Setup(ctx)
	if err == nil {
		err = p.Release(ctx)
	}
	if err != nil {
		p.Kill()
		p.Wait()
		return result{}, err
	}
	b, err := io.ReadAll(io.LimitReader(outR, 1<<20))
	must(t, err)
	st, err := p.Wait()
	must(t, err)
	return result{out: string(b), facts: facts(string(b)), state: st}, nil
}

func facts(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k] = v
		}
	}
	return m
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestContainer checks every part of the set-up from inside, as container
// root: the case where a forgotten capability drop would show.
func TestContainer(t *testing.T) {
	root := newRoot(t)
	res, err := run(t, spec(root, "container"), "some input\n")
	must(t, err)
	if !res.state.Success() {
		t.Fatalf("probe: %v\n%s", res.state, res.out)
	}
	f := res.facts
	want := map[string]string{
		"ids":                   "0 0 0 0 groups []",
		"CapInh":                "0000000000000000",
		"CapPrm":                "0000000000000000",
		"CapEff":                "0000000000000000",
		"CapBnd":                "0000000000000000",
		"CapAmb":                "0000000000000000",
		"NoNewPrivs":            "1",
		"Seccomp":               "0",
		"hostname":              "nsinit-test",
		"netdev":                "lo",
		"lo":                    "up=true",
		"read /proc/keys":       "0 bytes", // masked files (kcore is missing in this kernel)
		"read /proc/timer_list": "0 bytes",
		"read /proc/acpi":       "0 entries <nil>",
		"sysctl write":          "open /proc/sys/net/ipv4/ip_forward: read-only file system",
		"dev":                   "fd null random stderr stdin stdout urandom zero",
		"env":                   "PATH=/bin ONLY=this",
		"cwd":                   "/work <nil>",
		"rlimit nofile":         "300 300", // Go raises the soft limit to the hard one
		"rlimit core":           "0 0",
		"oom_score_adj":         "1000",
		"stdin":                 `"some input\n" <nil>`,
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s: %q, want %q", k, f[k], v)
		}
	}
	// Mounts: the root read-only, /proc a fresh procfs, /dev and /tmp the
	// tmpfs mounts of the spec, /proc/sys read-only; no host path.
	mounts := map[string]string{}
	for k, v := range f {
		if p, ok := strings.CutPrefix(k, "mount "); ok {
			mounts[p] = v
		}
	}
	for p, want := range map[string]string{
		"/":          "ro,",
		"/proc":      "proc rw,nosuid,nodev,noexec",
		"/dev":       "tmpfs rw,nosuid,noexec",
		"/tmp":       "tmpfs rw,nosuid,nodev",
		"/proc/sys":  "ro,",
		"/proc/keys": "", // masked: the new /dev/null bound on it
	} {
		got, ok := mounts[p]
		if !ok {
			t.Errorf("no mount on %s: %v", p, mounts)
		} else if fields := strings.Fields(got); p == "/" || p == "/proc/sys" {
			if len(fields) < 2 || !strings.HasPrefix(fields[1], want) {
				t.Errorf("mount %s: %q, want read-only", p, got)
			}
		} else if !strings.HasPrefix(got, want) {
			t.Errorf("mount %s: %q, want %q…", p, got, want)
		}
	}
	if !strings.Contains(mounts["/tmp"], "size=1024k") {
		t.Errorf("mount /tmp: %q, want the spec's size", mounts["/tmp"])
	}
	for p := range mounts {
		if strings.HasPrefix(p, root) || strings.HasPrefix(p, testTmp) {
			t.Errorf("host path %s visible in the container", p)
		}
	}
	// The cgroup namespace is the init's own, rooted where it started.
	host, err := os.Readlink("/proc/self/ns/cgroup")
	must(t, err)
	if f["cgroupns"] == "" || f["cgroupns"] == host {
		t.Errorf("cgroup namespace %q, host's %q", f["cgroupns"], host)
	}
	for _, l := range strings.Fields(f["cgroup"]) {
		if !strings.HasSuffix(l, ":/") {
			t.Errorf("cgroup %q: not the namespace's root", l)
		}
	}
}

// TestFunctionUser: as root, the function runs as the spec's uid and gid
// with no supplementary group; as uid 999 (only container root mapped) an
// unmapped uid is the init's error, naming the step.
func TestFunctionUser(t *testing.T) {
	s := spec(newRoot(t), "container")
	s.UID, s.GID = 1234, 2345
	res, err := run(t, s, "")
	if os.Geteuid() != 0 {
		var e *launcher.Error
		if !errors.As(err, &e) || !errors.Is(err, unix.EINVAL) || !strings.HasPrefix(err.Error(), "setres") {
			t.Fatalf("uid 1234 unmapped: %v, want setresgid/setresuid: invalid argument", err)
		}
		return
	}
	must(t, err)
	for k, v := range map[string]string{
		"ids": "1234 1234 2345 2345 groups []", "CapPrm": "0000000000000000",
		"CapEff": "0000000000000000", "CapBnd": "0000000000000000", "NoNewPrivs": "1",
	} {
		if res.facts[k] != v {
			t.Errorf("%s: %q, want %q", k, res.facts[k], v)
		}
	}
}

// TestSymlinkTargetRefused: an image whose mount point is a symbolic link
// (to a host path, or out of the root) makes Setup fail naming it; the
// init never mounts through it.
func TestSymlinkTargetRefused(t *testing.T) {
	host, err := os.MkdirTemp(testTmp, "host-")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(host, "keep"), []byte("host"), 0o644))
	for name, c := range map[string]struct {
		link, to, target string
	}{
		"tmp to host dir":          {"tmp", host, "/tmp"},
		"tmp to /":                 {"tmp", "/", "/tmp"},
		"proc escaping":            {"proc", "../../../../../proc", "/proc"},
		"link in the middle":       {"work", "/etc", "/work/sub"},
		"relative, inside":         {"tmp", "work", "/tmp"},
		"dev to host /dev":         {"dev", "/dev", "/dev"},
		"file link to a host file": {"etc/kcore", "/proc/kcore", "/etc/kcore"},
	} {
		t.Run(name, func(t *testing.T) {
			root := newRoot(t)
			must(t, os.RemoveAll(filepath.Join(root, c.link)))
			must(t, os.Symlink(c.to, filepath.Join(root, c.link)))
			s := spec(root, "container")
			if c.target == "/work/sub" || c.target == "/etc/kcore" {
				s.Mounts = append(s.Mounts, launcher.Mount{Source: "tmpfs", Target: c.target, FSType: "tmpfs"})
			}
			_, err := run(t, s, "")
			if !errors.Is(err, unix.ELOOP) || !strings.Contains(err.Error(), "mount target "+c.target) {
				t.Fatalf("Setup: %v, want mount target %s: ELOOP", err, c.target)
			}
			if b, err := os.ReadFile(filepath.Join(host, "keep")); err != nil || string(b) != "host" {
				t.Errorf("host dir changed: %q %v", b, err)
			}
		})
	}
}

// TestMaskPathLinkRefused: a masked path that is a link in the image is an
// error, never a mount through it.
func TestMaskPathLinkRefused(t *testing.T) {
	root := newRoot(t)
	must(t, os.MkdirAll(filepath.Join(root, "sys"), 0o755))
	must(t, os.Symlink("/etc", filepath.Join(root, "sys/firmware")))
	_, err := run(t, spec(root, "container"), "")
	if !errors.Is(err, unix.ELOOP) || !strings.Contains(err.Error(), "mask /sys/firmware") {
		t.Fatalf("Setup: %v, want mask /sys/firmware: ELOOP", err)
	}
}

// TestCreate: a missing target is an error unless Create is set, and
// Create makes mount points only in a file system the init mounted.
func TestCreate(t *testing.T) {
	root := newRoot(t)
	s := spec(root, "container")
	s.Mounts = append(s.Mounts, launcher.Mount{Source: "tmpfs", Target: "/missing", FSType: "tmpfs"})
	_, err := run(t, s, "")
	if !errors.Is(err, unix.ENOENT) || err.Error() != "mount target /missing: no such file or directory" {
		t.Fatalf("missing target: %v", err)
	}

	// A long target: the init's message is cut to its bound, still one line.
	s = spec(root, "container")
	long := "/" + strings.Repeat("a/", 600) + "x"
	s.Mounts = append(s.Mounts, launcher.Mount{Source: "tmpfs", Target: long, FSType: "tmpfs"})
	_, err = run(t, s, "")
	var e *launcher.Error
	if !errors.As(err, &e) || !strings.HasPrefix(e.Op, "mount target /a/a/") || len(e.Op) != 1024 || e.Errno != unix.ENOENT {
		t.Fatalf("long missing target: %v", err)
	}

	s = spec(root, "container")
	s.Mounts = append(s.Mounts, launcher.Mount{Source: "tmpfs", Target: "/missing", FSType: "tmpfs", Create: true})
	_, err = run(t, s, "")
	if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "/missing") {
		t.Fatalf("create in the image: %v, want EPERM", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "missing")); !os.IsNotExist(err) {
		t.Errorf("created in the image: %v", err)
	}

	s = spec(root, "container")
	s.Mounts = append(s.Mounts, launcher.Mount{Source: "tmpfs", Target: "/tmp/made/dir", FSType: "tmpfs", Create: true})
	_, err = run(t, s, "")
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "/tmp/made/dir") {
		t.Fatalf("create below a missing parent: %v, want ENOENT", err)
	}

	host, err := os.MkdirTemp(testTmp, "host-") // reachable by the mapped uids
	must(t, err)
	must(t, os.Chmod(host, 0o755))
	hostFile := filepath.Join(host, "file")
	must(t, os.WriteFile(hostFile, []byte("x"), 0o644))
	s = spec(root, "container")
	s.Mounts = append(s.Mounts,
		launcher.Mount{Source: "tmpfs", Target: "/tmp/dir", FSType: "tmpfs", Data: "size=4k", Create: true},
		launcher.Mount{Source: hostFile, Target: "/tmp/file", Flags: unix.MS_BIND | unix.MS_RDONLY, Create: true})
	res, err := run(t, s, "")
	must(t, err)
	if !strings.HasPrefix(res.facts["mount /tmp/dir"], "tmpfs rw,") || !strings.Contains(res.facts["mount /tmp/file"], " ro,") {
		t.Errorf("created mount points: %q, %q", res.facts["mount /tmp/dir"], res.facts["mount /tmp/file"])
	}
}

// TestBindMounts: a host directory bound read-only with nosuid and nodev
// (and every submount read-only with MS_REC), and the host's /proc bound
// where a fresh procfs is refused.
func TestBindMounts(t *testing.T) {
	root := newRoot(t)
	host, err := os.MkdirTemp(testTmp, "host-") // reachable by the mapped uids
	must(t, err)
	must(t, os.Chmod(host, 0o755))
	must(t, os.WriteFile(filepath.Join(host, "data"), []byte("x"), 0o644))
	s := spec(root, "container")
	s.Mounts[0] = launcher.Mount{Source: "/proc", Target: "/proc", Flags: unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC}
	s.Mounts = append(s.Mounts, launcher.Mount{Source: host, Target: "/work",
		Flags: unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV})
	s.MaskPaths, s.ReadonlyPaths = nil, nil // the host's /proc: nothing to mask in a test
	// A bind from inside a mount the init made before (the way the
	// runtime binds an overlay's directories): /tmp's tmpfs with a tmpfs
	// below it, bound recursively read-only: the submount is read-only too.
	s.Mounts = append(s.Mounts,
		launcher.Mount{Source: "tmpfs", Target: "/tmp/sub", FSType: "tmpfs", Create: true},
		launcher.Mount{Source: filepath.Join(root, "tmp"), Target: "/etc", Flags: unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY})
	res, err := run(t, s, "")
	must(t, err)
	for p, want := range map[string]string{"/etc": "tmpfs ro,", "/etc/sub": "tmpfs ro,", "/tmp": "tmpfs rw,", "/tmp/sub": "tmpfs rw,"} {
		if got := res.facts["mount "+p]; !strings.HasPrefix(got, want) {
			t.Errorf("mount %s: %q, want %q…", p, got, want)
		}
	}
	if got := res.facts["mount /work"]; !strings.Contains(got, " ro,nosuid,nodev") {
		t.Errorf("mount /work: %q, want ro,nosuid,nodev", got)
	}
	if got := res.facts["mount /proc"]; !strings.HasPrefix(got, "proc rw,nosuid,nodev,noexec") {
		t.Errorf("mount /proc: %q, want the bound procfs nosuid,nodev,noexec", got)
	}
	if res.facts["cwd"] != "/work <nil>" {
		t.Errorf("cwd: %q", res.facts["cwd"])
	}
}

// TestExecError: an entrypoint that does not exist is Release's error.
func TestExecError(t *testing.T) {
	s := spec(newRoot(t))
	s.Args = []string{"/bin/missing"}
	p, err := launcher.Start(s, exe, nil, nil, nil)
	must(t, err)
	ctx := context.Background()
	must(t, p.Setup(ctx))
	err = p.Release(ctx)
	if !errors.Is(err, unix.ENOENT) || err.Error() != "exec /bin/missing: no such file or directory" {
		t.Errorf("Release: %v", err)
	}
	st, err := p.Wait()
	must(t, err)
	if st.ExitCode() != 127 {
		t.Errorf("init: %v, want exit 127", st)
	}
}

// TestKillEndsPidNamespace: a grandchild the function forked (its own
// session, ignoring SIGTERM) dies when Kill ends the init.
func TestKillEndsPidNamespace(t *testing.T) {
	marker := fmt.Sprintf("nsinit-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	s := spec(newRoot(t), "forksleep", marker)
	outR, outW, err := os.Pipe()
	must(t, err)
	defer outR.Close()
	p, err := launcher.Start(s, exe, nil, outW, outW)
	outW.Close()
	must(t, err)
	ctx := context.Background()
	must(t, p.Setup(ctx))
	must(t, p.Release(ctx))
	sc := bufio.NewScanner(outR)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "child: ") {
	}
	if len(withMarker(t, marker)) == 0 {
		t.Fatal("the grandchild is not running")
	}
	must(t, p.Kill())
	st, err := p.Wait()
	must(t, err)
	if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("init: %v, want killed", st)
	}
	// The pid namespace's init reaps every other process of it before it
	// is reaped itself.
	if pids := withMarker(t, marker); len(pids) > 0 {
		t.Errorf("processes of the killed namespace still there: %v", pids)
	}
	if err := p.Kill(); err == nil {
		t.Error("Kill after Wait: no error")
	}
}

// withMarker lists the host pids whose command line holds marker.
func withMarker(t *testing.T, marker string) []int {
	des, err := os.ReadDir("/proc")
	must(t, err)
	var pids []int
	for _, d := range des {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestDeadInit: Setup on an init killed before (through Kill, or by anyone)
// and Release without Setup are errors, never hangs.
func TestDeadInit(t *testing.T) {
	root := newRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, how := range []string{"Kill", "kill(2)"} {
		p, err := launcher.Start(spec(root, "container"), exe, nil, nil, nil)
		must(t, err)
		if how == "Kill" {
			must(t, p.Kill())
		} else {
			must(t, syscall.Kill(p.Pid(), syscall.SIGKILL))
		}
		err = p.Setup(ctx)
		if err == nil || ctx.Err() != nil {
			t.Errorf("Setup after %s: %v (context %v)", how, err, ctx.Err())
		}
		if err := p.Release(ctx); err == nil {
			t.Errorf("Release after a failed Setup: no error")
		}
		st, err := p.Wait()
		must(t, err)
		if st.Success() {
			t.Errorf("init after %s: %v", how, st)
		}
	}
}

// TestContextKillsInit: Setup with a context that has ended kills the init
// and returns the context's error.
func TestContextKillsInit(t *testing.T) {
	p, err := launcher.Start(spec(newRoot(t), "container"), exe, nil, nil, nil)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Setup(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Setup: %v, want context canceled", err)
	}
	st, err := p.Wait()
	must(t, err)
	if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("init: %v, want killed", st)
	}
}

// TestSeccomp: the spec's program is in force in the function (mode 2, a
// denied call fails with the program's errno).
func TestSeccomp(t *testing.T) {
	const ioUringSetup = 425 // the same number on amd64 and arm64
	deny := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: ioUringSetup, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EDOM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	root := newRoot(t)
	for args, want := range map[string]string{
		"io_uring":  "io_uring_setup: numerical argument out of domain",
		"container": "Seccomp: 2",
	} {
		s := spec(root, args)
		s.Seccomp = deny
		res, err := run(t, s, "")
		must(t, err)
		if !strings.Contains(res.out, want+"\n") {
			t.Errorf("%s: %q, want %q", args, res.out, want)
		}
	}
}

// TestConstructorInert: the constructor acts only with both argv[1] and the
// environment's descriptor; otherwise Go starts as usual, with every fd
// left as it was. With both (the control) it acts: it reads its spec, gets
// EOF and exits without Go ever starting.
func TestConstructorInert(t *testing.T) {
	for _, c := range []struct {
		arg, env string
		inert    bool
	}{
		{launcher.InitArg, "", true},
		{notInitArg, "_KPTR_NSINIT=3", true},
		{launcher.InitArg, "_KPTR_NSINIT=x", true},
		{launcher.InitArg, "_KPTR_NSINIT=3", false},
	} {
		r3, w3, err := os.Pipe()
		must(t, err)
		r4, w4, err := os.Pipe()
		must(t, err)
		cmd := exec.Command(exe, c.arg)
		cmd.Args[0] = "nsinit.test"
		if c.env != "" {
			cmd.Env = []string{c.env}
		} else {
			cmd.Env = []string{}
		}
		cmd.ExtraFiles = []*os.File{r3, r4}
		var out bytes.Buffer
		cmd.Stdout = &out
		must(t, cmd.Start())
		r3.Close()
		r4.Close()
		w3.Close() // EOF for an init reading its spec
		err = cmd.Wait()
		w4.Close()
		if c.inert {
			want := "go: started " + c.arg + "\nfd3: 0 <nil>\nfd4: 0 <nil>\n"
			if err != nil || out.String() != want {
				t.Errorf("%s %q: %v %q, want %q", c.arg, c.env, err, out.String(), want)
			}
		} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || out.Len() != 0 {
			t.Errorf("%s %q (an init): %v %q, want exit 1 and no output", c.arg, c.env, err, out.String())
		}
	}
}

// TestSpecRejected: what the init could not honour is Start's error, before
// anything is started.
func TestSpecRejected(t *testing.T) {
	root := newRoot(t)
	for name, mod := range map[string]func(*launcher.Spec){
		"NUL in env":        func(s *launcher.Spec) { s.Env = append(s.Env, "A=b\x00c") },
		"relative target":   func(s *launcher.Spec) { s.Mounts[0].Target = "proc" },
		"unclean target":    func(s *launcher.Spec) { s.Mounts[0].Target = "/tmp/../proc" },
		"root as target":    func(s *launcher.Spec) { s.Mounts[0].Target = "/" },
		"relative args[0]":  func(s *launcher.Spec) { s.Args[0] = "probe" },
		"no args":           func(s *launcher.Spec) { s.Args = nil },
		"bind without flag": func(s *launcher.Spec) { s.Mounts[0].FSType = "" },
		"bind with a type":  func(s *launcher.Spec) { s.Mounts[0].Flags |= unix.MS_BIND },
		"host root":         func(s *launcher.Spec) { s.Root = "/" },
		"device elsewhere":  func(s *launcher.Spec) { s.Devices = append(s.Devices, "/etc/passwd") },
		"too large":         func(s *launcher.Spec) { s.Env = append(s.Env, "BIG="+strings.Repeat("x", 1<<20)) },
		"too many":          func(s *launcher.Spec) { s.Env = slices.Repeat([]string{"A=b"}, 5000) },
		"dirs in a bind": func(s *launcher.Spec) {
			s.Mounts[0] = launcher.Mount{Source: "/proc", Target: "/proc", Flags: unix.MS_BIND, Dirs: []launcher.Dir{{Path: "x", Mode: 0o755}}}
		},
		"dir climbing out": func(s *launcher.Spec) { s.Mounts[2].Dirs = []launcher.Dir{{Path: "../etc", Mode: 0o755}} },
		"absolute dir":     func(s *launcher.Spec) { s.Mounts[2].Dirs = []launcher.Dir{{Path: "/etc", Mode: 0o755}} },
		"unclean dir":      func(s *launcher.Spec) { s.Mounts[2].Dirs = []launcher.Dir{{Path: "a//b", Mode: 0o755}} },
		"setuid dir":       func(s *launcher.Spec) { s.Mounts[2].Dirs = []launcher.Dir{{Path: "a", Mode: 0o755 | os.ModeSetuid}} },
	} {
		s := spec(root, "container")
		mod(s)
		p, err := launcher.Start(s, exe, nil, nil, nil)
		if err == nil {
			p.Kill()
			p.Wait()
			t.Errorf("%s: started", name)
		} else if !strings.HasPrefix(err.Error(), "nsinit: spec: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestWaitFromTheStart: Wait may wait from another goroutine as soon as
// the init exists, as the runtime's reaper does for a prepared sandbox: it
// does not end the init, Setup and Release still work and Wait returns the
// function's status; an init that is not to be released ends with Kill.
func TestWaitFromTheStart(t *testing.T) {
	p, err := launcher.Start(spec(newRoot(t), "container"), exe, nil, nil, nil)
	must(t, err)
	done := make(chan *os.ProcessState, 1)
	go func() { st, _ := p.Wait(); done <- st }()
	must(t, p.Setup(context.Background()))
	must(t, p.Release(context.Background()))
	if st := <-done; st == nil || !st.Success() {
		t.Errorf("function: %v, want success", st)
	}

	p, err = launcher.Start(spec(newRoot(t), "container"), exe, nil, nil, nil)
	must(t, err)
	must(t, p.Setup(context.Background()))
	must(t, p.Kill())
	st, err := p.Wait()
	must(t, err)
	if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("killed unreleased init: %v", st)
	}
}

// TestOverlay: the runtime's writable view of an image: an overlay on /tmp
// (hidden later by the /tmp tmpfs) whose directory is bound where it
// belongs; what the function writes lands in the upper layer, never in the
// image.
func TestOverlay(t *testing.T) {
	root := newRoot(t)
	rw, err := os.MkdirTemp(testTmp, "rw-")
	must(t, err)
	must(t, os.Chmod(rw, 0o755))
	lower := filepath.Join(rw, "lower")
	for _, d := range []string{"lower/data", "u", "w"} {
		must(t, os.MkdirAll(filepath.Join(rw, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(lower, "data/old"), []byte("image"), 0o644))
	if os.Geteuid() == 0 {
		// The upper layer, and the image's directory written to, belong to
		// container root (host rootHostIDBase).
		for _, d := range []string{"u", "w", "lower/data"} {
			must(t, os.Chown(filepath.Join(rw, d), rootHostIDBase, rootHostIDBase))
		}
	}
	s := spec(root, "write", "/work/new")
	s.Mounts = append([]launcher.Mount{
		{Source: "overlay", Target: "/tmp", FSType: "overlay", Flags: unix.MS_NOSUID | unix.MS_NODEV,
			Data: "lowerdir=" + lower + ",upperdir=" + rw + "/u,workdir=" + rw + "/w,userxattr,volatile"},
		{Source: filepath.Join(root, "tmp", "data"), Target: "/work", Flags: unix.MS_BIND | unix.MS_REC},
	}, s.Mounts...)
	res, err := run(t, s, "")
	must(t, err)
	if res.facts["/work/new"] != "written" {
		t.Fatalf("write: %q", res.out)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "u/data/new")); err != nil || string(b) != "x" {
		t.Errorf("upper layer: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(lower, "data/new")); !os.IsNotExist(err) {
		t.Errorf("written into the image: %v", err)
	}
}

// TestOverlayUpperInTmpfs: an overlay whose upper layer is on a tmpfs the
// init mounted on /tmp, its directories made by Mount.Dirs (as the runtime
// gives runs their writable view of the image): a directory of the image
// that container root does not own (as root, the cache is host root's) is
// writable through the upper directory made for it, with exactly the mode
// asked for; nothing is written on the host, neither in the image nor
// below the root.
func TestOverlayUpperInTmpfs(t *testing.T) {
	root := newRoot(t)
	lower, err := os.MkdirTemp(testTmp, "lower-")
	must(t, err)
	must(t, os.Chmod(lower, 0o755))
	must(t, os.Mkdir(filepath.Join(lower, "data"), 0o755))
	must(t, os.WriteFile(filepath.Join(lower, "data/old"), []byte("image"), 0o644))
	withUpper := func(args ...string) *launcher.Spec {
		s := spec(root, args...)
		s.Mounts = append([]launcher.Mount{
			{Source: "tmpfs", Target: "/tmp", FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: "mode=700,size=1m",
				Dirs: []launcher.Dir{{Path: "u", Mode: 0o700}, {Path: "w", Mode: 0o700}, {Path: "u/data", Mode: 0o775 | os.ModeSetgid}}},
			{Source: "overlay", Target: "/tmp", FSType: "overlay", Flags: unix.MS_NOSUID | unix.MS_NODEV,
				Data: "lowerdir=" + lower + ",upperdir=" + root + "/tmp/u,workdir=" + root + "/tmp/w,userxattr"},
			{Source: filepath.Join(root, "tmp", "data"), Target: "/work", Flags: unix.MS_BIND | unix.MS_REC},
		}, s.Mounts...)
		return s
	}
	res, err := run(t, withUpper("write", "/work/new"), "")
	must(t, err)
	if !strings.Contains(res.out, "/work/new: written") {
		t.Errorf("write: %q", res.out)
	}
	res, err = run(t, withUpper("ls", "/"), "")
	must(t, err)
	if !strings.Contains(res.out, "work dgrwxrwxr-x\n") {
		t.Errorf("the upper directory's mode: %q, want work dgrwxrwxr-x", res.out)
	}
	for _, d := range []string{filepath.Join(root, "tmp"), filepath.Join(lower, "data")} {
		des, err := os.ReadDir(d)
		must(t, err)
		if len(des) > 0 && !(d == filepath.Join(lower, "data") && len(des) == 1 && des[0].Name() == "old") {
			t.Errorf("written on the host in %s: %v", d, des)
		}
	}
}

// TestParserBounds: the init's parser refuses every malformed spec with
// one error naming it, before it mounts anything (nsinit.c trusts no length
// or count even though kptr sends them).
func TestParserBounds(t *testing.T) {
	root := newRoot(t)
	s := spec(root, "container")
	good, err := launcher.Encode(s)
	must(t, err)
	le := binary.NativeEndian
	rootAt := 8 + 8 + 4                         // magic, length; cloneflags, options: root's length
	cgroupsAt := rootAt + 4 + len(root) + 1 + 4 // after the (empty) trees
	mountsAt := cgroupsAt + 4                   // after the cgroup count (0)
	srcAt := mountsAt + 4
	targetAt := srcAt + 4 + len(s.Mounts[0].Source) + 1
	for name, c := range map[string]struct {
		mod  func(b []byte) []byte
		want string
	}{
		"bad magic":          {func(b []byte) []byte { b[0] ^= 0xff; return b }, "spec magic"},
		"longer than 1 MiB":  {func(b []byte) []byte { le.PutUint32(b[4:], 1<<20+1); return b }, "spec too large"},
		"trailing bytes":     {func(b []byte) []byte { le.PutUint32(b[4:], uint32(len(b)-8+1)); return append(b, 0) }, "spec trailing bytes"},
		"truncated":          {func(b []byte) []byte { le.PutUint32(b[4:], uint32(len(b)-8-1)); return b[:len(b)-1] }, "spec truncated"},
		"string past end":    {func(b []byte) []byte { le.PutUint32(b[rootAt:], 0x7fffffff); return b }, "spec string beyond the end"},
		"NUL in a string":    {func(b []byte) []byte { b[rootAt+4+2] = 0; return b }, "spec string with a NUL or unterminated"},
		"unterminated":       {func(b []byte) []byte { b[rootAt+4+len(root)] = 'x'; return b }, "spec string with a NUL or unterminated"},
		"huge mount count":   {func(b []byte) []byte { le.PutUint32(b[mountsAt:], 0xffffffff); return b }, "spec mount count"},
		"relative target":    {func(b []byte) []byte { b[targetAt+4] = 'x'; return b }, "spec mount target not absolute"},
		"count past the end": {func(b []byte) []byte { le.PutUint32(b[mountsAt:], 4000); return b }, "spec mount count"},
		"9 cgroups to join":  {func(b []byte) []byte { le.PutUint32(b[cgroupsAt:], 9); return b }, "spec cgroup count"},
	} {
		p, err := launcher.StartRaw(s, c.mod(slices.Clone(good)), exe)
		var e *launcher.Error
		if !errors.As(err, &e) || e.Op != c.want || e.Errno != unix.EINVAL {
			t.Errorf("%s: %v, want %s: invalid argument", name, err, c.want)
		}
		if p != nil {
			p.Kill()
			p.Wait()
		}
	}
}

// TestLandlockSpecRejected: a landlock-tier spec the launcher could not
// honour is StartLandlock's error before anything is started: root as the
// function's uid, no ruleset, relative paths, no args, a NUL in the env, no
// seccomp program.
func TestLandlockSpecRejected(t *testing.T) {
	rs, err := os.Open(os.DevNull) // any descriptor: nothing is started
	must(t, err)
	defer rs.Close()
	good := func() *launcher.Landlock {
		return &launcher.Landlock{UID: -1, GID: -1, Dir: "/tmp", Path: "/bin/true", Args: []string{"true"}, Ruleset: rs,
			Seccomp: []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}}
	}
	if _, err := launcher.EncodeLandlock(good(), os.Getpid()); err != nil {
		t.Fatalf("the unmodified spec: %v", err)
	}
	for name, mod := range map[string]func(*launcher.Landlock){
		"root":          func(l *launcher.Landlock) { l.UID, l.GID = 0, 0 },
		"half an id":    func(l *launcher.Landlock) { l.UID = 1000 },
		"no ruleset":    func(l *launcher.Landlock) { l.Ruleset = nil },
		"relative dir":  func(l *launcher.Landlock) { l.Dir = "tmp" },
		"relative path": func(l *launcher.Landlock) { l.Path = "true" },
		"no args":       func(l *launcher.Landlock) { l.Args = nil },
		"NUL in env":    func(l *launcher.Landlock) { l.Env = []string{"A=b\x00c"} },
		"no seccomp":    func(l *launcher.Landlock) { l.Seccomp = nil },
	} {
		l := good()
		mod(l)
		p, err := launcher.StartLandlock(l, exe, nil, nil, nil, nil)
		if err == nil || p != nil || !strings.HasPrefix(err.Error(), "nsinit: spec: ") {
			t.Errorf("%s: %v %v", name, p, err)
			if p != nil {
				p.Kill()
				p.Wait()
			}
		}
	}
}

// TestJoinCgroups: the init joins the cgroups whose v1 tasks files it is
// given, itself, during Setup (not before: it unshares its cgroup namespace
// with them as root), and a file it cannot write to ends it with the step
// named, before the function could run outside its cgroups.
func TestJoinCgroups(t *testing.T) {
	hier := "/sys/fs/cgroup/memory"
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	if _, err := os.Stat(filepath.Join(hier, "tasks")); err != nil {
		t.Skip("no cgroup v1 memory hierarchy here")
	}
	for _, writable := range []bool{true, false} {
		t.Run(fmt.Sprintf("writable=%v", writable), func(t *testing.T) {
			name := fmt.Sprintf("kptr-nsinit-test-%d-%v", os.Getpid(), writable)
			dir := filepath.Join(hier, name)
			must(t, os.Mkdir(dir, 0o755))
			defer os.Remove(dir)
			flag := os.O_WRONLY
			if !writable {
				flag = os.O_RDONLY
			}
			f, err := os.OpenFile(filepath.Join(dir, "tasks"), flag, 0)
			must(t, err)
			s := spec(newRoot(t))
			s.JoinCgroups = []*os.File{f}
			p, err := launcher.Start(s, exe, nil, nil, nil)
			f.Close()
			must(t, err)
			defer func() { p.Kill(); p.Wait() }()
			memcg := func() string {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Pid()))
				must(t, err)
				for _, l := range strings.Split(string(b), "\n") {
					if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "memory" {
						return f[2]
					}
				}
				return ""
			}
			if got := memcg(); strings.HasSuffix(got, "/"+name) {
				t.Errorf("in the cgroup before Setup: %s", got)
			}
			err = p.Setup(context.Background())
			if !writable {
				if !errors.Is(err, unix.EBADF) || !strings.HasPrefix(err.Error(), "join cgroup") {
					t.Errorf("Setup with a read-only tasks file: %v, want join cgroup: EBADF", err)
				}
				return
			}
			must(t, err)
			if got := memcg(); !strings.HasSuffix(got, "/"+name) {
				t.Errorf("memory cgroup after Setup %q, want .../%s", got, name)
			}
		})
	}
}
