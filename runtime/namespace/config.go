package namespace

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/opencontainers/cgroups"
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	"golang.org/x/sys/unix"
)

// Features is what the probes found about the environment; buildConfig
// adapts the sandbox to it.
type Features struct {
	// Root: kptr runs with euid 0. Then container ids 0..65535 map to a
	// dedicated host range (functions run as nobody); otherwise only
	// container root is mapped, to the invoking uid.
	Root bool
	// UID and GID of the invoking process.
	UID, GID int
	// FreshProc: a new procfs can be mounted; else the existing /proc is bound.
	FreshProc bool
	// CgroupNS: the kernel has cgroup namespaces.
	CgroupNS bool
	// Cgroups: kptr may create cgroups, so memory and pids limits are enforced
	// by the kernel's cgroup controllers.
	Cgroups bool
	// Overlay: overlayfs (userxattr) can be mounted in a user namespace
	// with its upper and work directories in the run-state directory, so a
	// run sees a writable, throw-away view of the image (see runSpec.RW).
	Overlay bool
	// Hostname: sethostname works in a new uts namespace (CRI-O's default
	// seccomp profile refuses it without CAP_SYS_ADMIN); else runs keep the
	// inherited name.
	Hostname bool
	// HardLimits are the current hard rlimits; a sandbox can only lower them.
	HardLimits map[int]uint64
}

// entryKind is the type of a top-level entry of an image root filesystem.
type entryKind int

const (
	entryDir entryKind = iota
	entryFile
	entrySymlink
)

type entry struct {
	Name   string
	Kind   entryKind
	Target string      // for symlinks
	Mode   os.FileMode // for directories: permission, setgid and sticky bits
}

// runSpec is everything that determines one run's sandbox.
type runSpec struct {
	ID string
	// Direct: the cached rootfs is the container root itself (one bind,
	// read-only before the function starts) because it already has every
	// mount point the sandbox needs; otherwise Root is a private directory
	// of mount points onto which each top-level entry of Image is bound.
	Direct  bool
	Root    string  // the run's private root directory (mount points, symlinks)
	Image   string  // the cached rootfs, bound read-only
	Entries []entry // top-level entries of Image
	Proc    runtime.Process
	// HomeMount: $HOME is a directory of the image other than / and /tmp,
	// so it gets its own tmpfs.
	HomeMount  bool
	ResolvConf bool // the image has /etc/resolv.conf (bound from the host when networked)
	// RW, when set, is the run's private directory holding an overlay's
	// upper (RW/u) and work (RW/w) directories: the whole image is the
	// overlay's read-only lower layer, mounted first on /tmp (hidden later
	// by the /tmp tmpfs), and each top-level directory of the image (not a
	// symlink, not /proc, /dev, /sys, /tmp) is bound from it, writable. So
	// the function may write anywhere below them its uid may, and nothing
	// of it reaches the cache or another run. One overlay rather than one
	// per directory: tearing an overlay down costs an RCU grace period.
	RW     string
	Inv    runtime.Invocation
	Limits runtime.Limits
	Feat   Features
}

// skippedTop are image top-level entries the sandbox provides itself.
var skippedTop = map[string]bool{"proc": true, "dev": true, "sys": true, "tmp": true}

// Paths masked and made read-only, as in runc's default spec.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
	minimalDevices = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/random": true, "/dev/urandom": true}
)

// buildConfig is the whole sandbox as one libcontainer configuration. It is
// a pure function of the run spec: it reads nothing and starts nothing.
func buildConfig(s runSpec) (*configs.Config, error) {
	const (
		roBind = unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV
		tmpfs  = unix.MS_NOSUID | unix.MS_NODEV
	)
	c := &configs.Config{
		Rootfs:            s.Root,
		Readonlyfs:        true,
		RootPropagation:   unix.MS_PRIVATE | unix.MS_REC,
		ParentDeathSignal: int(unix.SIGKILL),
		Capabilities:      &configs.Capabilities{},
		NoNewPrivileges:   true,
		NoNewKeyring:      true,
		OomScoreAdj:       ptr(1000),
		MaskPaths:         maskedPaths,
		ReadonlyPaths:     readonlyPaths,
		RootlessEUID:      !s.Feat.Root,
		RootlessCgroups:   !s.Feat.Cgroups,
		Umask:             ptr(uint32(0o022)),
	}
	if s.Feat.Hostname {
		// Only where the profile allows it: the function needs no hostname
		// of its own, and CRI-O's default profile refuses sethostname.
		c.Hostname = "kptr"
	}
	ns := []configs.Namespace{
		{Type: configs.NEWUSER}, {Type: configs.NEWNS}, {Type: configs.NEWPID},
		{Type: configs.NEWIPC}, {Type: configs.NEWUTS},
	}
	if !s.Inv.Network {
		ns = append(ns, configs.Namespace{Type: configs.NEWNET})
		c.Networks = []*configs.Network{{Type: "loopback"}}
	}
	if s.Feat.CgroupNS {
		ns = append(ns, configs.Namespace{Type: configs.NEWCGROUP})
	}
	c.Namespaces = configs.Namespaces(ns)

	if s.Feat.Root {
		c.UIDMappings = []configs.IDMap{{ContainerID: 0, HostID: runtime.RootHostIDBase, Size: runtime.RootHostIDSize}}
		c.GIDMappings = []configs.IDMap{{ContainerID: 0, HostID: runtime.RootHostIDBase, Size: runtime.RootHostIDSize}}
	} else {
		if s.Proc.UID != 0 || s.Proc.GID != 0 {
			return nil, fmt.Errorf("uid %d:%d is not mapped (only container root is, to uid %d)", s.Proc.UID, s.Proc.GID, s.Feat.UID)
		}
		c.UIDMappings = []configs.IDMap{{ContainerID: 0, HostID: int64(s.Feat.UID), Size: 1}}
		c.GIDMappings = []configs.IDMap{{ContainerID: 0, HostID: int64(s.Feat.GID), Size: 1}}
	}

	// The image, read-only: every top-level directory and file bound from the
	// cache into the run's own root (which holds only mount points and copies
	// of top-level symlinks), so nothing ever writes into the cache.
	if s.Direct {
		c.Rootfs = s.Image
	}
	if s.RW != "" {
		// libcontainer's root must be a directory it binds, never an
		// overlay; so the overlay goes on /tmp (a mount point every root
		// has) and its directories are bound where they belong. The kernel
		// and libcontainer resolve these paths in the run's mount namespace
		// before pivot_root, where <root>/tmp is the overlay by then.
		c.Mounts = append(c.Mounts, &configs.Mount{
			Source: "overlay", Destination: "/tmp", Device: "overlay",
			Flags: unix.MS_NOSUID | unix.MS_NODEV,
			Data:  overlayData(s.Image, s.RW),
		})
	}
	for _, e := range s.Entries {
		if skippedTop[e.Name] || e.Kind == entrySymlink {
			continue
		}
		if s.RW != "" && e.Kind == entryDir {
			// A plain bind: it inherits nosuid and nodev from the overlay,
			// and libcontainer then skips a remount per directory.
			c.Mounts = append(c.Mounts, &configs.Mount{
				Source: filepath.Join(c.Rootfs, "tmp", e.Name), Destination: "/" + e.Name,
				Device: "bind", Flags: unix.MS_BIND | unix.MS_REC,
			})
			continue
		}
		if s.Direct {
			continue
		}
		c.Mounts = append(c.Mounts, &configs.Mount{
			Source: filepath.Join(s.Image, e.Name), Destination: "/" + e.Name,
			Device: "bind", Flags: roBind,
		})
	}
	if s.Feat.FreshProc {
		c.Mounts = append(c.Mounts, &configs.Mount{Source: "proc", Destination: "/proc", Device: "proc",
			Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC})
	} else {
		c.Mounts = append(c.Mounts, &configs.Mount{Source: "/proc", Destination: "/proc", Device: "bind",
			Flags: unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC})
	}
	c.Mounts = append(c.Mounts,
		&configs.Mount{Source: "tmpfs", Destination: "/dev", Device: "tmpfs",
			Flags: unix.MS_NOSUID | unix.MS_STRICTATIME | unix.MS_NOEXEC, Data: "mode=755,size=64k"},
		&configs.Mount{Source: "tmpfs", Destination: "/tmp", Device: "tmpfs", Flags: tmpfs,
			Data: fmt.Sprintf("mode=1777,size=%d", tmpSize(s.Limits))},
	)
	if s.HomeMount {
		c.Mounts = append(c.Mounts, &configs.Mount{Source: "tmpfs", Destination: s.Proc.Home, Device: "tmpfs", Flags: tmpfs,
			Data: fmt.Sprintf("mode=755,uid=%d,gid=%d,size=%d", s.Proc.UID, s.Proc.GID, tmpSize(s.Limits))})
	}
	if s.Inv.Network && s.ResolvConf {
		c.Mounts = append(c.Mounts, &configs.Mount{Source: "/etc/resolv.conf", Destination: "/etc/resolv.conf",
			Device: "bind", Flags: roBind})
	}
	for _, m := range s.Inv.Mounts {
		if !filepath.IsAbs(m.Source) || !path.IsAbs(m.Target) {
			return nil, fmt.Errorf("mount %s:%s: source and target must be absolute", m.Source, m.Target)
		}
		t := path.Clean(m.Target)
		if t == "/" || strings.HasPrefix(t, "/proc") || strings.HasPrefix(t, "/dev") {
			return nil, fmt.Errorf("mount target %s is not allowed", m.Target)
		}
		flags := unix.MS_BIND | unix.MS_REC | unix.MS_NOSUID | unix.MS_NODEV
		if m.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		c.Mounts = append(c.Mounts, &configs.Mount{Source: m.Source, Destination: t, Device: "bind", Flags: flags})
	}
	for _, d := range specconv.AllowedDevices {
		if minimalDevices[d.Path] {
			c.Devices = append(c.Devices, d)
		}
	}

	c.Rlimits = append(c.Rlimits, configs.Rlimit{Type: unix.RLIMIT_CORE})
	if s.Limits.Pids > 0 {
		c.Rlimits = append(c.Rlimits, lowered(s.Feat, unix.RLIMIT_NPROC, uint64(s.Limits.Pids)))
	}
	if s.Limits.NoFile > 0 {
		c.Rlimits = append(c.Rlimits, lowered(s.Feat, unix.RLIMIT_NOFILE, s.Limits.NoFile))
	}

	// Device rules: the four nodes of /dev (in a user namespace mknod is
	// refused anyway, the rules matter where cgroups are enforced).
	res := &cgroups.Resources{}
	for _, d := range c.Devices {
		r := d.Rule
		res.Devices = append(res.Devices, &r)
	}
	if s.Feat.Cgroups {
		if s.Limits.Memory > 0 {
			res.Memory = s.Limits.Memory
			res.MemorySwap = s.Limits.Memory
		}
		if s.Limits.Pids > 0 {
			res.PidsLimit = ptr(s.Limits.Pids)
		}
	}
	c.Cgroups = &cgroups.Cgroup{Name: s.ID, Parent: "kptr", Rootless: !s.Feat.Cgroups, Resources: res}
	return c, nil
}

// overlayOptions are the options of every overlay kptr mounts (the probe
// mounts with the same): userxattr because the mount is made inside a user
// namespace (trusted.* xattrs need host CAP_SYS_ADMIN); redirect_dir and
// metacopy are off by default and must stay off with userxattr.
const overlayOptions = "userxattr,volatile"

// overlayData is the mount data of one overlay: lower is the cached
// directory, rw holds u (upper) and w (work).
func overlayData(lower, rw string) string {
	return "lowerdir=" + lower + ",upperdir=" + rw + "/u,workdir=" + rw + "/w," + overlayOptions
}

// overlaySafePath: a path can be spelled in overlay mount data (which
// splits on ',' and ':' and unescapes '\\').
func overlaySafePath(p string) bool { return !strings.ContainsAny(p, ",:\\=") }

// lowered returns an rlimit of want, never above the current hard limit:
// without CAP_SYS_RESOURCE a limit can only go down.
func lowered(f Features, typ int, want uint64) configs.Rlimit {
	if hard, ok := f.HardLimits[typ]; ok && hard < want {
		want = hard
	}
	return configs.Rlimit{Type: typ, Soft: want, Hard: want}
}

func tmpSize(l runtime.Limits) int64 {
	if l.TmpSize > 0 {
		return l.TmpSize
	}
	return runtime.DefaultLimits.TmpSize
}

func ptr[T any](v T) *T { return &v }
