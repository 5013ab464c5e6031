// Package nsinit starts a sandbox's container init without a Go start-up:
// the init is the calling binary itself, re-executed from a sealed copy, and
// a C constructor (nsinit.c) linked into it does the whole container set-up
// (mounts, pivot_root, hostname, loopback, rlimits, credentials,
// capabilities, no_new_privs, seccomp) before the Go runtime would start,
// then waits to be released and executes the function. The namespaces come
// from the clone itself (os/exec's SysProcAttr: Cloneflags, ID mappings,
// parent-death signal, pidfd).
//
// Why: a libcontainer start is a second Go start of the whole calling
// binary plus libcontainer's Go init (runtime start, package inits, JSON
// config, securejoin), about half of a sandbox start's CPU; this init costs
// what bubblewrap's does.
//
// Lifecycle (the caller forks on a thread that outlives the child, see
// runtime.onStableThread):
//
//	p, err := nsinit.Start(spec, exe, stdin, stdout, stderr) // forked: namespaces exist, nothing set up
//	// the caller joins the child to its cgroups here (p.Pid())
//	err = p.Setup(ctx)   // sends the spec; returns once the init waits to exec, or its error
//	err = p.Release(ctx) // the init executes the function; error if execve failed
//	state, err := p.Wait()
//
// Importing the package links the constructor; it acts only in a process
// started by Start (argv[1] == InitArg and the sync descriptor named in
// the environment), and returns at once in any other.
package nsinit

import (
	"context"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitArg is argv[1] of an init started by Start.
const InitArg = "__kptr_nsinit"

// Mount is one mount the init makes inside the new root, in Spec order,
// after the root itself is bound onto itself.
type Mount struct {
	// Source is a host path (bind mounts; followed as the host sees it,
	// before the pivot) or a file system's source name ("proc", "tmpfs",
	// "overlay").
	Source string
	// Target is an absolute path inside the new root. It is resolved
	// beneath the root without following any symbolic link (a link in the
	// way is an error) and must exist unless Create is set.
	Target string
	// FSType is "" for a bind mount (Flags must hold MS_BIND).
	FSType string
	// Flags are mount(2) flags. For a bind mount, flags beyond
	// MS_BIND|MS_REC (MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC) are applied
	// by a remount that keeps the flags the kernel locks in a user
	// namespace; with MS_REC and MS_RDONLY every submount is made read-only.
	Flags uintptr
	// Data is the file system's option string.
	Data string
	// Create makes a missing Target (a directory, or an empty file when
	// Source is not a directory) in its parent, which must already be inside
	// a file system the init mounted (tmpfs): never in the image.
	Create bool
}

// Rlimit is one resource limit set in the init before it executes.
type Rlimit struct {
	Resource int
	Cur, Max uint64
}

// Spec is the whole container of one run.
type Spec struct {
	// Cloneflags are the namespaces (CLONE_NEW*); CLONE_NEWCGROUP is not
	// passed to the clone but unshared by the init once Setup is called, so
	// the cgroups the caller joined it to become the namespace's root.
	Cloneflags uintptr
	// UIDMappings and GIDMappings map the user namespace; Setgroups allows
	// setgroups(2) in it (false: "deny", as an unprivileged caller must).
	UIDMappings, GIDMappings []syscall.SysProcIDMap
	Setgroups                bool

	// Root is the host directory that becomes "/".
	Root string
	// Mounts are made in order beneath Root.
	Mounts []Mount
	// Devices are host device nodes (e.g. /dev/null) bound to the same
	// path beneath Root (a tmpfs /dev from Mounts), with /dev/fd, stdin,
	// stdout and stderr links to /proc/self/fd.
	Devices []string
	// MaskPaths are hidden after Mounts: a file by /dev/null, a directory by
	// an empty read-only tmpfs; a missing one is skipped.
	MaskPaths []string
	// ReadonlyPaths are made read-only (recursively); a missing one is
	// skipped.
	ReadonlyPaths []string
	// ReadonlyRoot remounts "/" read-only after the pivot.
	ReadonlyRoot bool

	// Hostname is set when non-empty (needs CLONE_NEWUTS).
	Hostname string
	// Loopback brings lo up (with CLONE_NEWNET).
	Loopback bool
	// OOMScoreAdj is written to /proc/self/oom_score_adj.
	OOMScoreAdj int
	Rlimits     []Rlimit
	Umask       uint32

	// The function's process: Args[0] is an absolute path inside the root,
	// executed as UID:GID (no supplementary groups) in Cwd with exactly Env.
	UID, GID uint32
	Cwd      string
	Args     []string
	Env      []string

	// Seccomp is a classic BPF program loaded last, after no_new_privs and
	// the capability drop; nil loads none.
	Seccomp []unix.SockFilter
}

// Proc is one started init.
type Proc struct {
	cmd   *os.Process
	sync  *os.File
	pidfd int
}

// Start forks the init from exe (a sealed copy of the running binary, as
// /proc/self/fd/N or a path) with the spec's namespaces, ID mappings, a
// SIGKILL parent-death signal and a pidfd, and stdin, stdout and stderr as
// its fds 0-2. The init has made no mount yet when Start returns.
func Start(spec *Spec, exe string, stdin, stdout, stderr *os.File) (*Proc, error) {
	panic("nsinit: not implemented yet")
}

// Pid is the init's pid (in the caller's pid namespace).
func (p *Proc) Pid() int { return p.cmd.Pid }

// PidFD is a pidfd of the init (owned by Proc; closed by Wait).
func (p *Proc) PidFD() int { return p.pidfd }

// Setup sends the spec and waits until the init has set the container up
// and waits to be released, or returns the init's error (one line naming
// the step, e.g. "mount /proc: operation not permitted"). The context's end
// kills the init.
func (p *Proc) Setup(ctx context.Context) error { panic("nsinit: not implemented yet") }

// Release lets a set-up init execute the function; it returns once execve
// succeeded, or the init's error when it failed ("exec /bin/fn: no such file
// or directory").
func (p *Proc) Release(ctx context.Context) error { panic("nsinit: not implemented yet") }

// Kill sends SIGKILL through the pidfd (the whole pid namespace ends with
// its init).
func (p *Proc) Kill() error { panic("nsinit: not implemented yet") }

// Wait reaps the init (after Release, the function).
func (p *Proc) Wait() (*os.ProcessState, error) { panic("nsinit: not implemented yet") }
