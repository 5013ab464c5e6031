//go:build amd64 || arm64

package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ExtraDenied are refused by the landlock tier on top of DeniedSyscalls
// (the namespace tier's profile): without namespaces around the function
// these reach the host kernel's shared state directly. io_uring bypasses
// seccomp for the operations it queues; pidfd_getfd takes another process's
// file descriptors.
var ExtraDenied = []string{"io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_getfd", "open_tree_attr"}

// MetadataCalls change a file's mode, owner, times or extended attributes:
// Landlock does not govern them, so where the function's uid owns the
// cached image (kptr unprivileged: the cache is the sidecar's), they are
// refused (EPERM) so that a run cannot chmod, chown, touch or tag the cache.
// A function then cannot change these in its own run directory either.
var MetadataCalls = []string{
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "fchownat", "lchown",
	"setxattr", "lsetxattr", "fsetxattr", "setxattrat", "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	"utime", "utimes", "utimensat", "futimesat",
}

// Supported: Filter is built for this architecture.
const Supported = true

// Filter builds the landlock tier's classic-BPF seccomp program:
// calls of another architecture kill the process; DeniedSyscalls and
// ExtraDenied (and, with noMetadata, MetadataCalls) fail with EPERM; clone with any namespace flag fails with
// EPERM and clone3 (whose flags live in memory a filter cannot read) with
// ENOSYS so libc falls back to clone, as Docker's profile does; unless
// network is allowed, socket(2) for any family but AF_UNIX fails with
// EAFNOSUPPORT. Everything else is allowed.
func Filter(network, noMetadata bool) []unix.SockFilter {
	const (
		offNr   = 0
		offArch = 4
		offArg0 = 16 // low 32 bits of args[0] (little endian)
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	errno := func(e unix.Errno) unix.SockFilter { return stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(e)) }
	allow := stmt(ret, unix.SECCOMP_RET_ALLOW)
	p := []unix.SockFilter{
		stmt(ld, offArch),
		jump(jeq, auditArch, 1, 0),
		stmt(ret, unix.SECCOMP_RET_KILL_PROCESS),
		stmt(ld, offNr),
	}
	if x32Bit != 0 {
		p = append(p, jump(jge, x32Bit, 0, 1), errno(unix.EPERM))
	}
	denied := append(append([]string(nil), DeniedSyscalls...), ExtraDenied...)
	if noMetadata {
		denied = append(denied, MetadataCalls...)
	}
	for _, name := range denied {
		if nr, ok := Sysnums[name]; ok {
			p = append(p, jump(jeq, nr, 0, 1), errno(unix.EPERM))
		}
	}
	p = append(p, jump(jeq, unix.SYS_CLONE3, 0, 1), errno(unix.ENOSYS))
	var ns uint32
	for _, f := range NamespaceFlags {
		ns |= uint32(f)
	}
	p = append(p,
		jump(jeq, unix.SYS_CLONE, 0, 4),
		stmt(ld, offArg0),
		jump(jset, ns, 0, 1),
		errno(unix.EPERM),
		allow,
	)
	if !network {
		p = append(p,
			jump(jeq, unix.SYS_SOCKET, 0, 4),
			stmt(ld, offArg0),
			jump(jeq, unix.AF_UNIX, 0, 1),
			allow,
			errno(unix.EAFNOSUPPORT),
		)
	}
	return append(p, allow)
}

// Load installs the filter on the calling thread (no_new_privs must
// be set); the program it executes keeps it.
func Load(network, noMetadata bool) error {
	f := Filter(network, noMetadata)
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	return nil
}
