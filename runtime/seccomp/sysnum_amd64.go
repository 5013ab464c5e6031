package seccomp

import (
	"golang.org/x/sys/unix"
)

// archSysnums are the calls of Sysnums that amd64 alone has; a name missing
// from both tables is not a system call on amd64.
var archSysnums = map[string]uint32{
	"create_module":   unix.SYS_CREATE_MODULE,
	"get_kernel_syms": unix.SYS_GET_KERNEL_SYMS,
	"ioperm":          unix.SYS_IOPERM,
	"iopl":            unix.SYS_IOPL,
	"query_module":    unix.SYS_QUERY_MODULE,
	"uselib":          unix.SYS_USELIB,
	"ustat":           unix.SYS_USTAT,
	"chmod":           unix.SYS_CHMOD,
	"chown":           unix.SYS_CHOWN,
	"lchown":          unix.SYS_LCHOWN,
	"utime":           unix.SYS_UTIME,
	"utimes":          unix.SYS_UTIMES,
	"futimesat":       unix.SYS_FUTIMESAT,
	"_sysctl":         unix.SYS__SYSCTL,
	"afs_syscall":     unix.SYS_AFS_SYSCALL,
	"getpmsg":         unix.SYS_GETPMSG,
	"putpmsg":         unix.SYS_PUTPMSG,
	"security":        unix.SYS_SECURITY,
	"sysfs":           unix.SYS_SYSFS,
	"tuxcall":         unix.SYS_TUXCALL,
	"vserver":         unix.SYS_VSERVER,
}

// auditArch is the seccomp_data.arch of native calls; x32 calls (numbers
// with bit 30 set) are refused outright.
const (
	auditArch = unix.AUDIT_ARCH_X86_64
	x32Bit    = 0x40000000
)
