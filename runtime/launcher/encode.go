package launcher

// #include "nsinit.h"
import "C"

import (
	"encoding/binary"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Limits of an encoded spec (nsinit.h): nsinit.c refuses more, and encode
// says so first.
const (
	maxSpec     = C.NSINIT_MAX_SPEC
	maxCount    = C.NSINIT_MAX_COUNT
	maxRlimits  = 64
	maxBPFInsns = 4096 // BPF_MAXINSNS
)

// encode is the spec as nsinit.c's parser reads it: u32 magic, u32 length
// of the body, then the body in host byte order:
//
//	u64 cloneflags, u32 options (NSINIT_OPT_*), str root, strs tree targets,
//	u32 number of cgroup files to join,
//	u32 n, n × {str source, str target, str fstype, u64 flags, str data, u32 create,
//	            u32 n, n × {u32 mode, str path}},
//	strs devices, strs mask paths, strs read-only paths, str hostname,
//	i32 oom_score_adj, u32 n, n × {i32 resource, u64 cur, u64 max},
//	u32 umask, u32 uid, u32 gid, str cwd, strs args, strs env,
//	u32 n, n × struct sock_filter (8 bytes)
//
// where a str is u32 length, the bytes (no NUL) and a NUL, and strs is u32
// n then n strs. It checks what the init relies on: absolute clean paths
// inside the root, no NUL in any string, the counts and the total size.
func encode(s *Spec) ([]byte, error) {
	e := encoder{b: make([]byte, 8, 4096)}
	binary.NativeEndian.PutUint32(e.b, C.NSINIT_MAGIC)
	var opts uint32
	if s.Setgroups {
		opts |= C.NSINIT_OPT_SETGROUPS
	}
	if s.ReadonlyRoot {
		opts |= C.NSINIT_OPT_READONLY_ROOT
	}
	if s.Loopback {
		opts |= C.NSINIT_OPT_LOOPBACK
	}
	e.u64(uint64(s.Cloneflags))
	e.u32(opts)
	if path.Clean(s.Root) == "/" {
		// The init mounts through the host's /proc/self/fd until the
		// pivot: the host's own root must never be the one it mounts in.
		e.fail("root", "the host's / cannot be a container's root")
	}
	e.abs("root", s.Root)
	e.count("trees", len(s.Trees), C.NSINIT_MAX_TREES)
	for _, t := range s.Trees {
		if t.FD == nil {
			e.fail("tree "+t.Target, "no descriptor")
		}
		e.abs("tree target", t.Target)
	}
	e.count("cgroups to join", len(s.JoinCgroups), C.NSINIT_MAX_CGROUPS)
	for _, f := range s.JoinCgroups {
		if f == nil {
			e.fail("cgroup to join", "no descriptor")
		}
	}
	e.count("mounts", len(s.Mounts), maxCount)
	for i, m := range s.Mounts {
		what := fmt.Sprintf("mount %d", i)
		if m.FSType == "" {
			if m.Flags&unix.MS_BIND == 0 {
				e.fail(what, "no file system type and no MS_BIND")
			}
			e.abs(what+" source", m.Source)
		} else {
			if m.Flags&unix.MS_BIND != 0 {
				// A bind gets no file system type: its flags are then
				// applied the way a bind needs (see Mount.Flags).
				e.fail(what, "MS_BIND with a file system type")
			}
			e.str(what+" source", m.Source)
		}
		e.inside(what+" target", m.Target)
		e.str(what+" fstype", m.FSType)
		e.u64(uint64(m.Flags))
		e.str(what+" data", m.Data)
		e.bool(m.Create)
		e.count(what+" dirs", len(m.Dirs), maxCount)
		if len(m.Dirs) > 0 && m.FSType == "" {
			e.fail(what, "dirs in a bind mount (only in a file system the init mounts)")
		}
		for _, d := range m.Dirs {
			if d.Mode&^(os.ModePerm|os.ModeSetgid|os.ModeSticky) != 0 {
				e.fail(what+" dir "+d.Path, "mode beyond permission, setgid and sticky bits")
			}
			e.u32(unixMode(d.Mode))
			e.below(what+" dir", d.Path)
		}
	}
	e.count("devices", len(s.Devices), maxCount)
	for _, d := range s.Devices {
		if dir, name := path.Split(d); dir != "/dev/" || name == "" || strings.HasPrefix(name, ".") {
			e.fail("device "+d, "not a node directly in /dev")
		}
		e.str("device", d)
	}
	e.paths("masked path", s.MaskPaths)
	e.paths("read-only path", s.ReadonlyPaths)
	e.str("hostname", s.Hostname)
	e.u32(uint32(int32(s.OOMScoreAdj)))
	e.count("rlimits", len(s.Rlimits), maxRlimits)
	for _, r := range s.Rlimits {
		e.u32(uint32(int32(r.Resource)))
		e.u64(r.Cur)
		e.u64(r.Max)
	}
	e.u32(s.Umask)
	e.u32(s.UID)
	e.u32(s.GID)
	e.abs("cwd", s.Cwd)
	if len(s.Args) == 0 || !path.IsAbs(s.Args[0]) {
		e.fail("args", "args[0] must be an absolute path inside the root")
	}
	e.strs("args", s.Args)
	e.strs("env", s.Env)
	e.bpf(s.Seccomp)
	return e.finish()
}

// finish checks the whole spec's size and writes the body's length after
// the magic.
func (e *encoder) finish() ([]byte, error) {
	if e.err == nil && len(e.b)-8 > maxSpec {
		e.fail("spec", fmt.Sprintf("%d bytes, more than %d", len(e.b)-8, maxSpec))
	}
	if e.err != nil {
		return nil, e.err
	}
	binary.NativeEndian.PutUint32(e.b[4:], uint32(len(e.b)-8))
	return e.b, nil
}

// encoder appends to b; the first invalid field is err.
type encoder struct {
	b   []byte
	err error
}

func (e *encoder) fail(what, why string) {
	if e.err == nil {
		e.err = fmt.Errorf("nsinit: spec: %s: %s", what, why)
	}
}

func (e *encoder) u32(v uint32) { e.b = binary.NativeEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.NativeEndian.AppendUint64(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.u32(1)
	} else {
		e.u32(0)
	}
}

func (e *encoder) count(what string, n, limit int) {
	if n > limit {
		e.fail(what, fmt.Sprintf("%d, more than %d", n, limit))
	}
	e.u32(uint32(n))
}

func (e *encoder) str(what, s string) {
	if strings.IndexByte(s, 0) >= 0 {
		e.fail(what, "contains a NUL byte")
	}
	if len(s) > maxSpec {
		e.fail(what, "too long")
		return
	}
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
}

func (e *encoder) strs(what string, v []string) {
	e.count(what, len(v), maxCount)
	for _, s := range v {
		e.str(what, s)
	}
}

// abs is an absolute path (a host path, or one inside the root).
func (e *encoder) abs(what, p string) {
	if !path.IsAbs(p) {
		e.fail(what, fmt.Sprintf("%q is not an absolute path", p))
	}
	e.str(what, p)
}

// inside is a path inside the root the init resolves beneath it: absolute,
// clean, not the root itself.
func (e *encoder) inside(what, p string) {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
		e.fail(what, fmt.Sprintf("%q is not a clean absolute path below /", p))
	}
	e.str(what, p)
}

// below is a relative path the init resolves beneath a mount it made:
// clean, not ".", no ".." component.
func (e *encoder) below(what, p string) {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		e.fail(what, fmt.Sprintf("%q is not a clean relative path below the mount", p))
	}
	e.str(what, p)
}

// unixMode is m's permission, setgid and sticky bits as mode_t bits.
func unixMode(m os.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&os.ModeSetgid != 0 {
		u |= unix.S_ISGID
	}
	if m&os.ModeSticky != 0 {
		u |= unix.S_ISVTX
	}
	return u
}

// bpf is a classic BPF program: u32 n, n × struct sock_filter (8 bytes).
func (e *encoder) bpf(p []unix.SockFilter) {
	e.count("seccomp program", len(p), maxBPFInsns)
	for _, f := range p {
		e.b = binary.NativeEndian.AppendUint16(e.b, f.Code)
		e.b = append(e.b, f.Jt, f.Jf)
		e.u32(f.K)
	}
}

func (e *encoder) paths(what string, v []string) {
	e.count(what+"s", len(v), maxCount)
	for _, p := range v {
		e.inside(what, p)
	}
}
