package namespace

import (
	"github.com/kptr-dev/kptr/runtime/seccomp"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// defaultSeccomp is the profile applied when kptr is built with the seccomp
// tag: allow by default, refuse the calls above with EPERM, refuse clone with
// any namespace flag, and make clone3 (whose flags a filter cannot inspect)
// fail with ENOSYS so libc falls back to clone, as Docker's profile does.
func defaultSeccomp() *configs.Seccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	s := &configs.Seccomp{DefaultAction: configs.Allow}
	for _, name := range seccomp.DeniedSyscalls {
		s.Syscalls = append(s.Syscalls, &configs.Syscall{Name: name, Action: configs.Errno, ErrnoRet: &eperm})
	}
	for _, f := range seccomp.NamespaceFlags {
		s.Syscalls = append(s.Syscalls, &configs.Syscall{Name: "clone", Action: configs.Errno, ErrnoRet: &eperm,
			Args: []*configs.Arg{{Index: 0, Value: f, ValueTwo: f, Op: configs.MaskEqualTo}}})
	}
	s.Syscalls = append(s.Syscalls, &configs.Syscall{Name: "clone3", Action: configs.Errno, ErrnoRet: &enosys})
	return s
}
