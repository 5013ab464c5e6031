package runtime

import (
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside the sandbox: the calls Docker's and
// containerd's default profiles refuse to unprivileged containers (kernel
// modules, clocks, keyrings, mounts, namespaces, tracing, bpf, swap, reboot).
// A KRM function reads YAML and writes YAML; it needs none of them.
var deniedSyscalls = []string{
	"acct", "add_key", "adjtimex", "bpf", "clock_adjtime", "clock_settime",
	"create_module", "delete_module", "finit_module", "fanotify_init",
	"fsconfig", "fsmount", "fsopen", "fspick", "get_kernel_syms", "get_mempolicy",
	"init_module", "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load",
	"keyctl", "lookup_dcookie", "mbind", "mount", "mount_setattr", "move_mount",
	"move_pages", "name_to_handle_at", "nfsservctl", "open_by_handle_at",
	"open_tree", "perf_event_open", "pivot_root",
	"process_vm_readv", "process_vm_writev", "ptrace", "query_module",
	"quotactl", "quotactl_fd", "reboot", "request_key", "set_mempolicy",
	"setns", "settimeofday", "stime", "swapoff", "swapon", "syslog",
	"umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat",
	"vhangup", "vm86", "vm86old",
}

// namespaceFlags may not be passed to clone: a function creates no namespaces.
var namespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
}

// defaultSeccomp is the profile applied when kptr is built with the seccomp
// tag: allow by default, refuse the calls above with EPERM, refuse clone with
// any namespace flag, and make clone3 (whose flags a filter cannot inspect)
// fail with ENOSYS so libc falls back to clone, as Docker's profile does.
func defaultSeccomp() *configs.Seccomp {
	eperm, enosys := uint(unix.EPERM), uint(unix.ENOSYS)
	s := &configs.Seccomp{DefaultAction: configs.Allow}
	for _, name := range deniedSyscalls {
		s.Syscalls = append(s.Syscalls, &configs.Syscall{Name: name, Action: configs.Errno, ErrnoRet: &eperm})
	}
	for _, f := range namespaceFlags {
		s.Syscalls = append(s.Syscalls, &configs.Syscall{Name: "clone", Action: configs.Errno, ErrnoRet: &eperm,
			Args: []*configs.Arg{{Index: 0, Value: f, ValueTwo: f, Op: configs.MaskEqualTo}}})
	}
	s.Syscalls = append(s.Syscalls, &configs.Syscall{Name: "clone3", Action: configs.Errno, ErrnoRet: &enosys})
	return s
}
