package landlock

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file speaks the kernel's Landlock interface (landlock_create_ruleset,
// landlock_add_rule, landlock_restrict_self) through golang.org/x/sys/unix.
// A ruleset restricts the thread that calls restrict_self and whatever it
// executes; the landlock tier calls it on the thread that then calls execve
// (see child.go), so no all-threads machinery (psx) is needed.

// landlockABI is the running kernel's Landlock ABI version: 0 when Landlock
// is not built in or not enabled (lsm=), else 1 (Linux 5.13) and up.
func landlockABI() int {
	v, _ := landlockVersion()
	return v
}

// landlockVersion is landlockABI with the kernel's answer when it is 0:
// EOPNOTSUPP (built in, disabled at boot) or ENOSYS (not built in, or a
// seccomp profile refuses the call).
func landlockVersion() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

// What each Landlock ABI version added that the tier uses, and the first
// kernel that has it: the README's sandbox table and kptr doctor quote these.
const (
	abiFS       = 1 // 5.13: file system access rights
	abiRefer    = 2 // 5.19: rename and link across directories
	abiTruncate = 3 // 6.2: truncate
	abiNet      = 4 // 6.7: TCP bind and connect
	abiIoctlDev = 5 // 6.10: ioctl on devices
	abiScope    = 6 // 6.12: signals and abstract unix sockets scoped to the domain
	// 9 (merged for Linux 7.1): connect and sendto on a pathname UNIX
	// socket are a file system access (LANDLOCK_ACCESS_FS_RESOLVE_UNIX):
	// handled, never granted outside the run directory.
	abiResolveUnix = 9
)

// landlockKernel names the first Linux release with each ABI version.
var landlockKernel = map[int]string{1: "5.13", 2: "5.19", 3: "6.2", 4: "6.7", 5: "6.10", 6: "6.12", 7: "6.15"}

// fsRights is every file system right the ABI version knows: a ruleset
// handles all of them, so whatever is not granted by a rule is denied.
func fsRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= abiRefer {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= abiTruncate {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= abiIoctlDev {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= abiResolveUnix {
		r |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	return r
}

const (
	// rightsRX: read and execute beneath the image's rootfs.
	rightsRX = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	// rightsFileRW: a character device the function may read and write (/dev/null).
	rightsFileRW = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE
)

// rulesetAttr is struct landlock_ruleset_attr as of ABI 6 (the kernel
// accepts a shorter struct than its own; x/sys/unix's has newer fields).
type rulesetAttr struct {
	fs, net, scoped uint64
}

// landlockPolicy is what one run may touch: everything else is denied.
type landlockPolicy struct {
	ReadExec  []string // directories beneath which files may be read and executed
	ReadWrite []string // directories beneath which anything but execute is allowed
	DevRW     []string // files (devices) that may be read and written
	DevRead   []string // files that may be read (devices, the host's resolver configuration)
	Network   bool     // leave TCP alone (Invocation.Network)
	// OwnProc lets the process read procFiles of its own /proc/<pid> (the
	// pid is the caller's, which execve keeps), nothing else of /proc.
	OwnProc bool
}

// restrictSelf applies p to the calling thread (and, once it calls execve,
// to the program it executes). The thread must have no_new_privs set.
func (p landlockPolicy) restrictSelf(abi int) error {
	rs, err := p.ruleset(abi)
	if err != nil {
		return err
	}
	defer unix.Close(rs)
	if p.OwnProc {
		for _, f := range procFiles {
			err := addPathRule(rs, fmt.Sprintf("/proc/%d/%s", os.Getpid(), f), procRights)
			if err != nil && !errors.Is(err, unix.ENOENT) {
				return err
			}
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// procFiles are what a landlock-tier function may read of its own
// /proc/<pid> (OwnProc): what Go, Python and Node read of their own process
// (strace of each starting a child and allocating: Node reads maps, as
// glibc's pthread_getattr_np does; Go and Node also try cgroup and
// mountinfo and do without) and the usual self-inspection files. Not the
// directory itself: its net/ lists the host's UNIX sockets by path and its
// mountinfo and mounts the host's mount table; not cgroup (the host's
// cgroup path), environ, task/, ns/ or another process's directory.
var procFiles = []string{"auxv", "cmdline", "comm", "fd", "limits", "maps", "stat", "statm", "status"}

// procRights are what OwnProc grants on each of procFiles (fd: listing it).
const procRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR

// ruleset is p as a Landlock ruleset descriptor, but for OwnProc (the rule
// on /proc/<pid> needs the pid of the process that restricts itself, which
// adds it).
func (p landlockPolicy) ruleset(abi int) (int, error) {
	if abi < abiFS {
		return -1, fmt.Errorf("landlock unavailable")
	}
	all := fsRights(abi)
	attr := rulesetAttr{fs: all}
	if abi >= abiNet && !p.Network {
		attr.net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= abiScope {
		attr.scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	size := unsafe.Sizeof(attr)
	if abi < abiScope {
		size = 16 // without "scoped": older kernels know no such field
	}
	if abi < abiNet {
		size = 8
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	rs := int(fd)
	unix.CloseOnExec(rs)
	add := func(paths []string, rights uint64) error {
		for _, p := range paths {
			if err := addPathRule(rs, p, rights&all); err != nil {
				return err
			}
		}
		return nil
	}
	rw := all &^ unix.LANDLOCK_ACCESS_FS_EXECUTE &^ unix.LANDLOCK_ACCESS_FS_MAKE_CHAR &^ unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK &^ unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	for _, r := range []struct {
		paths  []string
		rights uint64
	}{{p.ReadExec, rightsRX}, {p.ReadWrite, rw}, {p.DevRW, rightsFileRW}, {p.DevRead, unix.LANDLOCK_ACCESS_FS_READ_FILE}} {
		if err := add(r.paths, r.rights); err != nil {
			unix.Close(rs)
			return -1, err
		}
	}
	return rs, nil
}

// addPathRule allows rights beneath path (for a file: on it; only the file
// rights apply there).
func addPathRule(ruleset int, path string, rights uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("landlock rule for %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		rights &= rightsFileRW | unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(fd)}
	// The kernel reads the packed struct (12 bytes); x/sys pads it to 16.
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if errno != 0 {
		return fmt.Errorf("landlock rule for %s: %w", path, errno)
	}
	return nil
}
