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
//
// What the init guarantees, whatever the image holds: every path inside the
// new root (mount targets, devices, masked and read-only paths) is resolved
// beneath the root with openat2 without following any symbolic link, so a
// link in the image is an error (ELOOP), never a mount on a host path;
// Create makes mount points only in a file system the init mounted itself;
// the function gets fds 0-2 and nothing else of the init, no capability in
// any set (also as container root, across execve), no supplementary group
// where setgroups is allowed, no_new_privs, and the spec's seccomp program.
// The spec travels as a compact binary message (encode) that the C parser
// reads with a bound on its size (1 MiB), on every count and on every
// string. Each failure is one *Error naming the step, its target and the
// errno; the init then exits. The init dies with the thread that forked it
// (parent-death signal, re-armed after the credential change) and when the
// sync socket is closed before it is released.
package nsinit

// #include "nsinit.h"
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// InitArg is argv[1] of an init started by Start (NSINIT_ARG in nsinit.h).
const InitArg = "__kptr_nsinit"

// syncEnv names the init's sync descriptor (NSINIT_ENV in nsinit.h); it is
// the init's whole environment.
const syncEnv = "_KPTR_NSINIT=3"

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
	// OOMScoreAdj is written to /proc/self/oom_score_adj; 0 leaves the
	// inherited value (lowering it needs CAP_SYS_RESOURCE).
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

// Proc is one started init. Kill may be called concurrently with the
// others; Setup, Release and Wait are called in that order by one goroutine.
type Proc struct {
	cmd   *os.Process
	sync  *os.File
	pidfd int

	spec     []byte // the encoded spec, until Setup sends it
	ready    bool   // Setup succeeded
	released bool   // Release succeeded: the function runs
	mu       sync.Mutex
	killed   bool
}

// Error is a failure the init reported: the step and its target ("mount
// target /tmp") and the system call's error.
type Error struct {
	Op    string
	Errno syscall.Errno
}

func (e *Error) Error() string {
	if e.Errno == 0 {
		return e.Op
	}
	return e.Op + ": " + e.Errno.Error()
}

func (e *Error) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// Start forks the init from exe (a sealed copy of the running binary, as
// /proc/self/fd/N or a path) with the spec's namespaces, ID mappings, a
// SIGKILL parent-death signal and a pidfd, and stdin, stdout and stderr as
// its fds 0-2 (nil: /dev/null). The init has made no mount yet when Start
// returns. With CLONE_NEWUSER, container root (uid and gid 0) must be
// mapped: the init starts as it. A spec that cannot be encoded (see encode) is an error before
// anything is started.
func Start(spec *Spec, exe string, stdin, stdout, stderr *os.File) (*Proc, error) {
	body, err := encode(spec)
	if err != nil {
		return nil, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("nsinit: socketpair: %w", err)
	}
	// The parent's end is non-blocking, so reads wait in Go's poller.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("nsinit: socket: %w", err)
	}
	parent := os.NewFile(uintptr(fds[0]), "nsinit-sync")
	child := os.NewFile(uintptr(fds[1]), "nsinit-sync-init")
	defer child.Close() // the init has its own copy (fd 3)

	files := []*os.File{stdin, stdout, stderr, child}
	for i := range 3 {
		if files[i] == nil {
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				parent.Close()
				return nil, fmt.Errorf("nsinit: %w", err)
			}
			defer null.Close()
			files[i] = null
		}
	}
	pidfd := -1
	attr := &syscall.SysProcAttr{
		// The cgroup namespace is the init's to unshare, once the caller
		// has joined it to its cgroups.
		Cloneflags:                 spec.Cloneflags &^ unix.CLONE_NEWCGROUP,
		UidMappings:                spec.UIDMappings,
		GidMappings:                spec.GIDMappings,
		GidMappingsEnableSetgroups: spec.Setgroups,
		Pdeathsig:                  syscall.SIGKILL,
		PidFD:                      &pidfd,
	}
	if spec.Cloneflags&unix.CLONE_NEWUSER != 0 {
		// The clone keeps kptr's host uid, unmapped when kptr is root
		// (container ids map to an unprivileged range): become container
		// root, or the init would hold no capability in its namespaces.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: !spec.Setgroups}
	}
	proc, err := os.StartProcess(exe, []string{"kptr-nsinit", InitArg}, &os.ProcAttr{
		Env:   []string{syncEnv},
		Files: files,
		Sys:   attr,
	})
	if err != nil {
		parent.Close()
		return nil, fmt.Errorf("nsinit: start %s: %w", exe, err)
	}
	return &Proc{cmd: proc, sync: parent, pidfd: pidfd, spec: body}, nil
}

// Pid is the init's pid (in the caller's pid namespace).
func (p *Proc) Pid() int { return p.cmd.Pid }

// PidFD is a pidfd of the init (owned by Proc; closed by Wait).
func (p *Proc) PidFD() int { return p.pidfd }

// Setup sends the spec and waits until the init has set the container up
// and waits to be released, or returns the init's error (one line naming
// the step, e.g. "mount /proc: operation not permitted"). The context's end
// kills the init.
func (p *Proc) Setup(ctx context.Context) error {
	if p.spec == nil {
		return errors.New("nsinit: setup: called twice")
	}
	msg := p.spec
	p.spec = nil
	if err := p.exchange(ctx, msg, true); err != nil {
		return err
	}
	p.ready = true
	return nil
}

// Release lets a set-up init execute the function; it returns once execve
// succeeded, or the init's error when it failed ("exec /bin/fn: no such file
// or directory").
func (p *Proc) Release(ctx context.Context) error {
	if !p.ready {
		return errors.New("nsinit: release: the init is not set up")
	}
	p.ready = false
	if err := p.exchange(ctx, []byte{'G'}, false); err != nil {
		return err
	}
	p.released = true
	return nil
}

// exchange writes msg and reads the init's reply: READY when setup is set,
// else EOF (execve closed the socket). The context's end kills the init.
func (p *Proc) exchange(ctx context.Context, msg []byte, setup bool) error {
	p.mu.Lock()
	killed := p.killed
	p.mu.Unlock()
	if killed {
		return errors.New("nsinit: the init was killed")
	}
	stop := context.AfterFunc(ctx, func() { p.Kill() })
	err := p.roundTrip(msg, setup)
	if !stop() {
		return ctx.Err()
	}
	return err
}

func (p *Proc) roundTrip(msg []byte, setup bool) error {
	if _, err := p.sync.Write(msg); err != nil {
		return fmt.Errorf("nsinit: init gone: %w", err)
	}
	var hdr [7]byte
	n, err := io.ReadFull(p.sync, hdr[:])
	switch {
	case n == 0 && err == io.EOF && !setup:
		return nil // execve succeeded: the socket was close-on-exec
	case n == 0 && err == io.EOF:
		return errors.New("nsinit: the init exited before it was set up")
	case err != nil:
		return fmt.Errorf("nsinit: reading the init's reply: %w", err)
	}
	if hdr[0] == C.NSINIT_READY && setup {
		return p.readText(hdr, nil)
	}
	if hdr[0] != C.NSINIT_ERR {
		return fmt.Errorf("nsinit: unexpected reply %q from the init", hdr[0])
	}
	e := &Error{Errno: syscall.Errno(binary.NativeEndian.Uint32(hdr[1:5]))}
	return p.readText(hdr, e)
}

// readText reads the reply's text (bounded: NSINIT_MSG_MAX) into e; nil e
// (READY) wants none.
func (p *Proc) readText(hdr [7]byte, e *Error) error {
	n := int(binary.NativeEndian.Uint16(hdr[5:7]))
	if n > C.NSINIT_MSG_MAX || (e == nil && n != 0) {
		return fmt.Errorf("nsinit: reply of %d bytes from the init", n)
	}
	if e == nil {
		return nil
	}
	text := make([]byte, n)
	if _, err := io.ReadFull(p.sync, text); err != nil {
		return fmt.Errorf("nsinit: reading the init's error: %w", err)
	}
	e.Op = string(text)
	return e
}

// Kill sends SIGKILL through the pidfd (the whole pid namespace ends with
// its init).
func (p *Proc) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd < 0 {
		return os.ErrProcessDone
	}
	p.killed = true
	err := unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
	if err == unix.ESRCH {
		return nil // already dead
	}
	return err
}

// Wait reaps the init (after Release, the function) and closes the pidfd
// and the sync socket. An init never released is ended first: closing the
// socket is its EOF, and it exits.
func (p *Proc) Wait() (*os.ProcessState, error) {
	if !p.released {
		p.sync.Close()
	}
	st, err := p.cmd.Wait()
	p.mu.Lock()
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
	p.mu.Unlock()
	p.sync.Close()
	return st, err
}
