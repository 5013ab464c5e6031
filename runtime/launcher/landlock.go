package launcher

// #include "nsinit.h"
import "C"

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// LandlockArg is argv[1] of a landlock-tier launcher (landlock.c).
const LandlockArg = C.LLINIT_ARG

// Landlock is one run of the landlock tier (package runtime's Landlock):
// the launcher StartLandlock starts is a child subreaper that clones the
// confiner, which confines itself as this says and executes the function;
// landlock.c describes both. Everything kptr can compute is computed by the
// caller: the Landlock ruleset (all of the run's policy but the confiner's
// own /proc/<pid>, which only it knows), the seccomp program and the
// RLIMIT_NPROC value.
type Landlock struct {
	// UID and GID the function runs as (kptr is root; never 0); -1 keeps
	// the caller's.
	UID, GID int
	// NoFile, FSize, NProc and Data are RLIMIT_NOFILE, RLIMIT_FSIZE,
	// RLIMIT_NPROC and RLIMIT_DATA, lowered to these (0: unchanged).
	// RLIMIT_CORE is 0.
	NoFile, FSize, NProc, Data uint64
	// ProcFiles are names in the confiner's own /proc/<pid> (plain names:
	// "status", "fd") it may read: the confiner adds a Landlock rule for
	// each (a directory's entries too); one the kernel lacks is skipped.
	ProcFiles []string
	// Dir is the working directory, Path the program executed with Args and
	// exactly Env: host paths.
	Dir, Path string
	Args, Env []string
	// Ruleset is a Landlock ruleset descriptor (landlock_create_ruleset);
	// the confiner restricts itself with it.
	Ruleset *os.File
	// Seccomp is the classic BPF program the confiner loads last (never
	// empty).
	Seccomp []unix.SockFilter
}

// StartLandlock starts the launcher from exe (the running binary) with
// stdin, stdout and stderr as its fds 0-2 and status as the pipe the
// confiner writes why the function could not start on (EOF without a word:
// it started). The launcher gets SIGTERM when the calling thread ends (it
// then ends the run's processes); signal it SIGTERM to end the run. Its
// exit status is the function's (128+signal for a signal). The caller
// closes its own copies of the descriptors.
func StartLandlock(l *Landlock, exe string, stdin, stdout, stderr, status *os.File) (*os.Process, error) {
	body, err := encodeLandlock(l, os.Getpid())
	if err != nil {
		return nil, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("nsinit: %w", err)
	}
	defer specR.Close()
	defer specW.Close()
	p, err := os.StartProcess(exe, []string{"kptr-landlock", LandlockArg}, &os.ProcAttr{
		Env:   []string{C.LLINIT_ENV + "=3"},
		Files: []*os.File{stdin, stdout, stderr, specR, status, l.Ruleset},
		// SIGTERM, not SIGKILL: the launcher ends the run's processes first.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM},
	})
	if err != nil {
		return nil, fmt.Errorf("nsinit: start %s: %w", exe, err)
	}
	specR.Close()
	if _, err := specW.Write(body); err != nil {
		_ = p.Signal(syscall.SIGTERM)
		return p, fmt.Errorf("nsinit: sending the landlock spec: %w", err)
	}
	return p, nil
}

// encodeLandlock is the launcher's spec as landlock.c's parser reads it:
// u32 magic, u32 length of the body, then u32 parent pid, i32 uid, i32 gid,
// u64 nofile, u64 fsize, u64 nproc, u64 data, strs proc files, str dir,
// str path, strs args, strs env, u32 n, n × struct sock_filter.
func encodeLandlock(l *Landlock, parent int) ([]byte, error) {
	e := encoder{b: make([]byte, 8, 4096)}
	binary.NativeEndian.PutUint32(e.b, C.LLINIT_MAGIC)
	if l.Ruleset == nil {
		e.fail("ruleset", "no descriptor")
	}
	if (l.UID < 0) != (l.GID < 0) || l.UID == 0 || l.GID == 0 {
		e.fail("uid", fmt.Sprintf("%d:%d: both -1, or both an unprivileged id", l.UID, l.GID))
	}
	e.u32(uint32(parent))
	e.u32(uint32(int32(l.UID)))
	e.u32(uint32(int32(l.GID)))
	e.u64(l.NoFile)
	e.u64(l.FSize)
	e.u64(l.NProc)
	e.u64(l.Data)
	for _, f := range l.ProcFiles {
		if f == "" || f[0] == '.' || strings.ContainsRune(f, '/') {
			e.fail("proc file", fmt.Sprintf("%q is not a plain name", f))
		}
	}
	e.strs("proc files", l.ProcFiles)
	e.abs("dir", l.Dir)
	e.abs("path", l.Path)
	if len(l.Args) == 0 {
		e.fail("args", "none")
	}
	e.strs("args", l.Args)
	e.strs("env", l.Env)
	if len(l.Seccomp) == 0 {
		e.fail("seccomp program", "none: the tier's promises rest on it")
	}
	e.bpf(l.Seccomp)
	return e.finish()
}
