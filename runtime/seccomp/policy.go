package seccomp

import "golang.org/x/sys/unix"

// kptr's policy is an allow-list, as Docker's default profile is: a call
// is let through only if it is in allowed (or passes the argument checks
// of clone, socket and personality); DeniedSyscalls fail with EPERM (known
// and dangerous: the caller must not count on them); every other call,
// known or too new for the tables, fails with ENOSYS, as on a kernel that
// lacks it, so that runtimes and libc take their fallbacks (clone3 → clone,
// statx → fstatat, ...); a call of a foreign architecture kills the
// process. TestPolicyWithinRuntimeDefaults keeps allowed within what
// Docker's and containerd's defaults let a container without capabilities
// make.

// allowed are the calls a function may make: the ones Docker's default
// profile lets a container without capabilities make (moby/profiles at
// 02e898b, the profile in test/e2e/argocd/testdata), but for those in
// DeniedSyscalls (adjtimex, clock_adjtime, name_to_handle_at: kptr refuses
// them although Docker does not) and for ptrace, process_vm_readv and
// process_vm_writev (Docker allows them from Linux 4.8; a KRM function
// never traces or reads another process), for membarrier, vmsplice and
// io_pgetevents (CRI-O's default refuses them too), and the ones only some
// architectures have. rseq stays allowed although CRI-O's refuses it:
// glibc aborts a process whose new thread cannot register rseq when its
// first thread could, which is what a filter loaded into a running process
// (runtime/containerinit, libcontainer's init) would cause. clone, clone3, socket and personality are decided
// by their arguments (Program).
var allowed = []string{
	"accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk",
	"cachestat", "capget", "capset", "chdir", "chmod", "chown", "clock_getres",
	"clock_gettime", "clock_nanosleep", "close", "close_range", "connect",
	"copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create",
	"epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
	"epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
	"execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2",
	"fadvise64", "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat",
	"fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr",
	"flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat",
	"fstatfs", "fsync", "ftruncate", "futex", "futex_requeue", "futex_wait",
	"futex_waitv", "futex_wake", "futimesat", "get_robust_list",
	"get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid",
	"geteuid", "getgid", "getgroups", "getitimer", "getpeername", "getpgid",
	"getpgrp", "getpid", "getppid", "getpriority", "getrandom", "getresgid",
	"getresuid", "getrlimit", "getrusage", "getsid", "getsockname",
	"getsockopt", "gettid", "gettimeofday", "getuid", "getxattr",
	"inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch",
	"io_cancel", "io_destroy", "io_getevents", "io_setup", "io_submit", "ioctl",
	"ioprio_get", "ioprio_set", "kill", "landlock_add_rule",
	"landlock_create_ruleset", "landlock_restrict_self", "lchown", "lgetxattr",
	"link", "linkat", "listen", "listxattr", "llistxattr", "lremovexattr",
	"lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack",
	"memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod",
	"mknodat", "mlock", "mlock2", "mlockall", "mmap", "mprotect",
	"mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend",
	"mq_unlink", "mremap", "msgctl", "msgget", "msgrcv", "msgsnd", "msync",
	"munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open",
	"openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe",
	"pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll",
	"prctl", "pread64", "preadv", "preadv2", "prlimit64", "process_mrelease",
	"pselect6", "pwrite64", "pwritev", "pwritev2", "read", "readahead",
	"readlink", "readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
	"remap_file_pages", "removexattr", "rename", "renameat", "renameat2",
	"restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending",
	"rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend",
	"rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_get_priority_max",
	"sched_get_priority_min", "sched_getaffinity", "sched_getattr",
	"sched_getparam", "sched_getscheduler", "sched_rr_get_interval",
	"sched_setaffinity", "sched_setattr", "sched_setparam",
	"sched_setscheduler", "sched_yield", "seccomp", "select", "semctl",
	"semget", "semop", "semtimedop", "sendfile", "sendmmsg", "sendmsg",
	"sendto", "set_robust_list", "set_thread_area", "set_tid_address",
	"setfsgid", "setfsuid", "setgid", "setgroups", "setitimer", "setpgid",
	"setpriority", "setregid", "setresgid", "setresuid", "setreuid",
	"setrlimit", "setsid", "setsockopt", "setuid", "setxattr", "shmat",
	"shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd",
	"signalfd4", "socketpair", "splice", "stat", "statfs", "statx", "symlink",
	"symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee",
	"tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun",
	"timer_gettime", "timer_settime", "timerfd_create", "timerfd_gettime",
	"timerfd_settime", "times", "tkill", "truncate", "umask", "uname", "unlink",
	"unlinkat", "utime", "utimensat", "utimes", "vfork", "wait4", "waitid",
	"write", "writev",
}

// DeniedSyscalls fail with EPERM in every tier: every call Docker's and
// containerd's default profiles refuse to a container without
// capabilities (kernel modules, clocks, keyrings, mounts, namespaces,
// tracing, bpf, io_uring, swap, reboot, obsolete calls), and a few more
// (the README's sandbox section compares the profiles call by call;
// TestPolicyRefusesWhatDefaultsRefuse keeps the policy at least as strict
// as theirs). A KRM function reads YAML and writes YAML; it needs none of
// them. A name without a number on an architecture is not a call there.
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

// MetadataCalls change a file's mode, owner, times or extended attributes:
// Landlock does not govern them, so where the function's uid owns the
// cached image (kptr unprivileged: the cache is the sidecar's), the
// landlock tier refuses them (Policy.NoMetadata, EPERM) so that a run
// cannot chmod, chown, touch or tag the cache. A function then cannot
// change these in its own run directory either.
var MetadataCalls = []string{
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "fchownat", "lchown",
	"setxattr", "lsetxattr", "fsetxattr", "setxattrat", "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
	"utime", "utimes", "utimensat", "futimesat",
}

// socketFamilies are the address families socket(2) may create with
// Policy.Network: those Docker's default lets a container without
// capabilities create (AF_UNIX up to AF_ROSE, then netlink, packet, and
// the later ones it lists); every other family fails with EAFNOSUPPORT
// (Docker's: EPERM), among them AF_VSOCK, the host's vsock services.
var socketFamilies = func() []uint32 {
	f := []uint32{}
	for af := uint32(0); af < 12; af++ {
		f = append(f, af)
	}
	return append(f, 13, 14, 15, 16, 17, 18, 21, 22, 24, 26, 27, 28, 29, 30, 31, 32, 33, 35, 36, 39, 41, 42, 43, 44, 45)
}()

// personas are the values personality(2) may take, as in Docker's default:
// PER_LINUX, PER_LINUX32, UNAME26 with either, and 0xffffffff (the query);
// any other persona (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...) fails with
// EPERM.
var personas = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Policy is what a tier asks of the filter on top of the common policy.
type Policy struct {
	// Network lets socket(2) create any family in socketFamilies; without
	// it only AF_UNIX, every other family failing with EAFNOSUPPORT.
	Network bool
	// NoUnixSockets makes socket(AF_UNIX, ...) fail with EPERM: no
	// connect or sendto on a pathname socket of the host (the landlock
	// tier, which Landlock up to ABI 7 does not guard there), and
	// socketpair(2) of type SOCK_DGRAM fail with EPROTONOSUPPORT (a datagram
	// end reaches one by connect or sendto); stream and seqpacket
	// socketpairs still work.
	NoUnixSockets bool
	// NoMetadata refuses MetadataCalls with EPERM.
	NoMetadata bool
	// NoSharedMemory refuses with EPERM the memory a run could hold
	// outside its processes' resident pages, where a tier without its own
	// ipc namespace and memory cgroup (the landlock tier: a watchdog sums
	// RssAnon and RssShmem) cannot see it: SharedMemoryCalls, and mmap of
	// shared anonymous memory (MAP_SHARED or MAP_SHARED_VALIDATE with
	// MAP_ANONYMOUS), whose pages stay in the kernel while any part of
	// the mapping lives, in no process's resident set once the process
	// that touched them is gone. Shared mappings of files (glibc maps its
	// gconv cache so) and private anonymous memory still pass.
	NoSharedMemory bool
	// Inspectable refuses prctl(PR_SET_DUMPABLE, 0) with EPERM: a process
	// that is not dumpable has its /proc/<pid>/fd owned by root, out of
	// reach of an unprivileged kptr that counts the deleted files a run
	// holds open.
	Inspectable bool
}

// SharedMemoryCalls are refused under Policy.NoSharedMemory: System V
// shared memory, message queues and semaphores (they outlive the run in
// the ipc namespace it shares with kptr, and another run of the same
// namespace can attach to them), POSIX message queues, and memfd_create
// and memfd_secret (a memfd's pages, written with write(2) and kept by a
// mapping of it whose descriptor is closed, are in no process's resident
// set and no directory). A KRM function needs none of them: the catalog's
// Go functions, Python 3.11 and Node 20 make none of these calls
// (strace, BENCHMARKS.md).
var SharedMemoryCalls = []string{
	"shmget", "shmat", "shmctl", "shmdt",
	"msgget", "msgsnd", "msgrcv", "msgctl",
	"semget", "semop", "semtimedop", "semctl",
	"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	"memfd_create", "memfd_secret",
}
