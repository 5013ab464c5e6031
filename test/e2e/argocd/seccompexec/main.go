// Command seccompexec loads a Kubernetes "Localhost" seccomp profile (the
// JSON format the kubelet and containerd read) into its own process with
// libseccomp, then executes a command under it: a node applying
// deploy/variants/seccomp-localhost's profile to the sidecar, without a node.
//
//	seccompexec PROFILE.json COMMAND [ARG...]
//
// It applies a profile as a container runtime does for a container without
// capabilities (the sidecar drops ALL): defaultAction SCMP_ACT_ALLOW or
// SCMP_ACT_ERRNO with defaultErrnoRet, architectures and archMap, and
// syscalls rules by name with SCMP_ACT_ERRNO / SCMP_ACT_ALLOW, errnoRet and
// argument conditions (args: index, value, valueTwo, op as in the OCI spec;
// several conditions on one rule all have to hold). A rule whose
// includes.caps names a capability is skipped (the process holds none), one
// whose excludes.caps does is kept; includes/excludes.arches are matched
// against this architecture and includes.minKernel against the running
// kernel. That covers Docker's and containerd's default profile
// (moby/profiles seccomp/default.json) and CRI-O's (containers/common
// pkg/seccomp/seccomp.json).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"syscall"

	seccomp "github.com/seccomp/libseccomp-golang"
)

type profile struct {
	DefaultAction   string   `json:"defaultAction"`
	DefaultErrnoRet *uint    `json:"defaultErrnoRet"`
	Architectures   []string `json:"architectures"`
	ArchMap         []struct {
		Architecture     string   `json:"architecture"`
		SubArchitectures []string `json:"subArchitectures"`
	} `json:"archMap"`
	Syscalls []struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet *uint    `json:"errnoRet"`
		Args     []struct {
			Index    uint   `json:"index"`
			Value    uint64 `json:"value"`
			ValueTwo uint64 `json:"valueTwo"`
			Op       string `json:"op"`
		} `json:"args"`
		Includes filterSet `json:"includes"`
		Excludes filterSet `json:"excludes"`
	} `json:"syscalls"`
}

type filterSet struct {
	Caps      []string `json:"caps"`
	Arches    []string `json:"arches"`
	MinKernel string   `json:"minKernel"`
}

var ops = map[string]seccomp.ScmpCompareOp{
	"SCMP_CMP_NE": seccomp.CompareNotEqual, "SCMP_CMP_LT": seccomp.CompareLess, "SCMP_CMP_LE": seccomp.CompareLessOrEqual,
	"SCMP_CMP_EQ": seccomp.CompareEqual, "SCMP_CMP_GE": seccomp.CompareGreaterEqual, "SCMP_CMP_GT": seccomp.CompareGreater,
	"SCMP_CMP_MASKED_EQ": seccomp.CompareMaskedEqual,
}

// applies says whether a rule with these includes and excludes is part of
// the filter of a capability-less process on this architecture and kernel.
func applies(inc, exc filterSet) bool {
	arch := goruntime.GOARCH
	if len(inc.Caps) > 0 || (len(inc.Arches) > 0 && !slices.Contains(inc.Arches, arch)) || slices.Contains(exc.Arches, arch) {
		return false
	}
	return inc.MinKernel == "" || kernelAtLeast(inc.MinKernel)
}

func kernelAtLeast(v string) bool {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return false
	}
	var rel []byte
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	var haveMaj, haveMin, wantMaj, wantMin int
	fmt.Sscanf(string(rel), "%d.%d", &haveMaj, &haveMin)
	fmt.Sscanf(v, "%d.%d", &wantMaj, &wantMin)
	return haveMaj > wantMaj || haveMaj == wantMaj && haveMin >= wantMin
}

func action(name string, errno, defErrno *uint) (seccomp.ScmpAction, error) {
	switch name {
	case "SCMP_ACT_ALLOW":
		return seccomp.ActAllow, nil
	case "SCMP_ACT_ERRNO":
		code := int16(syscall.EPERM)
		if errno == nil {
			errno = defErrno
		}
		if errno != nil {
			code = int16(*errno)
		}
		return seccomp.ActErrno.SetReturnCode(code), nil
	}
	return 0, fmt.Errorf("unsupported action %s", name)
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: seccompexec PROFILE.json COMMAND [ARG...]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "seccompexec: %v\n", err)
		os.Exit(125)
	}
}

func run(profilePath string, argv []string) error {
	b, err := os.ReadFile(profilePath)
	if err != nil {
		return err
	}
	var p profile
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	def, err := action(p.DefaultAction, p.DefaultErrnoRet, nil)
	if err != nil {
		return err
	}
	f, err := seccomp.NewFilter(def)
	if err != nil {
		return err
	}
	arches := p.Architectures
	for _, m := range p.ArchMap {
		arches = append(append(arches, m.Architecture), m.SubArchitectures...)
	}
	for _, a := range arches {
		arch, err := seccomp.GetArchFromString(map[string]string{
			"SCMP_ARCH_X86_64": "amd64", "SCMP_ARCH_X86": "x86", "SCMP_ARCH_X32": "x32",
			"SCMP_ARCH_AARCH64": "arm64", "SCMP_ARCH_ARM": "arm",
		}[a])
		if err != nil {
			continue
		}
		_ = f.AddArch(arch) // foreign architectures may be refused; the native one is always there
	}
	for _, rule := range p.Syscalls {
		if !applies(rule.Includes, rule.Excludes) {
			continue
		}
		act, err := action(rule.Action, rule.ErrnoRet, p.DefaultErrnoRet)
		if err != nil {
			return err
		}
		var conds []seccomp.ScmpCondition
		for _, a := range rule.Args {
			op, ok := ops[a.Op]
			if !ok {
				return fmt.Errorf("unsupported operator %s", a.Op)
			}
			vals := []uint64{a.Value}
			if op == seccomp.CompareMaskedEqual {
				vals = append(vals, a.ValueTwo)
			}
			c, err := seccomp.MakeCondition(a.Index, op, vals...)
			if err != nil {
				return err
			}
			conds = append(conds, c)
		}
		for _, name := range rule.Names {
			sc, err := seccomp.GetSyscallFromName(name)
			if err != nil {
				continue // not a syscall of this architecture
			}
			if len(conds) > 0 {
				err = f.AddRuleConditional(sc, act, conds)
			} else {
				err = f.AddRule(sc, act)
			}
			if err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
		}
	}
	exe, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	// The filter belongs to this thread; exec from it so the command inherits it.
	goruntime.LockOSThread()
	if err := f.Load(); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return syscall.Exec(exe, argv, os.Environ())
}
