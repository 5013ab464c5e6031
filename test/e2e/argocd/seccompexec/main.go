// Command seccompexec loads a Kubernetes "Localhost" seccomp profile (the
// JSON format the kubelet and containerd read) into its own process with
// libseccomp, then executes a command under it: a node applying
// deploy/variants/seccomp-localhost's profile to the sidecar, without a node.
//
//	seccompexec PROFILE.json COMMAND [ARG...]
//
// Only the profile features kptr's profile uses are supported: defaultAction
// SCMP_ACT_ALLOW or SCMP_ACT_ERRNO, architectures, and syscalls rules by name
// with SCMP_ACT_ERRNO / SCMP_ACT_ALLOW and errnoRet (no argument filters).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"syscall"

	seccomp "github.com/seccomp/libseccomp-golang"
)

type profile struct {
	DefaultAction string   `json:"defaultAction"`
	Architectures []string `json:"architectures"`
	Syscalls      []struct {
		Names    []string `json:"names"`
		Action   string   `json:"action"`
		ErrnoRet *uint    `json:"errnoRet"`
	} `json:"syscalls"`
}

func action(name string, errno *uint) (seccomp.ScmpAction, error) {
	switch name {
	case "SCMP_ACT_ALLOW":
		return seccomp.ActAllow, nil
	case "SCMP_ACT_ERRNO":
		code := int16(syscall.EPERM)
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
	def, err := action(p.DefaultAction, nil)
	if err != nil {
		return err
	}
	f, err := seccomp.NewFilter(def)
	if err != nil {
		return err
	}
	for _, a := range p.Architectures {
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
		act, err := action(rule.Action, rule.ErrnoRet)
		if err != nil {
			return err
		}
		for _, name := range rule.Names {
			sc, err := seccomp.GetSyscallFromName(name)
			if err != nil {
				continue // not a syscall of this architecture
			}
			if err := f.AddRule(sc, act); err != nil {
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
