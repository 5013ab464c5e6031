// Package launcher holds kptr's C launchers, which start kptr's sandboxes
// without a Go start-up. Two C constructors linked into kptr (they share wire.h: the bounded spec
// parser) act before the Go runtime would start in a process started for
// them, and return at once in any other: nsinit.c, the namespace tier's
// container init (below), and landlock.c, the landlock tier's launcher and
// confiner (StartLandlock, landlock.go).
//
// The namespace tier's container init is started without a Go start-up:
// the init is the calling binary itself, re-executed from a sealed copy, and
// a C constructor (nsinit.c) linked into it does the whole container set-up
// (mounts, pivot_root, hostname, loopback, rlimits, credentials,
// capabilities, no_new_privs, seccomp) before the Go runtime would start,
// then waits to be released and executes the function.
//
// The caller only vforks and executes (os.StartProcess without namespace
// flags, as cheap whatever the caller's size): the init unshares the
// namespaces itself, the user namespace first (the caller writes its uid
// and gid maps, as only it may map more than its own ids), and clones the
// container's init, pid 1 of the new pid namespace, as the caller's child
// (CLONE_PARENT), as runc's nsexec does; the clone shares the first
// process's memory (CLONE_VM, its own stack) until the function is
// executed, so no page table is copied and the first process's exit frees
// none (about 10 % of an init's CPU). A Go clone with CLONE_NEWUSER would
// be a full fork of the caller instead: measured +8 ms per start for a
// small process, +28 ms for one holding 300 MB, what a render of a large
// package does.
//
// Why: a libcontainer start is a second Go start of the whole calling
// binary plus libcontainer's Go init (runtime start, package inits, JSON
// config, securejoin), about half of a sandbox start's CPU; this init costs
// what bubblewrap's does.
//
// Lifecycle (the caller forks on a thread that outlives the child, see
// runtime.onStableThread):
//
//	p, err := launcher.Start(spec, exe, stdin, stdout, stderr) // namespaces exist, nothing set up
//	// the caller joins the init to its cgroups here (p.Pid()), unless spec.JoinCgroups
//	err = p.Setup(ctx)   // returns once the init waits to exec, or its error
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
package launcher

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
	"time"

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
	// Dirs are made, in order, inside the file system this mount has just
	// mounted (not a bind): paths relative to Target, each below one made
	// before it or the mount's root, with exactly Mode (permission, setgid
	// and sticky bits), owned by the init's uid then (container root). An
	// overlay's upper and work directories on a tmpfs are made this way,
	// in the run's mount namespace only.
	Dirs []Dir
}

// Dir is one directory of Mount.Dirs.
type Dir struct {
	Path string
	Mode os.FileMode
}

// Tree is a detached mount tree and where the init attaches it.
type Tree struct {
	FD     *os.File
	Target string
}

// Rlimit is one resource limit set in the init before it executes.
type Rlimit struct {
	Resource int
	Cur, Max uint64
}

// Spec is the whole container of one run.
type Spec struct {
	// Cloneflags are the namespaces (CLONE_NEW*), unshared by the init;
	// CLONE_NEWCGROUP only once Setup is called, so the cgroups the caller
	// joined it to become the namespace's root.
	Cloneflags uintptr
	// UIDMappings and GIDMappings map the user namespace; Setgroups allows
	// setgroups(2) in it (false: "deny", as an unprivileged caller must).
	UIDMappings, GIDMappings []syscall.SysProcIDMap
	Setgroups                bool

	// Trees are detached mount trees (open_tree(2) with OPEN_TREE_CLONE,
	// made by a caller privileged in its mount namespace) the init attaches
	// first, each onto an empty host directory (Target), in its own mount
	// namespace only: what the init's uids could not reach by path (as
	// root, an image cached below /root) is reachable there. At most
	// NSINIT_MAX_TREES (8). Start hands the descriptors to the init; the
	// caller closes its own.
	Trees []Tree

	// JoinCgroups are cgroup v1 "tasks" files, opened for writing by the
	// caller, of the cgroups the container's init joins by itself once
	// Setup is called, before it unshares its cgroup namespace: a thread
	// that moves itself takes no global lock, where the caller's write of
	// the init's pid to cgroup.procs waits for an RCU grace period (about
	// 10 ms per start). The caller makes the cgroups and sets their limits
	// before Start, and then does not join the init itself. At most
	// NSINIT_MAX_CGROUPS (8). Start hands the descriptors to the init; the
	// caller closes its own.
	JoinCgroups []*os.File

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

// Proc is one started init. Kill and Wait may be called concurrently with
// the others; Setup and Release are called in that order by one goroutine.
type Proc struct {
	cmd   *os.Process
	sync  *os.File
	pidfd int

	setupDone bool // Setup was called
	ready     bool // Setup succeeded
	mu        sync.Mutex
	killed    bool
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

// startTimeout bounds Start's exchange with the init (nothing in it waits
// on a mount or the function).
const startTimeout = 30 * time.Second

// Start starts the init from exe (a sealed copy of the running binary, as
// /proc/self/fd/N or a path) with stdin, stdout and stderr as its fds 0-2
// (nil: /dev/null), sends it the spec, maps its user namespace and returns
// once the container's init exists in every namespace of the spec but the
// cgroup one: a child of the caller with a SIGKILL parent-death signal,
// identified by a pidfd. It has made no mount yet. With CLONE_NEWUSER,
// container root (uid and gid 0) must be mapped: the init becomes it. A
// spec that cannot be encoded (see encode) is an error before anything is
// started.
func Start(spec *Spec, exe string, stdin, stdout, stderr *os.File) (*Proc, error) {
	body, err := encode(spec)
	if err != nil {
		return nil, err
	}
	return start(spec, body, exe, stdin, stdout, stderr)
}

// start is Start with the spec already encoded (body).
func start(spec *Spec, body []byte, exe string, stdin, stdout, stderr *os.File) (*Proc, error) {
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
	for _, t := range spec.Trees {
		files = append(files, t.FD) // fds 4...: the order of Trees
	}
	files = append(files, spec.JoinCgroups...) // then the cgroup files
	// No namespace flags: a vfork and exec, whatever this process's size.
	first, err := os.StartProcess(exe, []string{"kptr-nsinit", InitArg}, &os.ProcAttr{
		Env:   []string{syncEnv},
		Files: files,
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		parent.Close()
		return nil, fmt.Errorf("nsinit: start %s: %w", exe, err)
	}
	p := &Proc{sync: parent, pidfd: -1}
	pid, err := p.enter(first, spec, body)
	// The first process exits once it has cloned the container's init, or
	// failed: reap it either way.
	if err != nil {
		_ = first.Kill()
	}
	_, _ = first.Wait()
	if err != nil {
		parent.Close()
		return nil, err
	}
	_ = parent.SetDeadline(time.Time{})
	// The container's init is this process's child (CLONE_PARENT) and
	// unreaped: its pid is not reused before Wait.
	if p.pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		parent.Close()
		return nil, fmt.Errorf("nsinit: pidfd of the init: %w", err)
	}
	p.cmd, _ = os.FindProcess(pid) // never fails on Linux
	return p, nil
}

// enter sends the spec to the first process, maps its user namespace and
// returns the pid of the container's init it cloned.
func (p *Proc) enter(first *os.Process, spec *Spec, body []byte) (int, error) {
	_ = p.sync.SetDeadline(time.Now().Add(startTimeout))
	if _, err := p.sync.Write(body); err != nil {
		return 0, fmt.Errorf("nsinit: sending the spec: %w", err)
	}
	if spec.Cloneflags&unix.CLONE_NEWUSER != 0 {
		if _, err := p.expect(C.NSINIT_MAP); err != nil {
			return 0, err
		}
		if err := writeMaps(first.Pid, spec); err != nil {
			return 0, err
		}
		if _, err := p.sync.Write([]byte{C.NSINIT_GO_MAPPED}); err != nil {
			return 0, fmt.Errorf("nsinit: init gone: %w", err)
		}
	}
	return p.expect(C.NSINIT_PID)
}

// errExited: the init closed the socket (exited, or executed the function).
var errExited = errors.New("nsinit: the init exited before it was set up")

// expect reads one reply of the given status and returns its number (the
// errno field: PID's pid); an ERR reply is the init's *Error.
func (p *Proc) expect(status byte) (int, error) {
	var hdr [7]byte
	n, err := io.ReadFull(p.sync, hdr[:])
	switch {
	case n == 0 && err == io.EOF:
		return 0, errExited
	case err != nil:
		return 0, fmt.Errorf("nsinit: reading the init's reply: %w", err)
	}
	v := int(int32(binary.NativeEndian.Uint32(hdr[1:5])))
	if hdr[0] == status {
		return v, p.readText(hdr, nil)
	}
	if hdr[0] != C.NSINIT_ERR {
		return 0, fmt.Errorf("nsinit: unexpected reply %q from the init", hdr[0])
	}
	return 0, p.readText(hdr, &Error{Errno: syscall.Errno(v)})
}

// writeMaps writes the user namespace's maps of process pid, as Go's
// os/exec does for a clone with CLONE_NEWUSER: setgroups "deny" first
// unless allowed (an unprivileged map needs it), then uid_map and gid_map.
func writeMaps(pid int, spec *Spec) error {
	dir := fmt.Sprintf("/proc/%d/", pid)
	format := func(m []syscall.SysProcIDMap) []byte {
		var b []byte
		for _, e := range m {
			b = fmt.Appendf(b, "%d %d %d\n", e.ContainerID, e.HostID, e.Size)
		}
		return b
	}
	if !spec.Setgroups {
		if err := os.WriteFile(dir+"setgroups", []byte("deny"), 0); err != nil {
			return fmt.Errorf("nsinit: setgroups deny: %w", err)
		}
	}
	if err := os.WriteFile(dir+"uid_map", format(spec.UIDMappings), 0); err != nil {
		return fmt.Errorf("nsinit: uid_map: %w", err)
	}
	if err := os.WriteFile(dir+"gid_map", format(spec.GIDMappings), 0); err != nil {
		return fmt.Errorf("nsinit: gid_map: %w", err)
	}
	return nil
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
	if p.setupDone {
		return errors.New("nsinit: setup: called twice")
	}
	p.setupDone = true
	if err := p.exchange(ctx, []byte{C.NSINIT_GO_SETUP}, true); err != nil {
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
	if err := p.exchange(ctx, []byte{C.NSINIT_GO_EXEC}, false); err != nil {
		return err
	}
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
	if setup {
		_, err := p.expect(C.NSINIT_READY)
		return err
	}
	// After the release only an error is a reply; execve closes the socket.
	if _, err := p.expect(C.NSINIT_ERR + 1); err != errExited {
		return err
	}
	return nil
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
// and the sync socket. It may wait from another goroutine while Setup and
// Release run (a reaper does, from the start); an init that is not to be
// released is ended with Kill.
func (p *Proc) Wait() (*os.ProcessState, error) {
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
