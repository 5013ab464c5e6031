package namespace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

func baseSpec() runSpec {
	return runSpec{
		ID: "kptr-1-1", Root: "/state/kptr-1-1.root", Image: "/cache/rootfs/abc",
		Entries: []entry{{Name: "bin", Kind: entryDir}, {Name: "etc", Kind: entryDir}, {Name: "tmp", Kind: entryDir},
			{Name: "proc", Kind: entryDir}, {Name: "lib", Kind: entrySymlink, Target: "usr/lib"}, {Name: "VERSION", Kind: entryFile}},
		Proc:   runtime.Process{Args: []string{"/usr/local/bin/function"}, Home: "/home/nobody", UID: 0, GID: 0},
		Limits: runtime.Limits{Memory: 1 << 30, Pids: 1024, TmpSize: 1 << 20},
		Feat:   Features{UID: 999, GID: 999, FreshProc: true, CgroupNS: true, HardLimits: map[int]uint64{unix.RLIMIT_NPROC: 100}},
	}
}

func mountAt(c *configs.Config, dst string) *configs.Mount {
	for _, m := range c.Mounts {
		if m.Destination == dst {
			return m
		}
	}
	return nil
}

// The configuration is the whole sandbox: check each promise in it, without
// starting anything.
func TestBuildConfigRootless(t *testing.T) {
	s := baseSpec()
	s.HomeMount = true
	c, err := buildConfig(s)
	must(t, err)
	for _, ns := range []configs.NamespaceType{configs.NEWUSER, configs.NEWNS, configs.NEWPID, configs.NEWIPC, configs.NEWUTS, configs.NEWNET, configs.NEWCGROUP} {
		if !c.Namespaces.Contains(ns) {
			t.Errorf("namespace %s missing", ns)
		}
	}
	if len(c.Networks) != 1 || c.Networks[0].Type != "loopback" {
		t.Errorf("networks %v, want loopback only", c.Networks)
	}
	if !slices.Equal(c.UIDMappings, []configs.IDMap{{ContainerID: 0, HostID: 999, Size: 1}}) || c.GIDMappings[0].HostID != 999 {
		t.Errorf("id maps %v %v", c.UIDMappings, c.GIDMappings)
	}
	if !c.RootlessEUID || !c.RootlessCgroups || !c.NoNewPrivileges || !c.Readonlyfs {
		t.Errorf("rootless %v cgroups %v nnp %v ro %v", c.RootlessEUID, c.RootlessCgroups, c.NoNewPrivileges, c.Readonlyfs)
	}
	caps := c.Capabilities
	if caps == nil || len(caps.Bounding)+len(caps.Effective)+len(caps.Permitted)+len(caps.Inheritable)+len(caps.Ambient) != 0 {
		t.Errorf("capabilities %+v, want none", caps)
	}
	if c.OomScoreAdj == nil || *c.OomScoreAdj != 1000 || c.ParentDeathSignal != int(unix.SIGKILL) {
		t.Errorf("oom %v pdeathsig %d", c.OomScoreAdj, c.ParentDeathSignal)
	}
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"} {
		if !slices.Contains(c.MaskPaths, p) {
			t.Errorf("%s not masked", p)
		}
	}
	if !slices.Contains(c.ReadonlyPaths, "/proc/sys") || !slices.Contains(c.ReadonlyPaths, "/proc/sysrq-trigger") {
		t.Errorf("readonly paths %v", c.ReadonlyPaths)
	}
	// Image directories and files bound read-only, nosuid, nodev, from the
	// cache; symlinks are not mounts; tmp and proc come from the sandbox.
	for _, name := range []string{"bin", "etc", "VERSION"} {
		m := mountAt(c, "/"+name)
		if m == nil || m.Source != filepath.Join(s.Image, name) || m.Flags&(unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV) != unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV {
			t.Errorf("/%s mount %+v", name, m)
		}
	}
	if m := mountAt(c, "/lib"); m != nil {
		t.Errorf("symlink bound: %+v", m)
	}
	if m := mountAt(c, "/tmp"); m == nil || m.Device != "tmpfs" || !strings.Contains(m.Data, "size=1048576") {
		t.Errorf("/tmp %+v", m)
	}
	if m := mountAt(c, "/proc"); m == nil || m.Device != "proc" {
		t.Errorf("/proc %+v", m)
	}
	if m := mountAt(c, "/home/nobody"); m == nil || m.Device != "tmpfs" {
		t.Errorf("$HOME %+v", m)
	}
	var devs []string
	for _, d := range c.Devices {
		devs = append(devs, d.Path)
	}
	slices.Sort(devs)
	if !slices.Equal(devs, []string{"/dev/null", "/dev/random", "/dev/urandom", "/dev/zero"}) {
		t.Errorf("devices %v", devs)
	}
	// The pids limit is lowered to the hard limit we have (no CAP_SYS_RESOURCE).
	for _, r := range c.Rlimits {
		if r.Type == unix.RLIMIT_NPROC && (r.Hard != 100 || r.Soft != 100) {
			t.Errorf("RLIMIT_NPROC %+v, want lowered to the hard limit 100", r)
		}
	}
	if c.Cgroups == nil || !c.Cgroups.Rootless || c.Cgroups.Resources.Memory != 0 {
		t.Errorf("cgroups %+v: no limits when not delegated", c.Cgroups)
	}
	if c.Seccomp != nil {
		t.Error("a libseccomp profile in libcontainer's configuration: the filter is kptr's own (runtime/seccomp), loaded by nsinit or runtime/containerinit")
	}
}

func TestBuildConfigVariants(t *testing.T) {
	s := baseSpec()
	s.Inv.Network = true
	s.ResolvConf = true
	s.Feat.FreshProc = false
	s.Feat.Root, s.Feat.Cgroups = true, true
	s.Proc.UID, s.Proc.GID = runtime.Nobody, runtime.Nobody
	s.Inv.Mounts = []runtime.Mount{{Source: "/host/data", Target: "/data", ReadOnly: true}}
	c, err := buildConfig(s)
	must(t, err)
	if c.Namespaces.Contains(configs.NEWNET) || len(c.Networks) != 0 {
		t.Error("Network: want the host network namespace")
	}
	if m := mountAt(c, "/etc/resolv.conf"); m == nil || m.Source != "/etc/resolv.conf" {
		t.Errorf("resolv.conf %+v", m)
	}
	if m := mountAt(c, "/proc"); m == nil || m.Source != "/proc" || m.Flags&unix.MS_BIND == 0 {
		t.Errorf("without a fresh procfs /proc must be bound: %+v", m)
	}
	if c.UIDMappings[0] != (configs.IDMap{ContainerID: 0, HostID: runtime.RootHostIDBase, Size: runtime.RootHostIDSize}) || c.RootlessEUID {
		t.Errorf("root: id maps %v rootless %v", c.UIDMappings, c.RootlessEUID)
	}
	if c.Cgroups.Rootless || c.Cgroups.Resources.Memory != 1<<30 || *c.Cgroups.Resources.PidsLimit != 1024 {
		t.Errorf("cgroups %+v", c.Cgroups.Resources)
	}
	if c.Seccomp != nil {
		t.Error("a libseccomp profile in libcontainer's configuration: the filter is kptr's own (runtime/seccomp), loaded by nsinit or runtime/containerinit")
	}
	if m := mountAt(c, "/data"); m == nil || m.Flags&unix.MS_RDONLY == 0 {
		t.Errorf("read-only mount %+v", m)
	}

	// Rootless, only container root exists: any other uid is refused.
	s = baseSpec()
	s.Proc.UID = 65534
	if _, err := buildConfig(s); err == nil {
		t.Error("unmapped uid accepted")
	}
	s = baseSpec()
	s.Inv.Mounts = []runtime.Mount{{Source: "relative", Target: "/x"}}
	if _, err := buildConfig(s); err == nil {
		t.Error("relative mount source accepted")
	}
	s.Inv.Mounts = []runtime.Mount{{Source: "/x", Target: "/proc/sys"}}
	if _, err := buildConfig(s); err == nil {
		t.Error("mount over /proc accepted")
	}
}

// Docker's rules for the image config, resolved inside the rootfs only.
func TestResolveProcess(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/local/bin", "usr/bin", "bin", "etc", "work", "home/fn"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(root, "usr/local/bin/function"), []byte("x"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "usr/bin/function"), []byte("x"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "bin/tool"), []byte("x"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "bin/data"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\nfn:x:1000:1001::/home/fn:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/false\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "etc/group"), []byte("staff:x:50:\n"), 0o644))
	// An absolute symlink must resolve inside the rootfs, never on the host.
	must(t, os.Symlink("/bin", filepath.Join(root, "usr/local/sbin")))
	must(t, os.Symlink("/etc/shadow", filepath.Join(root, "bin/escape")))

	cfg := v1.Config{Entrypoint: []string{"function"}, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/bin"}}
	p, err := runtime.ResolveProcess(root, cfg, runtime.Invocation{}, true)
	must(t, err)
	if p.Args[0] != "/usr/local/bin/function" || p.UID != runtime.Nobody || p.Cwd != "/" {
		t.Errorf("%+v", p)
	}
	cfg.Entrypoint = []string{"tool"} // found through the absolute symlink /usr/local/sbin -> /bin, in the rootfs
	if p, err = runtime.ResolveProcess(root, cfg, runtime.Invocation{}, true); err != nil || p.Args[0] != "/usr/local/sbin/tool" {
		t.Errorf("tool: %+v %v", p, err)
	}
	cfg.Entrypoint = []string{"escape"}
	if _, err = runtime.ResolveProcess(root, cfg, runtime.Invocation{}, true); err == nil {
		t.Error("a symlink to a host path resolved")
	}
	cfg.Entrypoint = []string{"data"}
	if _, err = runtime.ResolveProcess(root, cfg, runtime.Invocation{}, true); err == nil {
		t.Error("non-executable file accepted")
	}
	// Cmd alone; WorkingDir; relative path against WorkingDir; User by name and group.
	cfg = v1.Config{Cmd: []string{"../bin/tool", "-x"}, WorkingDir: "/work", User: "fn:staff"}
	p, err = runtime.ResolveProcess(root, cfg, runtime.Invocation{Env: []string{"A=1"}}, true)
	must(t, err)
	if !slices.Equal(p.Args, []string{"/bin/tool", "-x"}) || p.Cwd != "/work" || p.UID != 1000 || p.GID != 50 || p.Home != "/home/fn" {
		t.Errorf("%+v", p)
	}
	if !slices.Contains(p.Env, "PATH="+runtime.DefaultPath) || !slices.Contains(p.Env, "A=1") || !slices.Contains(p.Env, "HOME=/home/fn") {
		t.Errorf("env %v", p.Env)
	}
	// Single-uid map: everything runs as container root.
	if p, _ = runtime.ResolveProcess(root, cfg, runtime.Invocation{}, false); p.UID != 0 || p.GID != 0 {
		t.Errorf("rootless uid %d:%d", p.UID, p.GID)
	}
	cfg.User = "1000"
	if p, _ = runtime.ResolveProcess(root, cfg, runtime.Invocation{}, true); p.UID != 1000 || p.GID != 1001 {
		t.Errorf("numeric user %d:%d", p.UID, p.GID)
	}
	for _, bad := range []v1.Config{
		{Cmd: []string{"/bin/tool"}, User: "ghost"},
		{Cmd: []string{"/bin/tool"}, User: "fn:ghosts"},
		{Cmd: []string{"/bin/tool"}, WorkingDir: "/missing"},
		{Cmd: []string{"/bin/tool"}, WorkingDir: "relative"},
		{},
	} {
		if _, err := runtime.ResolveProcess(root, bad, runtime.Invocation{}, true); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if got := runtime.MergeEnv([]string{"A=1", "B=2", "junk"}, []string{"A=3", "C=4"}); !slices.Equal(got, []string{"A=3", "B=2", "C=4"}) {
		t.Errorf("mergeEnv %v", got)
	}
}
