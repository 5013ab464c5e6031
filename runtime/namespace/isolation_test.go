package namespace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// Container root maps to the invoking uid when unprivileged, to a dedicated
// unprivileged range when kptr is root: never to host root. No capabilities,
// no_new_privs, own uts namespace.
func TestUserNamespaceNeverHostRoot(t *testing.T) {
	_, f := run(t, runtime.Invocation{}, "id")
	m := strings.Fields(f["uid_map"])
	if len(m) != 3 {
		t.Fatalf("uid_map %q", f["uid_map"])
	}
	host, _ := strconv.Atoi(m[1])
	if host == 0 {
		t.Fatalf("container uid %s maps to host root: %q", m[0], f["uid_map"])
	}
	if os.Geteuid() != 0 {
		if f["uid_map"] != fmt.Sprintf("0 %d 1", os.Geteuid()) || f["uid"] != "0" {
			t.Fatalf("rootless: want container root mapped to uid %d only, got uid %s map %q", os.Geteuid(), f["uid"], f["uid_map"])
		}
	} else if f["uid"] != "65534" || f["gid"] != "65534" {
		t.Fatalf("as root, functions run as nobody; got uid %s gid %s", f["uid"], f["gid"])
	}
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if f[k] != "0000000000000000" {
			t.Errorf("%s = %s, want no capabilities", k, f[k])
		}
	}
	if f["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs = %s", f["NoNewPrivs"])
	}
	// The hostname is set only where the profile allows sethostname
	// (CRI-O's default refuses it; the run must not need it).
	if sandbox(t).Features().Hostname {
		if h, _ := os.Hostname(); f["hostname"] == h || f["hostname"] != "kptr" {
			t.Errorf("hostname %q: want the sandbox's own uts namespace", f["hostname"])
		}
	}
}

// Nothing of the host's file system is visible: a sentinel in the host's
// temp dir, the package directory, the cache directory and $HOME.
func TestHostFilesInvisible(t *testing.T) {
	var paths []string
	sentinel := func(dir string) {
		p := filepath.Join(dir, "kptr-sentinel-"+strconv.Itoa(os.Getpid()))
		if err := os.WriteFile(p, []byte("secret"), 0o644); err != nil {
			t.Fatalf("sentinel: %v", err)
		}
		t.Cleanup(func() { os.Remove(p) })
		paths = append(paths, p)
	}
	pkg := filepath.Join(testTmp, "pkg")
	must(t, os.MkdirAll(pkg, 0o755))
	sentinel(os.TempDir())
	sentinel("/tmp")
	sentinel(pkg)
	sentinel(filepath.Dir(testRootfs(t))) // the cache directory beside the rootfs
	if home, err := os.UserHomeDir(); err == nil {
		sentinel(home)
	}
	// As container root too, which may read the image's /root (root's $HOME
	// on the host is /root as well): a tmpfs there, the sentinel absent.
	bothRootfs(t, func(t *testing.T, rootfs string) {
		for _, inv := range []runtime.Invocation{{}, {AsCurrentUser: true}} {
			_, f := runIn(t, rootfs, inv, append([]string{"read"}, paths...)...)
			for _, p := range paths {
				if strings.HasPrefix(f[p], "readable") || inv.AsCurrentUser && !strings.Contains(f[p], "no such file") {
					t.Errorf("host file %s inside the sandbox (as current user: %v): %q", p, inv.AsCurrentUser, f[p])
				}
			}
		}
	})
}

// The cached rootfs is never modified, whatever the function writes; /tmp
// and $HOME are writable; without an overlay everything else is read-only,
// with one the function writes where its uid may (TestOverlayWritableView),
// never into / itself or /proc.
func TestRootfsNeverModified(t *testing.T) {
	bothRootfs(t, func(t *testing.T, root string) {
		before := snapshot(t, root)
		_, f := runIn(t, root, runtime.Invocation{}, "write", "/etc/passwd", "/usr/local/bin/function", "/newfile", "/bin/x",
			"/tmp/x", "/home/nobody/x", "/root/x", "/var/empty/x", "/proc/x", "/dev/x")
		readonly := []string{"/newfile", "/proc/x"}
		if !sandbox(t).Overlay() || os.Geteuid() == 0 { // as root: the image belongs to host root, no run's uid
			readonly = append(readonly, "/etc/passwd", "/usr/local/bin/function", "/bin/x", "/var/empty/x")
		}
		for _, p := range readonly {
			if f[p] == "written" {
				t.Errorf("%s writable in the sandbox", p)
			}
		}
		if f["/tmp/x"] != "written" {
			t.Errorf("/tmp not writable: %q", f["/tmp/x"])
		}
		if os.Geteuid() == 0 && f["/home/nobody/x"] != "written" {
			t.Errorf("$HOME (/home/nobody) not writable: %q", f["/home/nobody/x"])
		}
		if after := snapshot(t, root); after != before {
			t.Fatalf("cached rootfs changed by a run:\nbefore %s\nafter  %s", before, after)
		}
		// A function run as container root whose HOME is /root gets a tmpfs there.
		_, f = runIn(t, root, runtime.Invocation{AsCurrentUser: true}, "write", "/root/x")
		if f["/root/x"] != "written" {
			t.Errorf("$HOME /root not writable for root: %q", f["/root/x"])
		}
		if after := snapshot(t, root); after != before {
			t.Fatal("cached rootfs changed by a run as root")
		}
	})
}

// Two concurrent runs of one image never see each other's writes.
func TestConcurrentRunsIsolated(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]map[string]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sandbox(t).Run(context.Background(), testBundle(t, "token", fmt.Sprintf("run-%d", i)), runtime.Invocation{AsCurrentUser: true})
			errs[i] = err
			got[i] = facts(string(res.Stdout))
		}()
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		want := fmt.Sprintf("run-%d <nil>", i)
		if got[i]["/tmp/token"] != want || got[i]["/root/token"] != want {
			t.Errorf("run %d saw %v, want only its own token", i, got[i])
		}
	}
}

// Own pid namespace: the function is pid 1 and sees only its own processes;
// host processes cannot be signalled.
//
// With a masked /proc (TestProcBindFallback) the outer process list shows
// through the bound /proc; kptr's own environment must still be unreadable.
func TestPidNamespace(t *testing.T) {
	_, f := run(t, runtime.Invocation{}, "id")
	if f["pid"] != "1" {
		t.Errorf("function is pid %s, want 1 of its own namespace", f["pid"])
	}
	if sandbox(t).Features().FreshProc {
		_, f = run(t, runtime.Invocation{}, "ps")
		if f["pids"] != "[1]" {
			t.Errorf("visible pids %s, want only [1]", f["pids"])
		}
	} else {
		env := fmt.Sprintf("/proc/%d/environ", os.Getpid())
		_, f = run(t, runtime.Invocation{AsCurrentUser: true}, "read", env)
		if strings.HasPrefix(f[env], "readable") {
			t.Errorf("kptr's environment readable through the bound /proc: %q", f[env])
		}
	}
	_, f = run(t, runtime.Invocation{}, "kill", strconv.Itoa(os.Getpid()))
	if f["kill"] != "no such process" {
		t.Errorf("signal to host pid %d: %q", os.Getpid(), f["kill"])
	}
}

// Only loopback: a listener on the host's 127.0.0.1 is unreachable, unless
// the invocation asks for the host network.
func TestNetworkLoopbackOnly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, f := run(t, runtime.Invocation{}, "connect", l.Addr().String())
	if f["connect"] == "ok" || !strings.Contains(f["connect"], "refused") {
		t.Errorf("host listener reached from the sandbox: %q", f["connect"])
	}
	_, f = run(t, runtime.Invocation{Network: true}, "connect", l.Addr().String())
	if f["connect"] != "ok" {
		t.Errorf("with Network the host listener must be reachable: %q", f["connect"])
	}
}

// Only the image's Env plus the invocation's; kptr's own environment never.
func TestEnvironmentOnlyImageAndInvocation(t *testing.T) {
	t.Setenv("KPTR_TEST_SECRET", "hunter2")
	res, _ := run(t, runtime.Invocation{Env: []string{"INV_VAR=x", "IMAGE_VAR=overridden"}}, "env")
	env := string(res.Stdout)
	if strings.Contains(env, "hunter2") || strings.Contains(env, "KPTR_TEST_SECRET") {
		t.Fatalf("host secret visible:\n%s", env)
	}
	for _, want := range []string{imagePath, "INV_VAR=x", "IMAGE_VAR=overridden", "HOME="} {
		if !strings.Contains(env, want) {
			t.Errorf("missing %q in\n%s", want, env)
		}
	}
	if strings.Contains(env, "from-image") {
		t.Errorf("invocation Env must win over the image's:\n%s", env)
	}
	for _, l := range strings.Split(strings.TrimSpace(env), "\n") {
		k, _, _ := strings.Cut(l, "=")
		switch k {
		case "PATH", "IMAGE_VAR", "INV_VAR", "HOME":
		default:
			t.Errorf("unexpected variable %q", l)
		}
	}
}

// A setuid binary in the image gains nothing.
func TestSetuidGainsNothing(t *testing.T) {
	b := testBundle(t, "id")
	b.Config.Entrypoint = []string{"/usr/local/bin/suid"}
	res, err := sandbox(t).Run(context.Background(), b, runtime.Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
	}
	f := facts(string(res.Stdout))
	if f["euid"] != f["uid"] || f["CapEff"] != "0000000000000000" {
		t.Fatalf("setuid binary changed privileges: %v", f)
	}
}

// /proc paths masked and read-only as in runc's default spec.
func TestMaskedProc(t *testing.T) {
	_, f := run(t, runtime.Invocation{}, "read", "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug")
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"} {
		if v := f[p]; v != "readable 0 bytes" && !strings.Contains(v, "no such file") && !strings.Contains(v, "permission denied") {
			t.Errorf("%s not masked: %q", p, v)
		}
	}
	_, f = run(t, runtime.Invocation{}, "write", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger")
	for _, p := range []string{"/proc/sys/kernel/hostname", "/proc/sysrq-trigger"} {
		if f[p] == "written" {
			t.Errorf("%s writable", p)
		}
	}
}

// /dev holds exactly null, zero, random and urandom as devices.
func TestMinimalDev(t *testing.T) {
	bothRootfs(t, func(t *testing.T, rootfs string) { minimalDev(t, rootfs) })
}

func minimalDev(t *testing.T, rootfs string) {
	res, _ := runIn(t, rootfs, runtime.Invocation{}, "ls", "/dev")
	var devs []string
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		name, mode, _ := strings.Cut(l, " ")
		switch {
		case strings.HasPrefix(mode, "Dc"), strings.HasPrefix(mode, "D"):
			devs = append(devs, name)
		case strings.HasPrefix(mode, "L"): // fd, stdin, stdout, stderr, ptmx symlinks
		default:
			t.Errorf("unexpected /dev entry %q", l)
		}
	}
	if strings.Join(devs, ",") != "null,random,urandom,zero" {
		t.Fatalf("devices in /dev: %v\n%s", devs, res.Stdout)
	}
}

// A timeout kills every process of the run, also a child that ignores
// SIGTERM in its own session: nothing is left afterwards.
func TestTimeoutKillsEveryProcess(t *testing.T) {
	marker := fmt.Sprintf("kptr-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	start := time.Now()
	res, err := sandbox(t).Run(context.Background(), testBundle(t, "forksleep", marker), runtime.Invocation{Timeout: time.Second})
	if !errors.Is(err, runtime.ErrTimeout) {
		t.Fatalf("want timeout, got %v (exit %d)", err, res.ExitCode)
	}
	if !strings.Contains(err.Error(), "example.test/hostile:v1") {
		t.Errorf("error does not name the image: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	if !strings.Contains(string(res.Stdout), "child: ") {
		t.Errorf("the child was never started: %q %q", res.Stdout, res.Stderr)
	}
	if left := processesWith(marker); len(left) > 0 {
		t.Fatalf("processes left after the timeout: %v", left)
	}
}

// A fork bomb is contained: the pids limit stops it, the host stays
// responsive while it runs, and nothing of it is left afterwards.
func TestForkBombContained(t *testing.T) {
	s, err := New(runtime.WithLimits(runtime.Limits{Pids: 64, Memory: 256 << 20}))
	must(t, err)
	marker := fmt.Sprintf("bomb-%d-%d", os.Getpid(), time.Now().UnixNano())
	b := testBundle(t)
	b.Config.Entrypoint = []string{"/bin/sh", "-c", "b() { b | b & }; b; sleep 3 # " + marker}
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(context.Background(), b, runtime.Invocation{Timeout: 3 * time.Second})
		done <- err
	}()
	time.Sleep(time.Second)
	start := time.Now()
	if err := exec.Command("/bin/true").Run(); err != nil {
		t.Errorf("host cannot start a process during the bomb: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("host unresponsive during the bomb: exec took %s", d)
	}
	if err := <-done; err != nil && !errors.Is(err, runtime.ErrTimeout) {
		t.Errorf("bomb run: %v", err)
	}
	if left := processesWith(marker); len(left) > 0 {
		t.Fatalf("bomb processes left: %d, e.g. %s", len(left), left[0])
	}
}

// Output beyond the cap ends the run with a clear error instead of eating
// memory; a function that does not read stdin, floods or writes garbage
// never hangs kptr.
func TestOutputCapAndMisbehaviour(t *testing.T) {
	res, err := sandbox(t).Run(context.Background(), testBundle(t, "flood", strconv.Itoa(64<<20)), runtime.Invocation{MaxOutput: 1 << 20})
	if !errors.Is(err, runtime.ErrOutputLimit) || !strings.Contains(err.Error(), "stdout") || !strings.Contains(err.Error(), "example.test/hostile:v1") {
		t.Fatalf("flood: want output limit error naming stdout and the image, got %v", err)
	}
	if len(res.Stdout) != 1<<20 {
		t.Errorf("kept %d bytes of stdout, want the cap", len(res.Stdout))
	}

	big := strings.NewReader(strings.Repeat("x", 32<<20))
	start := time.Now()
	res, err = sandbox(t).Run(context.Background(), testBundle(t, "noread"), runtime.Invocation{Stdin: big, Timeout: 20 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("noread: %v exit %d", err, res.ExitCode)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("noread took %s", d)
	}

	res, err = sandbox(t).Run(context.Background(), testBundle(t, "garbage"), runtime.Invocation{})
	if err != nil || res.ExitCode != 0 || len(res.Stdout) != 4096 || len(res.Stderr) != 4096 {
		t.Fatalf("garbage: %v exit %d, %d/%d bytes", err, res.ExitCode, len(res.Stdout), len(res.Stderr))
	}

	res, err = sandbox(t).Run(context.Background(), testBundle(t, "exit", "3"), runtime.Invocation{})
	if err != nil || res.ExitCode != 3 || !strings.Contains(string(res.Stderr), "failing on purpose") {
		t.Fatalf("exit 3: err %v exit %d stderr %q", err, res.ExitCode, res.Stderr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); cancel() }()
	_, err = sandbox(t).Run(ctx, testBundle(t, "sleep-ignore", "x"), runtime.Invocation{Stdin: blockingReader{}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
}

// Bad images fail with an error naming the image and the cause.
func TestBadImages(t *testing.T) {
	for _, tc := range []struct {
		name       string
		entrypoint []string
		want       string
	}{
		{"no entrypoint", nil, "neither Entrypoint nor Cmd"},
		{"missing", []string{"does-not-exist"}, `entrypoint "does-not-exist" not found on the image's PATH`},
		{"missing abs", []string{"/usr/bin/nope"}, "entrypoint /usr/bin/nope not found"},
		{"not executable", []string{"/etc/passwd"}, "not an executable file"},
		{"garbage binary", []string{"/bin/garbage"}, "exec format error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBundle(t)
			if tc.name == "garbage binary" {
				// A file that claims to be executable but is not a program:
				// a private rootfs so the shared one stays as it is.
				dir := filepath.Join(testTmp, "garbage-rootfs")
				must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
				must(t, os.WriteFile(filepath.Join(dir, "bin/garbage"), []byte("\x7fELF garbage"), 0o755))
				b.Rootfs = dir
			}
			b.Config.Entrypoint = tc.entrypoint
			_, err := sandbox(t).Run(context.Background(), b, runtime.Invocation{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), b.Ref+": ") {
				t.Fatalf("want %q naming %s, got %v", tc.want, b.Ref, err)
			}
		})
	}
}

// Docker semantics end to end: shell form, WorkingDir, User by name.
func TestImageConfigSemantics(t *testing.T) {
	b := testBundle(t)
	b.Config.Entrypoint = []string{"/bin/sh", "-c", `echo "var: $IMAGE_VAR"; echo "pwd: $(pwd)"; echo "uid: $(id -u)"; echo "gid: $(id -g)"; echo "home: $HOME"; cat`}
	b.Config.WorkingDir = "/work"
	b.Config.User = "fn:fngroup"
	res, err := sandbox(t).Run(context.Background(), b, runtime.Invocation{Stdin: strings.NewReader("tail: in\n")})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
	}
	f := facts(string(res.Stdout))
	wantUID, wantGID := "1234", "3456"
	if os.Geteuid() != 0 {
		wantUID, wantGID = "0", "0" // single-uid map: container root
	}
	if f["var"] != "from-image" || f["pwd"] != "/work" || f["uid"] != wantUID || f["gid"] != wantGID || f["home"] != "/" || f["tail"] != "in" {
		t.Fatalf("got %v", f)
	}
}

// Every build filters: the function runs under kptr's seccomp filter
// (Seccomp: 2, in its own status and every thread's), which refuses new
// namespaces, with whichever launcher started it (make test runs this
// suite with KPTR_LAUNCHER=libcontainer too; launch_test.go runs both in
// one binary).
func TestSeccompProfile(t *testing.T) {
	_, f := run(t, runtime.Invocation{}, "id")
	_, u := run(t, runtime.Invocation{}, "unshare")
	if f["Seccomp"] != "2" {
		t.Errorf("Seccomp mode %s, want 2 (filter)", f["Seccomp"])
	}
	if !strings.Contains(u["unshare"], "operation not permitted") {
		t.Errorf("a new user namespace inside the sandbox: %q", u["unshare"])
	}
}

// Memory and pids limits go through cgroups when kptr may create them; the
// probe says so clearly when it may not.
func TestCgroupLimits(t *testing.T) {
	probes, feat := Probe()
	var cg runtime.ProbeResult
	for _, p := range probes {
		if p.Name == "cgroups" {
			cg = p
		}
	}
	if !feat.Cgroups {
		if cg.Status != runtime.StatusDegraded || !strings.Contains(cg.Detail, "memory limit not enforced") {
			t.Fatalf("no cgroups but no clear message: %+v", cg)
		}
		return
	}
	s, err := New(runtime.WithLimits(runtime.Limits{Memory: 64 << 20, Pids: 256}))
	must(t, err)
	res, err := s.Run(context.Background(), testBundle(t, "alloc", "256"), runtime.Invocation{})
	if err == nil && res.ExitCode == 0 {
		t.Fatalf("allocated 256 MiB under a 64 MiB limit: %s", res.Stdout)
	}
	if res.ExitCode != 137 {
		t.Errorf("want the OOM kill (137), got exit %d err %v", res.ExitCode, err)
	}
	res, err = s.Run(context.Background(), testBundle(t, "alloc", "16"), runtime.Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("16 MiB under 64 MiB: %v %d %s", err, res.ExitCode, res.Stderr)
	}
}

// A run joins the cgroup v1 hierarchies of its limits (memory, pids) and
// devices (libcontainer's device rules), each in its own cgroup with the
// limits set, and no other hierarchy: libcontainer.Create would join every
// one mounted (cpu, blkio, freezer, name=systemd, ...), a mkdir, an attach
// and an rmdir each per start, for limits kptr never sets.
func TestRunCgroupHierarchies(t *testing.T) {
	if !sandbox(t).Features().Cgroups || cgroups.IsCgroup2UnifiedMode() {
		t.Skip("needs cgroup v1 hierarchies that kptr may create cgroups in (root)")
	}
	s, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-cgroups")), runtime.WithLimits(runtime.Limits{Memory: 64 << 20, Pids: 99}))
	must(t, err)
	defer s.Close()
	st, err := s.setup(testBundle(t), runtime.Invocation{})
	must(t, err)
	defer st.destroy(s.log)
	// The init waits on its exec fifo: inspect it before the function runs.
	must(t, st.ct.start(false))
	pid, err := st.ct.pid()
	must(t, err)
	defer func() { _ = unix.Kill(pid, unix.SIGKILL); _, _ = st.ct.wait() }()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	must(t, err)
	// libcontainer also needs the devices hierarchy for its device rules;
	// nsinit's runs, whose user namespace refuses device nodes, do not.
	want := map[string]bool{"memory": true, "pids": true}
	if st.ct.kind() == LauncherLibcontainer {
		want["devices"] = true
	}
	joined := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			t.Fatalf("/proc/%d/cgroup: %q", pid, l)
		}
		own := strings.HasSuffix(f[2], "/kptr/"+st.id)
		for _, c := range strings.Split(f[1], ",") {
			if c == "" {
				c = "unified"
			}
			if own && !want[c] {
				t.Errorf("the run joined the %s hierarchy (%s)", c, l)
			}
			if own {
				joined[c] = true
			}
		}
	}
	for c := range want {
		if !joined[c] {
			t.Errorf("the run is not in its own %s cgroup:\n%s", c, b)
		}
	}
	paths := runCgroupPaths(&cgroups.Cgroup{Parent: "kptr", Name: st.id})
	for file, v := range map[string]string{
		filepath.Join(paths["pids"], "pids.max"):                "99",
		filepath.Join(paths["memory"], "memory.limit_in_bytes"): strconv.Itoa(64 << 20),
	} {
		got, err := os.ReadFile(file)
		if err != nil || strings.TrimSpace(string(got)) != v {
			t.Errorf("%s = %q (%v), want %s", file, got, err, v)
		}
	}
}

var _ = io.EOF

// Invocation mounts (kpt fn eval --mount): visible where asked, read-only
// when asked; a target inside the image that does not exist is refused
// rather than created in the cache.
func TestInvocationMounts(t *testing.T) {
	host := filepath.Join(testTmp, "mount-src")
	must(t, os.MkdirAll(host, 0o755))
	must(t, os.WriteFile(filepath.Join(host, "data.txt"), []byte("hello"), 0o644))
	bothRootfs(t, func(t *testing.T, rootfs string) {
		before := snapshot(t, rootfs)
		inv := runtime.Invocation{Mounts: []runtime.Mount{{Source: host, Target: "/work", ReadOnly: true}}}
		_, f := runIn(t, rootfs, inv, "read", "/work/data.txt")
		if f["/work/data.txt"] != "readable 5 bytes" {
			t.Errorf("mounted file: %q", f["/work/data.txt"])
		}
		_, f = runIn(t, rootfs, inv, "write", "/work/new")
		if f["/work/new"] == "written" {
			t.Error("read-only mount writable")
		}
		b := testBundle(t, "noread")
		b.Rootfs = rootfs
		res, err := sandbox(t).Run(context.Background(), b, runtime.Invocation{Mounts: []runtime.Mount{{Source: host, Target: "/etc/newdir"}}})
		if sandbox(t).Overlay() {
			// The mount point is created in the run's upper layer, never in the image.
			if err != nil || res.ExitCode != 0 {
				t.Errorf("with an overlay a missing mount target is created in the run's upper layer: %v %s", err, res.Stderr)
			}
		} else if err == nil {
			t.Error("mount target created inside the image")
		}
		if after := snapshot(t, rootfs); after != before {
			t.Fatal("cached rootfs changed by invocation mounts")
		}
	})
}

// Own ipc namespace: a System V shared memory segment of the host is not
// visible to the function.
func TestIPCNamespace(t *testing.T) {
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
	must(t, err)
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	host, err := os.ReadFile("/proc/sysvipc/shm")
	must(t, err)
	if !strings.Contains(string(host), " "+strconv.Itoa(id)+" ") {
		t.Fatalf("the host segment %d is not in the host's /proc/sysvipc/shm:\n%s", id, host)
	}
	b := testBundle(t)
	b.Config.Entrypoint = []string{"/bin/cat", "/proc/sysvipc/shm"}
	res, err := sandbox(t).Run(context.Background(), b, runtime.Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
	}
	if lines := strings.Count(strings.TrimSpace(string(res.Stdout)), "\n"); lines != 0 {
		t.Fatalf("the function sees shared memory segments:\n%s", res.Stdout)
	}
}
