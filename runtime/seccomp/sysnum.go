//go:build amd64 || arm64

package seccomp

import (
	"maps"

	"golang.org/x/sys/unix"
)

// Sysnums maps the names in DeniedSyscalls, ExtraDenied and MetadataCalls to
// this architecture's numbers: the calls amd64 and arm64 share, in one table
// (so that neither architecture can miss one the other has), and each one's
// own (archSysnums). TestOwnFilterKnowsEveryDeniedCall checks it against
// libseccomp call by call.
var Sysnums = func() map[string]uint32 {
	m := maps.Clone(commonSysnums)
	maps.Copy(m, archSysnums)
	return m
}()

var commonSysnums = map[string]uint32{
	"acct":                    unix.SYS_ACCT,
	"add_key":                 unix.SYS_ADD_KEY,
	"adjtimex":                unix.SYS_ADJTIMEX,
	"bpf":                     unix.SYS_BPF,
	"clock_adjtime":           unix.SYS_CLOCK_ADJTIME,
	"clock_settime":           unix.SYS_CLOCK_SETTIME,
	"delete_module":           unix.SYS_DELETE_MODULE,
	"finit_module":            unix.SYS_FINIT_MODULE,
	"fanotify_init":           unix.SYS_FANOTIFY_INIT,
	"fsconfig":                unix.SYS_FSCONFIG,
	"fsmount":                 unix.SYS_FSMOUNT,
	"fsopen":                  unix.SYS_FSOPEN,
	"fspick":                  unix.SYS_FSPICK,
	"get_mempolicy":           unix.SYS_GET_MEMPOLICY,
	"init_module":             unix.SYS_INIT_MODULE,
	"kcmp":                    unix.SYS_KCMP,
	"kexec_file_load":         unix.SYS_KEXEC_FILE_LOAD,
	"kexec_load":              unix.SYS_KEXEC_LOAD,
	"keyctl":                  unix.SYS_KEYCTL,
	"lookup_dcookie":          unix.SYS_LOOKUP_DCOOKIE,
	"mbind":                   unix.SYS_MBIND,
	"mount":                   unix.SYS_MOUNT,
	"mount_setattr":           unix.SYS_MOUNT_SETATTR,
	"move_mount":              unix.SYS_MOVE_MOUNT,
	"move_pages":              unix.SYS_MOVE_PAGES,
	"name_to_handle_at":       unix.SYS_NAME_TO_HANDLE_AT,
	"nfsservctl":              unix.SYS_NFSSERVCTL,
	"open_by_handle_at":       unix.SYS_OPEN_BY_HANDLE_AT,
	"open_tree":               unix.SYS_OPEN_TREE,
	"perf_event_open":         unix.SYS_PERF_EVENT_OPEN,
	"pivot_root":              unix.SYS_PIVOT_ROOT,
	"process_vm_readv":        unix.SYS_PROCESS_VM_READV,
	"process_vm_writev":       unix.SYS_PROCESS_VM_WRITEV,
	"ptrace":                  unix.SYS_PTRACE,
	"quotactl":                unix.SYS_QUOTACTL,
	"quotactl_fd":             unix.SYS_QUOTACTL_FD,
	"reboot":                  unix.SYS_REBOOT,
	"request_key":             unix.SYS_REQUEST_KEY,
	"set_mempolicy":           unix.SYS_SET_MEMPOLICY,
	"setns":                   unix.SYS_SETNS,
	"settimeofday":            unix.SYS_SETTIMEOFDAY,
	"swapoff":                 unix.SYS_SWAPOFF,
	"swapon":                  unix.SYS_SWAPON,
	"syslog":                  unix.SYS_SYSLOG,
	"umount2":                 unix.SYS_UMOUNT2,
	"unshare":                 unix.SYS_UNSHARE,
	"userfaultfd":             unix.SYS_USERFAULTFD,
	"vhangup":                 unix.SYS_VHANGUP,
	"io_uring_setup":          unix.SYS_IO_URING_SETUP,
	"io_uring_enter":          unix.SYS_IO_URING_ENTER,
	"io_uring_register":       unix.SYS_IO_URING_REGISTER,
	"pidfd_getfd":             unix.SYS_PIDFD_GETFD,
	"open_tree_attr":          unix.SYS_OPEN_TREE_ATTR,
	"fchmod":                  unix.SYS_FCHMOD,
	"fchmodat":                unix.SYS_FCHMODAT,
	"fchmodat2":               unix.SYS_FCHMODAT2,
	"fchown":                  unix.SYS_FCHOWN,
	"fchownat":                unix.SYS_FCHOWNAT,
	"setxattr":                unix.SYS_SETXATTR,
	"lsetxattr":               unix.SYS_LSETXATTR,
	"fsetxattr":               unix.SYS_FSETXATTR,
	"setxattrat":              unix.SYS_SETXATTRAT,
	"removexattr":             unix.SYS_REMOVEXATTR,
	"lremovexattr":            unix.SYS_LREMOVEXATTR,
	"fremovexattr":            unix.SYS_FREMOVEXATTR,
	"removexattrat":           unix.SYS_REMOVEXATTRAT,
	"utimensat":               unix.SYS_UTIMENSAT,
	"chroot":                  unix.SYS_CHROOT,
	"migrate_pages":           unix.SYS_MIGRATE_PAGES,
	"process_madvise":         unix.SYS_PROCESS_MADVISE,
	"setdomainname":           unix.SYS_SETDOMAINNAME,
	"sethostname":             unix.SYS_SETHOSTNAME,
	"set_mempolicy_home_node": unix.SYS_SET_MEMPOLICY_HOME_NODE,
	"lsm_get_self_attr":       unix.SYS_LSM_GET_SELF_ATTR,
	"lsm_list_modules":        unix.SYS_LSM_LIST_MODULES,
	"lsm_set_self_attr":       unix.SYS_LSM_SET_SELF_ATTR,
	"listns":                  unix.SYS_LISTNS,
}
