package namespace

import (
	"slices"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// dockerDenied is every system call of linux/amd64 and linux/arm64 (as
// golang.org/x/sys v0.49.0 names them) that Docker's default seccomp profile
// refuses to a container without capabilities: the calls missing from its
// allow-list, and those it allows only with a capability (CAP_SYS_ADMIN,
// CAP_SYS_PTRACE beyond ptrace itself, CAP_SYS_MODULE, CAP_SYS_TIME, ...).
// Source: moby/profiles seccomp/default.json at commit
// 02e898b137aed1024e232d59bcb05e6179b72177. containerd's generated default
// (contrib/seccomp/seccomp_default.go, io_uring removed in v2.0 by
// containerd/containerd#9320) refuses the same set minus the calls it
// predates.
var dockerDenied = []string{
	"_sysctl", "acct", "add_key", "afs_syscall", "bpf", "chroot",
	"clock_settime", "create_module", "delete_module", "fanotify_init",
	"file_getattr", "file_setattr", "finit_module", "fsconfig", "fsmount",
	"fsopen", "fspick", "get_kernel_syms", "get_mempolicy", "getpmsg",
	"init_module", "io_uring_enter", "io_uring_register", "io_uring_setup",
	"ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
	"listns", "lookup_dcookie", "lsm_get_self_attr", "lsm_list_modules",
	"lsm_set_self_attr", "mbind", "migrate_pages", "mount", "mount_setattr",
	"move_mount", "move_pages", "nfsservctl", "open_by_handle_at", "open_tree",
	"open_tree_attr", "perf_event_open", "pidfd_getfd", "pivot_root",
	"process_madvise", "putpmsg", "query_module", "quotactl", "quotactl_fd",
	"reboot", "request_key", "rseq_slice_yield", "security", "set_mempolicy",
	"set_mempolicy_home_node", "setdomainname", "sethostname", "setns",
	"settimeofday", "swapoff", "swapon", "sysfs", "syslog", "tuxcall",
	"umount2", "unshare", "uprobe", "uselib", "userfaultfd", "ustat", "vhangup",
	"vserver",
}

// allowedOnPurpose are calls Docker's default refuses that kptr's profile
// lets through, and why (the README's sandbox table says the same).
var allowedOnPurpose = map[string]string{
	"file_getattr":     "Linux 6.17: reads inode attributes as the FS_IOC_FSGETXATTR ioctl does; refused by Docker only because its profile predates it",
	"file_setattr":     "Linux 6.17: the FS_IOC_FSSETXATTR ioctl as a call, on files the function may write anyway",
	"rseq_slice_yield": "Linux 6.19: a scheduler hint for restartable sequences, like sched_yield",
	"uprobe":           "Linux 6.16: only meaningful from a uprobe trampoline the kernel installed; fails otherwise",
}

// kptr's profile refuses every call Docker's default refuses to a container
// without capabilities, but for the few allowed on purpose.
func TestSeccompCoversDockerDefault(t *testing.T) {
	denied := map[string]bool{}
	prof := defaultSeccomp()
	eperm := uint(unix.EPERM)
	for _, sc := range prof.Syscalls {
		if sc.Action == configs.Errno && len(sc.Args) == 0 && sc.ErrnoRet != nil && *sc.ErrnoRet == eperm {
			denied[sc.Name] = true
		}
	}
	if prof.DefaultAction != configs.Allow {
		t.Fatalf("default action %v: this test and the README assume a deny-list", prof.DefaultAction)
	}
	for _, name := range dockerDenied {
		if denied[name] {
			continue
		}
		if name == "clone3" {
			continue // ENOSYS, as Docker's: checked below
		}
		if _, ok := allowedOnPurpose[name]; !ok {
			t.Errorf("%s: Docker's default denies it, kptr's profile allows it (deny it, or say why in allowedOnPurpose and the README)", name)
		}
	}
	for name := range allowedOnPurpose {
		if !slices.Contains(dockerDenied, name) {
			t.Errorf("%s is allowed on purpose but Docker allows it too: drop it from allowedOnPurpose", name)
		}
	}
	var clone3 bool
	for _, sc := range prof.Syscalls {
		if sc.Name == "clone3" && sc.Action == configs.Errno && *sc.ErrnoRet == uint(unix.ENOSYS) {
			clone3 = true
		}
	}
	if !clone3 {
		t.Error("clone3 must fail with ENOSYS (libc then falls back to clone, whose flags the filter checks)")
	}
	for _, name := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register"} {
		if !denied[name] {
			t.Errorf("%s allowed", name)
		}
	}
}

// With the seccomp tag, io_uring cannot be set up in the sandbox.
func TestSeccompDeniesIoUring(t *testing.T) {
	_, f := run(t, runtime.Invocation{}, "io_uring")
	got := f["io_uring_setup"]
	if !SeccompBuilt {
		t.Logf("no seccomp filter (built without the seccomp tag): io_uring_setup: %s", got)
		return
	}
	if got != "operation not permitted" && got != "function not implemented" {
		t.Fatalf("io_uring_setup in the sandbox: %q, want EPERM or ENOSYS", got)
	}
}
