package seccomp

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Supported says whether kptr has a filter for this architecture (amd64 and
// arm64). Where it has none, no tier runs functions: a run is never
// unfiltered.
const Supported = goruntime.GOARCH == "amd64" || goruntime.GOARCH == "arm64"

// ErrUnsupported is returned on an architecture without kptr's filter.
var ErrUnsupported = errors.New("kptr has no seccomp filter for " + goruntime.GOARCH + " (amd64 and arm64 only): functions cannot run filtered here")

// arch is what the filter needs of an architecture.
type arch struct {
	audit   uint32            // AUDIT_ARCH_* of its native calls
	x32     uint32            // first number of the x32 ABI (amd64), 0 if none
	numbers map[string]uint32 // the calls the policy names
}

// arches are the architectures kptr has a filter for, built on first use:
// every start of kptr links this package, few assemble a filter.
var arches = sync.OnceValue(func() map[string]arch {
	return map[string]arch{
		"amd64": {audit: unix.AUDIT_ARCH_X86_64, x32: 0x40000000, numbers: numbersAMD64()},
		"arm64": {audit: unix.AUDIT_ARCH_AARCH64, numbers: numbersARM64()},
	}
})

// Filter is Program for this architecture, nil where it is not Supported.
// Each policy's program is assembled once per process (every sandbox of a
// render asks for the same one, and assembling it was a tenth of kptr's
// work preparing a sandbox); callers share it and must not change it.
func Filter(p Policy) []unix.SockFilter {
	if prog, ok := filters.Load(p); ok {
		return prog.([]unix.SockFilter)
	}
	prog, err := Program(p, goruntime.GOARCH)
	if err != nil {
		return nil
	}
	prog = prog[:len(prog):len(prog)] // an append copies
	filters.Store(p, prog)
	return prog
}

// filters are Filter's programs by policy.
var filters sync.Map

// action is what the filter does with one call number.
type action uint8

const (
	actENOSYS action = iota // not allowed: as if the kernel lacked it
	actAllow
	actEPERM
	actClone       // by its flags
	actSocket      // by its address family
	actPersonality // by the persona
	actSocketpair  // by its type (NoUnixSockets)
	actMmap        // by its flags (NoSharedMemory)
	actPrctl       // by its option and value (Inspectable)
)

// actions maps every number the policy names on a to its action; any other
// number gets actENOSYS.
func actions(p Policy, a arch) map[uint32]action {
	m := map[uint32]action{}
	set := func(names []string, act action) {
		for _, n := range names {
			if nr, ok := a.numbers[n]; ok {
				m[nr] = act
			}
		}
	}
	set(allowed, actAllow)
	if p.NoMetadata {
		set(MetadataCalls, actEPERM)
	}
	set(DeniedSyscalls, actEPERM)
	set([]string{"clone"}, actClone)
	set([]string{"socket"}, actSocket)
	set([]string{"personality"}, actPersonality)
	if p.NoUnixSockets {
		set([]string{"socketpair"}, actSocketpair)
	}
	if p.NoSharedMemory {
		set(SharedMemoryCalls, actEPERM)
		set([]string{"mmap"}, actMmap)
	}
	if p.Inspectable {
		set([]string{"prctl"}, actPrctl)
	}
	return m
}

// span is a run of consecutive call numbers from lo with one action.
type span struct {
	lo  uint32
	act action
}

// spans covers [0, 2^32) with runs of one action, from acts.
func spans(acts map[uint32]action) []span {
	nrs := make([]uint32, 0, len(acts))
	for nr := range acts {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)
	out := []span{{0, actENOSYS}}
	add := func(lo uint32, act action) {
		if last := &out[len(out)-1]; last.lo == lo {
			last.act = act
		} else if last.act != act {
			out = append(out, span{lo, act})
		}
		// merge a span that became equal to the one before it
		if n := len(out); n >= 2 && out[n-2].act == out[n-1].act {
			out = out[:n-1]
		}
	}
	for _, nr := range nrs {
		add(nr, acts[nr])
		if nr != ^uint32(0) {
			add(nr+1, actENOSYS)
		}
	}
	return out
}

// Offsets in struct seccomp_data (both architectures are little endian).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits of args[0]
	offArg1 = 24 // low 32 bits of args[1]
	offArg2 = 32 // low 32 bits of args[2]
	offArg3 = 40 // low 32 bits of args[3]
)

// sockTypeMask is the kernel's SOCK_TYPE_MASK: a socket type without
// SOCK_NONBLOCK and SOCK_CLOEXEC.
const sockTypeMask = 0xf

// assembler builds a classic-BPF program with forward jumps to labels.
type assembler struct {
	prog   []unix.SockFilter
	labels []int          // label → instruction index (-1 until placed)
	jumps  map[int]int    // index of a JA → its label
	rets   map[uint32]int // return value → label of a shared return
}

func (a *assembler) stmt(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// skipIf emits a conditional jump that skips the next instruction when
// (code, k) holds (jt=1) or when it does not (jf=1).
func (a *assembler) jump(code uint16, k uint32, jt, jf uint8) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf})
}

func (a *assembler) newLabel() int {
	a.labels = append(a.labels, -1)
	return len(a.labels) - 1
}

func (a *assembler) place(l int) { a.labels[l] = len(a.prog) }

func (a *assembler) ja(l int) {
	a.jumps[len(a.prog)] = l
	a.stmt(unix.BPF_JMP|unix.BPF_JA, 0)
}

func (a *assembler) ret(v uint32) { a.stmt(unix.BPF_RET|unix.BPF_K, v) }

func (a *assembler) finish() ([]unix.SockFilter, error) {
	for i, l := range a.jumps {
		to := a.labels[l]
		if to <= i {
			return nil, fmt.Errorf("seccomp: jump %d to unplaced or earlier label", i)
		}
		a.prog[i].K = uint32(to - i - 1)
	}
	if len(a.prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: program of %d instructions, more than the kernel takes (%d)", len(a.prog), unix.BPF_MAXINSNS)
	}
	return a.prog, nil
}

const (
	ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
)

func errno(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// Program assembles the policy p for the architecture goarch ("amd64",
// "arm64"): a check of the call's architecture (a foreign one kills the
// process; on amd64 the x32 ABI fails with EPERM), then a binary search
// over the call number (a handful of comparisons whatever the call), whose
// leaves return the call's action; clone, socket and personality jump to
// blocks that decide by the first argument.
func Program(p Policy, goarch string) ([]unix.SockFilter, error) {
	ar, ok := arches()[goarch]
	if !ok {
		return nil, ErrUnsupported
	}
	a := &assembler{jumps: map[int]int{}}
	a.stmt(ld, offArch)
	a.jump(jeq, ar.audit, 1, 0)
	a.ret(unix.SECCOMP_RET_KILL_PROCESS)
	a.stmt(ld, offNr)
	if ar.x32 != 0 {
		a.jump(jge, ar.x32, 0, 1)
		a.ret(errno(unix.EPERM))
	}
	blocks := map[action]int{actClone: a.newLabel(), actSocket: a.newLabel(), actPersonality: a.newLabel(), actSocketpair: a.newLabel(),
		actMmap: a.newLabel(), actPrctl: a.newLabel()}
	var tree func(s []span)
	tree = func(s []span) {
		if len(s) == 1 {
			switch act := s[0].act; act {
			case actAllow:
				a.ret(unix.SECCOMP_RET_ALLOW)
			case actEPERM:
				a.ret(errno(unix.EPERM))
			case actENOSYS:
				a.ret(errno(unix.ENOSYS))
			default:
				a.ja(blocks[act])
			}
			return
		}
		mid := len(s) / 2
		right := a.newLabel()
		a.jump(jge, s[mid].lo, 0, 1) // nr >= the right half's first: take the jump below
		a.ja(right)
		tree(s[:mid])
		a.place(right)
		tree(s[mid:])
	}
	tree(spans(actions(p, ar)))

	// clone: any namespace flag fails with EPERM (clone3 is not allowed at
	// all: its flags live in memory a filter cannot read, so it fails with
	// ENOSYS and libc falls back to clone).
	a.place(blocks[actClone])
	var ns uint32
	for _, f := range NamespaceFlags {
		ns |= uint32(f)
	}
	a.stmt(ld, offArg0)
	a.jump(jset, ns, 0, 1)
	a.ret(errno(unix.EPERM))
	a.ret(unix.SECCOMP_RET_ALLOW)

	// socket: by address family, and no netlink socket of the audit
	// subsystem (the host's, not namespaced; CRI-O's default refuses it
	// too).
	a.place(blocks[actSocket])
	a.stmt(ld, offArg0)
	if p.Network {
		a.jump(jeq, unix.AF_NETLINK, 0, 4)
		a.stmt(ld, offArg2)
		a.jump(jeq, unix.NETLINK_AUDIT, 0, 1)
		a.ret(errno(unix.EPERM))
		a.ret(unix.SECCOMP_RET_ALLOW)
	}
	if p.NoUnixSockets {
		a.jump(jeq, unix.AF_UNIX, 0, 1)
		a.ret(errno(unix.EPERM))
	}
	families := socketFamilies
	if !p.Network {
		families = []uint32{unix.AF_UNIX}
	}
	for _, f := range families {
		if f == unix.AF_UNIX && p.NoUnixSockets {
			continue
		}
		a.jump(jeq, f, 0, 1)
		a.ret(unix.SECCOMP_RET_ALLOW)
	}
	a.ret(errno(unix.EAFNOSUPPORT))

	// socketpair under NoUnixSockets: no datagram pair, whose end can be
	// connected (connect(2) re-targets a datagram socket) or sendto'd to a
	// pathname socket of the host; a stream or seqpacket pair's cannot
	// (EISCONN, or the address ignored), and runtimes use those for their
	// children's pipes.
	if p.NoUnixSockets {
		a.place(blocks[actSocketpair])
		a.stmt(ld, offArg1)
		a.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, sockTypeMask)
		a.jump(jeq, unix.SOCK_DGRAM, 0, 1)
		a.ret(errno(unix.EPROTONOSUPPORT))
		a.ret(unix.SECCOMP_RET_ALLOW)
	}

	// mmap under NoSharedMemory: no shared anonymous memory (the flags are
	// the same on amd64 and arm64; MAP_SHARED_VALIDATE has MAP_SHARED's
	// bit).
	if p.NoSharedMemory {
		a.place(blocks[actMmap])
		a.stmt(ld, offArg3)
		a.jump(jset, unix.MAP_ANONYMOUS, 0, 2)
		a.jump(jset, unix.MAP_SHARED, 0, 1)
		a.ret(errno(unix.EPERM))
		a.ret(unix.SECCOMP_RET_ALLOW)
	}

	// prctl under Inspectable: PR_SET_DUMPABLE may not clear the flag.
	if p.Inspectable {
		a.place(blocks[actPrctl])
		a.stmt(ld, offArg0)
		a.jump(jeq, unix.PR_SET_DUMPABLE, 0, 3)
		a.stmt(ld, offArg1)
		a.jump(jeq, 0, 0, 1)
		a.ret(errno(unix.EPERM))
		a.ret(unix.SECCOMP_RET_ALLOW)
	}

	// personality: only the personas Docker's default admits.
	a.place(blocks[actPersonality])
	a.stmt(ld, offArg0)
	for _, v := range personas {
		a.jump(jeq, v, 0, 1)
		a.ret(unix.SECCOMP_RET_ALLOW)
	}
	a.ret(errno(unix.EPERM))
	return a.finish()
}

// Load installs the policy's filter on the calling thread (no_new_privs
// must be set, or the thread hold CAP_SYS_ADMIN in its user namespace); a
// program it executes keeps it.
func Load(p Policy) error { return load(p, 0) }

// LoadAllThreads installs the policy's filter on every thread of the
// process at once (SECCOMP_FILTER_FLAG_TSYNC), setting no_new_privs on the
// calling thread first: what runtime/containerinit does in libcontainer's
// container init, whose other threads then carry it into the function.
func LoadAllThreads(p Policy) error {
	goruntime.LockOSThread() // no_new_privs and the filter are per thread until synchronised
	defer goruntime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: no_new_privs: %w", err)
	}
	return load(p, unix.SECCOMP_FILTER_FLAG_TSYNC)
}

func load(p Policy, flags uintptr) error {
	if !Supported {
		return ErrUnsupported
	}
	f := Filter(p)
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: %w", errno)
	}
	if r != 0 {
		// TSYNC: the id of a thread that could not be synchronised
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}
