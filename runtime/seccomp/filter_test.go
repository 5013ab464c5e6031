package seccomp

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// call is one system call as the kernel hands it to a filter.
type call struct {
	arch uint32
	nr   uint32
	args [6]uint64
}

// run interprets prog (the instructions Program emits: loads of the call's
// fields, conditional and unconditional jumps, returns) against c, as the
// kernel would, and returns the filter's verdict.
func run(t *testing.T, prog []unix.SockFilter, c call) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], c.nr)
	binary.LittleEndian.PutUint32(data[4:], c.arch)
	for i, a := range c.args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var ok bool
			switch in.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				ok = acc == in.K
			case unix.BPF_JGE:
				ok = acc >= in.K
			case unix.BPF_JSET:
				ok = acc&in.K != 0
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: code %#x not expected", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

func verdict(v uint32) string {
	switch {
	case v == unix.SECCOMP_RET_ALLOW:
		return "allow"
	case v == unix.SECCOMP_RET_KILL_PROCESS:
		return "kill"
	case v&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return unix.ErrnoName(unix.Errno(v & unix.SECCOMP_RET_DATA))
	}
	return fmt.Sprintf("%#x", v)
}

func program(t *testing.T, p Policy, goarch string) []unix.SockFilter {
	t.Helper()
	prog, err := Program(p, goarch)
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

// Every call number gets the action the policy gives its name: allowed
// calls pass, DeniedSyscalls fail with EPERM, every other number (known or
// not) with ENOSYS; a foreign architecture is killed, amd64's x32 ABI
// refused. The binary search is checked over the whole range of numbers a
// table holds and past it.
func TestProgramActions(t *testing.T) {
	for goarch, ar := range arches() {
		t.Run(goarch, func(t *testing.T) {
			for _, p := range []Policy{{Network: true}, {NoMetadata: true, NoUnixSockets: true}, {NoSharedMemory: true, Inspectable: true}} {
				prog := program(t, p, goarch)
				acts := actions(p, ar)
				want := map[action]string{actAllow: "allow", actEPERM: "EPERM", actENOSYS: "ENOSYS"}
				for nr := uint32(0); nr < 1100; nr++ {
					act := acts[nr]
					if act >= actClone {
						continue // decided by arguments: below
					}
					if got := verdict(run(t, prog, call{arch: ar.audit, nr: nr})); got != want[act] {
						t.Fatalf("%+v: call %d: %s, want %s", p, nr, got, want[act])
					}
				}
				for _, nr := range []uint32{1 << 20, 0x3fffffff, ^uint32(0)} {
					if ar.x32 != 0 && nr >= ar.x32 {
						continue
					}
					if got := verdict(run(t, prog, call{arch: ar.audit, nr: nr})); got != "ENOSYS" {
						t.Errorf("unknown call %#x: %s, want ENOSYS", nr, got)
					}
				}
				if got := verdict(run(t, prog, call{arch: unix.AUDIT_ARCH_I386, nr: ar.numbers["read"]})); got != "kill" {
					t.Errorf("a call of another architecture: %s, want kill", got)
				}
				if ar.x32 != 0 {
					if got := verdict(run(t, prog, call{arch: ar.audit, nr: ar.x32 | ar.numbers["read"]})); got != "EPERM" {
						t.Errorf("an x32 call: %s, want EPERM", got)
					}
				}
			}
		})
	}
}

// The calls every Go, Python and Node runtime makes at start and for I/O
// pass; what no function needs does not.
func TestProgramNamedCalls(t *testing.T) {
	for goarch, ar := range arches() {
		prog := program(t, Policy{Network: true}, goarch)
		for name, want := range map[string]string{
			"read": "allow", "write": "allow", "openat": "allow", "mmap": "allow", "futex": "allow",
			"execve": "allow", "exit_group": "allow", "rt_sigaction": "allow", "sched_getaffinity": "allow",
			"epoll_pwait": "allow", "getrandom": "allow", "statx": "allow", "prlimit64": "allow",
			"socketpair": "allow", "pipe2": "allow", "wait4": "allow", "newfstatat": "allow",
			"unshare": "EPERM", "setns": "EPERM", "mount": "EPERM", "keyctl": "EPERM", "bpf": "EPERM",
			"io_uring_setup": "EPERM", "ptrace": "EPERM", "perf_event_open": "EPERM", "pidfd_getfd": "EPERM",
			"process_vm_readv": "EPERM", "userfaultfd": "EPERM", "open_by_handle_at": "EPERM",
			"clone3": "ENOSYS", "vmsplice": "ENOSYS", "rseq": "allow", "membarrier": "ENOSYS",
		} {
			nr, ok := ar.numbers[name]
			if !ok {
				if name == "newfstatat" {
					continue
				}
				t.Errorf("%s: no number for %s", goarch, name)
				continue
			}
			if got := verdict(run(t, prog, call{arch: ar.audit, nr: nr})); got != want {
				t.Errorf("%s: %s: %s, want %s", goarch, name, got, want)
			}
		}
	}
}

// clone with any namespace flag fails with EPERM; a thread's or a
// process's clone passes.
func TestProgramClone(t *testing.T) {
	for goarch, ar := range arches() {
		prog := program(t, Policy{}, goarch)
		clone := ar.numbers["clone"]
		thread := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)
		for _, flags := range []uint64{thread, uint64(unix.SIGCHLD), uint64(unix.CLONE_VM | unix.CLONE_VFORK | unix.SIGCHLD)} {
			if got := verdict(run(t, prog, call{arch: ar.audit, nr: clone, args: [6]uint64{flags}})); got != "allow" {
				t.Errorf("%s: clone(%#x): %s", goarch, flags, got)
			}
		}
		for _, f := range NamespaceFlags {
			if got := verdict(run(t, prog, call{arch: ar.audit, nr: clone, args: [6]uint64{f | uint64(unix.SIGCHLD)}})); got != "EPERM" {
				t.Errorf("%s: clone(%#x): %s, want EPERM", goarch, f, got)
			}
		}
	}
}

// The landlock tier's socket rules at the assembler level: without the
// network only AF_UNIX would pass, and NoUnixSockets refuses that too
// (EPERM) and datagram socketpairs (EPROTONOSUPPORT) while stream and
// seqpacket socketpair(AF_UNIX) stay allowed; with the network, the
// families Docker's default admits pass, others (AF_VSOCK) fail with
// EAFNOSUPPORT, and AF_UNIX still fails with EPERM under NoUnixSockets.
func TestProgramSockets(t *testing.T) {
	for goarch, ar := range arches() {
		socket, pair := ar.numbers["socket"], ar.numbers["socketpair"]
		for _, c := range []struct {
			p      Policy
			family uint64
			proto  uint64
			want   string
		}{
			{Policy{}, unix.AF_UNIX, 0, "allow"},
			{Policy{}, unix.AF_INET, 0, "EAFNOSUPPORT"},
			{Policy{}, unix.AF_INET6, 0, "EAFNOSUPPORT"},
			{Policy{}, unix.AF_NETLINK, 0, "EAFNOSUPPORT"},
			{Policy{NoUnixSockets: true}, unix.AF_UNIX, 0, "EPERM"},
			{Policy{NoUnixSockets: true}, unix.AF_INET, 0, "EAFNOSUPPORT"},
			{Policy{Network: true, NoUnixSockets: true}, unix.AF_UNIX, 0, "EPERM"},
			{Policy{Network: true, NoUnixSockets: true}, unix.AF_INET, 0, "allow"},
			{Policy{Network: true}, unix.AF_UNIX, 0, "allow"},
			{Policy{Network: true}, unix.AF_INET6, 0, "allow"},
			{Policy{Network: true}, unix.AF_NETLINK, unix.NETLINK_ROUTE, "allow"},
			{Policy{Network: true}, unix.AF_NETLINK, unix.NETLINK_AUDIT, "EPERM"},
			{Policy{Network: true}, unix.AF_VSOCK, 0, "EAFNOSUPPORT"},
			{Policy{Network: true}, unix.AF_ALG, 0, "EAFNOSUPPORT"},
			{Policy{Network: true}, 1000, 0, "EAFNOSUPPORT"},
		} {
			prog := program(t, c.p, goarch)
			if got := verdict(run(t, prog, call{arch: ar.audit, nr: socket, args: [6]uint64{c.family, unix.SOCK_STREAM, c.proto}})); got != c.want {
				t.Errorf("%s %+v: socket(%d, _, %d): %s, want %s", goarch, c.p, c.family, c.proto, got, c.want)
			}
			for _, typ := range []uint64{unix.SOCK_STREAM, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, unix.SOCK_SEQPACKET | unix.SOCK_NONBLOCK} {
				if got := verdict(run(t, prog, call{arch: ar.audit, nr: pair, args: [6]uint64{unix.AF_UNIX, typ}})); got != "allow" {
					t.Errorf("%s %+v: socketpair(AF_UNIX, %#x): %s", goarch, c.p, typ, got)
				}
			}
			// A datagram pair's end can be connected or sendto'd to a
			// pathname socket: refused with NoUnixSockets.
			want := "allow"
			if c.p.NoUnixSockets {
				want = "EPROTONOSUPPORT"
			}
			for _, typ := range []uint64{unix.SOCK_DGRAM, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK} {
				if got := verdict(run(t, prog, call{arch: ar.audit, nr: pair, args: [6]uint64{unix.AF_UNIX, typ}})); got != want {
					t.Errorf("%s %+v: socketpair(AF_UNIX, %#x): %s, want %s", goarch, c.p, typ, got, want)
				}
			}
		}
	}
}

// NoMetadata refuses the calls that change a file's mode, owner, times or
// extended attributes; without it they pass.
func TestProgramMetadata(t *testing.T) {
	for goarch, ar := range arches() {
		strict, loose := program(t, Policy{NoMetadata: true}, goarch), program(t, Policy{}, goarch)
		for _, name := range MetadataCalls {
			nr, ok := ar.numbers[name]
			if !ok {
				continue
			}
			if got := verdict(run(t, strict, call{arch: ar.audit, nr: nr})); got != "EPERM" {
				t.Errorf("%s: NoMetadata: %s: %s", goarch, name, got)
			}
			if got := verdict(run(t, loose, call{arch: ar.audit, nr: nr})); got != "allow" {
				t.Errorf("%s: %s: %s", goarch, name, got)
			}
		}
	}
}

// NoSharedMemory refuses SharedMemoryCalls and shared anonymous mmap
// (MAP_SHARED or MAP_SHARED_VALIDATE with MAP_ANONYMOUS) with EPERM, while
// private anonymous and shared file mappings pass; Inspectable refuses
// prctl(PR_SET_DUMPABLE, 0) only. Without them (the namespace tier's
// policy, whose runs have their own ipc namespace) all of it passes.
func TestProgramSharedMemory(t *testing.T) {
	const mapSharedValidate = 0x03
	for goarch, ar := range arches() {
		strict := program(t, Policy{NoSharedMemory: true, Inspectable: true, NoUnixSockets: true}, goarch)
		loose := program(t, Policy{}, goarch)
		for _, name := range SharedMemoryCalls {
			nr := ar.numbers[name]
			if got := verdict(run(t, strict, call{arch: ar.audit, nr: nr})); got != "EPERM" {
				t.Errorf("%s: NoSharedMemory: %s: %s", goarch, name, got)
			}
			if got := verdict(run(t, loose, call{arch: ar.audit, nr: nr})); got != "allow" {
				t.Errorf("%s: %s: %s", goarch, name, got)
			}
		}
		for _, c := range []struct {
			flags uint64
			want  string
		}{
			{unix.MAP_PRIVATE | unix.MAP_ANONYMOUS, "allow"},
			{unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_NORESERVE | unix.MAP_FIXED, "allow"},
			{unix.MAP_SHARED, "allow"}, // a file's
			{unix.MAP_PRIVATE, "allow"},
			{mapSharedValidate, "allow"},
			{unix.MAP_SHARED | unix.MAP_ANONYMOUS, "EPERM"},
			{mapSharedValidate | unix.MAP_ANONYMOUS, "EPERM"},
			{unix.MAP_SHARED | unix.MAP_ANONYMOUS | 1<<32, "EPERM"},
		} {
			args := [6]uint64{0, 4096, unix.PROT_READ | unix.PROT_WRITE, c.flags, ^uint64(0), 0}
			if got := verdict(run(t, strict, call{arch: ar.audit, nr: ar.numbers["mmap"], args: args})); got != c.want {
				t.Errorf("%s: NoSharedMemory: mmap(flags %#x): %s, want %s", goarch, c.flags, got, c.want)
			}
			if got := verdict(run(t, loose, call{arch: ar.audit, nr: ar.numbers["mmap"], args: args})); got != "allow" {
				t.Errorf("%s: mmap(flags %#x): %s", goarch, c.flags, got)
			}
		}
		for _, c := range []struct {
			option, arg uint64
			want        string
		}{
			{unix.PR_SET_DUMPABLE, 0, "EPERM"},
			{unix.PR_SET_DUMPABLE, 1, "allow"},
			{unix.PR_GET_DUMPABLE, 0, "allow"},
			{unix.PR_SET_NAME, 0, "allow"},
			{unix.PR_SET_PDEATHSIG, 0, "allow"},
		} {
			args := [6]uint64{c.option, c.arg}
			if got := verdict(run(t, strict, call{arch: ar.audit, nr: ar.numbers["prctl"], args: args})); got != c.want {
				t.Errorf("%s: Inspectable: prctl(%d, %d): %s, want %s", goarch, c.option, c.arg, got, c.want)
			}
			if got := verdict(run(t, loose, call{arch: ar.audit, nr: ar.numbers["prctl"], args: args})); got != "allow" {
				t.Errorf("%s: prctl(%d, %d): %s", goarch, c.option, c.arg, got)
			}
		}
	}
}

// personality passes only the personas Docker's default admits.
func TestProgramPersonality(t *testing.T) {
	for goarch, ar := range arches() {
		prog := program(t, Policy{}, goarch)
		for v, want := range map[uint64]string{0: "allow", 8: "allow", 0x20000: "allow", 0xffffffff: "allow",
			0x0040000 /* ADDR_NO_RANDOMIZE */ : "EPERM", 0x0400000 /* READ_IMPLIES_EXEC */ : "EPERM"} {
			if got := verdict(run(t, prog, call{arch: ar.audit, nr: ar.numbers["personality"], args: [6]uint64{v}})); got != want {
				t.Errorf("%s: personality(%#x): %s, want %s", goarch, v, got, want)
			}
		}
	}
}

// The kernel takes the program and enforces it: a child loads the
// landlock tier's policy (no network, no unix sockets) and tries the calls.
func TestLoadEnforced(t *testing.T) {
	if os.Getenv("KPTR_SECCOMP_CHILD") == "1" {
		goruntime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			fmt.Println("nnp:", err)
			os.Exit(1)
		}
		if err := Load(Policy{NoUnixSockets: true}); err != nil {
			fmt.Println("load:", err)
			os.Exit(1)
		}
		_, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		fmt.Println("socket-unix:", err)
		_, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		fmt.Println("socket-inet:", err)
		_, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		fmt.Println("socketpair:", err)
		fmt.Println("unshare:", unix.Unshare(unix.CLONE_NEWUSER))
		os.Exit(0)
	}
	if !Supported {
		t.Skip("no filter for", goruntime.GOARCH)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLoadEnforced$")
	cmd.Env = append(os.Environ(), "KPTR_SECCOMP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{"socket-unix: operation not permitted", "socket-inet: address family not supported by protocol",
		"socketpair: <nil>", "unshare: operation not permitted"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("child lacks %q:\n%s", want, out)
		}
	}
}

// Filter assembles each policy's program once and hands every caller the
// same one, equal to Program's.
func TestFilterIsAssembledOncePerPolicy(t *testing.T) {
	if !Supported {
		t.Skip("no filter for " + goruntime.GOARCH)
	}
	for _, p := range []Policy{{}, {Network: true}, {NoUnixSockets: true, NoSharedMemory: true}} {
		a, b := Filter(p), Filter(p)
		want, err := Program(p, goruntime.GOARCH)
		if err != nil || !slices.Equal(a, want) {
			t.Fatalf("%+v: Filter differs from Program (%v)", p, err)
		}
		if &a[0] != &b[0] {
			t.Errorf("%+v: assembled again on the second call", p)
		}
		if cap(a) != len(a) {
			t.Errorf("%+v: an append would write into the shared program", p)
		}
	}
	if slices.Equal(Filter(Policy{}), Filter(Policy{Network: true})) {
		t.Error("two policies share one program")
	}
}
