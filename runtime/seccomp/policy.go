package seccomp

import (
	"golang.org/x/sys/unix"
)

// DeniedSyscalls fail with EPERM inside the sandbox: every call Docker's
// and containerd's default profiles refuse to a container without
// capabilities (kernel modules, clocks, keyrings, mounts, namespaces,
// tracing, bpf, io_uring, swap, reboot, obsolete calls), and a few more
// (see the README's sandbox section, which compares the profiles call by
// call; TestSeccompCoversDockerDefault keeps this list a superset of
// Docker's). A KRM function reads YAML and writes YAML; it needs none of
// them. A name the linked libseccomp does not know is skipped by
// libcontainer: such calls (the newest kernels') are allowed.
var DeniedSyscalls = []string{
	"_sysctl", "acct", "add_key", "adjtimex", "afs_syscall", "bpf", "chroot",
	"clock_adjtime", "clock_settime", "create_module", "delete_module",
	"fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
	"get_kernel_syms", "get_mempolicy", "getpmsg", "init_module",
	// io_uring: a second system call interface that seccomp cannot see into,
	// and a steady source of kernel exploits (Docker and containerd deny it
	// since 2023).
	"io_uring_enter", "io_uring_register", "io_uring_setup",
	"ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
	"listns", "lookup_dcookie", "lsm_get_self_attr", "lsm_list_modules",
	"lsm_set_self_attr", "mbind", "migrate_pages", "mount", "mount_setattr",
	"move_mount", "move_pages", "name_to_handle_at", "nfsservctl",
	"open_by_handle_at", "open_tree", "open_tree_attr", "perf_event_open",
	"pidfd_getfd", "pivot_root", "process_madvise", "process_vm_readv",
	"process_vm_writev", "ptrace", "putpmsg", "query_module", "quotactl",
	"quotactl_fd", "reboot", "request_key", "security", "set_mempolicy",
	"set_mempolicy_home_node", "setdomainname", "sethostname", "setns",
	"settimeofday", "stime", "swapoff", "swapon", "syslog", "sysfs", "tuxcall",
	"umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vhangup",
	"vm86", "vm86old", "vserver",
}

// NamespaceFlags may not be passed to clone: a function creates no namespaces.
var NamespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
	unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP,
}
