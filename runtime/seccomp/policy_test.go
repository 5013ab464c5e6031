package seccomp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A container runtime's default seccomp profile, as in
// test/e2e/argocd/testdata/runtime-default (its SOURCES.md names them).
type profile struct {
	DefaultAction string
	Syscalls      []struct {
		Names  []string
		Action string
		Args   []struct {
			Index           int
			Value, ValueTwo uint64
			Op              string
		}
		Includes, Excludes struct {
			Caps, Arches []string
		}
	}
}

// allows says whether p lets a container without capabilities make the
// call name with args on goarch, as libseccomp decides it: of the rules
// that apply and match, an error action wins over an allow; none: the
// default action (or, with byRule, allowed: only what a rule refuses
// counts as refused).
func (p profile) allows(t *testing.T, name, goarch string, args [6]uint64, byRule bool) bool {
	allow, refuse := false, false
	for _, r := range p.Syscalls {
		if !slices.Contains(r.Names, name) || len(r.Includes.Caps) > 0 ||
			len(r.Includes.Arches) > 0 && !slices.Contains(r.Includes.Arches, goarch) ||
			slices.Contains(r.Excludes.Arches, goarch) {
			continue
		}
		match := true
		for _, a := range r.Args {
			v := args[a.Index]
			switch a.Op {
			case "SCMP_CMP_EQ":
				match = match && v == a.Value
			case "SCMP_CMP_NE":
				match = match && v != a.Value
			case "SCMP_CMP_LT":
				match = match && v < a.Value
			case "SCMP_CMP_MASKED_EQ":
				match = match && v&a.Value == a.ValueTwo
			default:
				t.Fatalf("%s: operator %s not handled", name, a.Op)
			}
		}
		if !match {
			continue
		}
		if r.Action == "SCMP_ACT_ALLOW" {
			allow = true
		} else {
			refuse = true
		}
	}
	if refuse {
		return false
	}
	return allow || byRule || p.DefaultAction == "SCMP_ACT_ALLOW"
}

// samples are the argument vectors each call is tried with: the ones its
// argument rules (ours or a profile's) tell apart.
func samples(name string) [][6]uint64 {
	var out [][6]uint64
	switch name {
	case "socket":
		for af := uint64(0); af <= 48; af++ {
			for _, proto := range []uint64{0, unix.NETLINK_AUDIT} {
				out = append(out, [6]uint64{af, unix.SOCK_STREAM, proto})
			}
		}
	case "clone":
		out = append(out, [6]uint64{uint64(unix.SIGCHLD)}, [6]uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND})
		for bit := range 32 {
			out = append(out, [6]uint64{1 << bit})
		}
	case "personality":
		for _, v := range []uint64{0, 8, 0x20000, 0x20008, 0xffffffff, 0x40000, 0x400000, 1} {
			out = append(out, [6]uint64{v})
		}
	default:
		out = append(out, [6]uint64{})
	}
	return out
}

// The policy refuses everything Docker's and containerd's default profile
// refuses to a container without capabilities: for every call it names on
// amd64 and arm64, with the arguments the rules tell apart, whatever kptr's
// filter lets through (with the network: the widest policy) that profile
// allows too. Of CRI-O's (containers-common), whose allow-list predates
// calls such as rseq, membarrier and the futex2 family (its default action
// answers ENOSYS, as kptr's does for calls it does not know), the policy
// refuses what a rule refuses (ptrace and its kin, netlink audit sockets,
// membarrier, vmsplice, io_pgetevents) but rseq, on purpose (policy.go).
func TestPolicyRefusesWhatDefaultsRefuse(t *testing.T) {
	files, err := filepath.Glob("../../test/e2e/argocd/testdata/runtime-default/*.json")
	if err != nil || len(files) < 3 {
		t.Fatalf("profiles: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var p profile
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		for goarch, ar := range arches() {
			prog := program(t, Policy{Network: true}, goarch)
			checked := 0
			for name, nr := range ar.numbers {
				for _, args := range samples(name) {
					if verdict(run(t, prog, call{arch: ar.audit, nr: nr, args: args})) != "allow" {
						continue
					}
					checked++
					crio := strings.HasPrefix(filepath.Base(f), "crio-")
					if crio && name == "rseq" {
						continue
					}
					if !p.allows(t, name, goarch, args, crio) {
						t.Errorf("%s, %s: kptr allows %s%v, the profile refuses it", filepath.Base(f), goarch, name, args[:3])
					}
				}
			}
			if checked < 250 {
				t.Errorf("%s, %s: only %d allowed calls checked", filepath.Base(f), goarch, checked)
			}
		}
	}
}

// allowed holds no call the policy refuses by name, and no call twice.
func TestAllowedListClean(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range allowed {
		if seen[n] {
			t.Errorf("%s twice", n)
		}
		seen[n] = true
		if slices.Contains(DeniedSyscalls, n) || slices.Contains([]string{"clone", "clone3", "socket", "personality", "ptrace"}, n) {
			t.Errorf("%s is allowed and refused", n)
		}
	}
}
