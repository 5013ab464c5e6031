package landlock

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/kptr-dev/kptr/runtime"
)

// hostExec is how the landlock tier starts an entrypoint without a mount
// namespace: the program to execve (a host path inside the rootfs) and its
// argv.
type hostExec struct {
	Path string
	Argv []string
}

// libDirs are the image directories a dynamically linked entrypoint's
// libraries are looked up in (the interpreter's --library-path), in the
// order glibc's and musl's defaults use; those missing in the image are
// skipped. /etc/ld.so.conf is not read.
var libDirs = []string{
	"/lib", "/usr/lib", "/usr/local/lib", "/lib64", "/usr/lib64",
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
}

// ErrNoDirectStart is wrapped by entrypoint errors of the landlock tier:
// the entrypoint cannot be started from the image's rootfs without a mount
// namespace.
var ErrNoDirectStart = errors.New("cannot start without a mount namespace")

// resolveHostExec turns args (args[0] an absolute path inside rootfs, as
// ResolveProcess returns it) into a program the host kernel can execute
// while the image is not the root: a static ELF binary directly; a
// dynamically linked one through the image's own ELF interpreter
// (PT_INTERP resolved inside rootfs) with --library-path set to the image's
// library directories and --argv0 keeping the name the program was called
// by (busybox picks its applet from it); a "#!" script through its
// interpreter from the image, resolved the same way. Every path is resolved
// inside rootfs (symlinks included, absolute ones relative to rootfs).
func resolveHostExec(rootfs string, args []string) (hostExec, error) {
	return resolveHostExecDepth(rootfs, args, 0)
}

func resolveHostExecDepth(rootfs string, args []string, depth int) (hostExec, error) {
	exe, err := securejoin.SecureJoin(rootfs, args[0])
	if err != nil {
		return hostExec{}, err
	}
	f, err := os.Open(exe)
	if err != nil {
		return hostExec{}, err
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("#!")):
		if depth > 0 {
			return hostExec{}, fmt.Errorf("entrypoint %s: %w: its interpreter is a script too", args[0], ErrNoDirectStart)
		}
		line, _, ok := bytes.Cut(head[2:], []byte("\n"))
		if !ok {
			return hostExec{}, fmt.Errorf("entrypoint %s: %w: \"#!\" line longer than %d bytes", args[0], ErrNoDirectStart, len(head))
		}
		interp, arg, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
		if !path.IsAbs(interp) {
			return hostExec{}, fmt.Errorf("entrypoint %s: %w: interpreter %q is not absolute", args[0], ErrNoDirectStart, interp)
		}
		sargs := []string{interp}
		if arg = strings.TrimSpace(arg); arg != "" {
			sargs = append(sargs, arg)
		}
		// The script is read by its interpreter through the host path.
		sargs = append(append(sargs, exe), args[1:]...)
		return resolveHostExecDepth(rootfs, sargs, depth+1)
	case !bytes.HasPrefix(head, []byte(elf.ELFMAG)):
		return hostExec{}, fmt.Errorf("exec %s: exec format error", args[0])
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return hostExec{}, fmt.Errorf("exec %s: exec format error (%v)", args[0], err)
	}
	defer ef.Close()
	var interp string
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, min(p.Filesz, 4096))
		if _, err := p.ReadAt(b, 0); err != nil {
			return hostExec{}, fmt.Errorf("entrypoint %s: PT_INTERP: %w", args[0], err)
		}
		interp = string(bytes.TrimRight(b, "\x00"))
	}
	if interp == "" {
		return hostExec{Path: exe, Argv: args}, nil
	}
	ld, err := securejoin.SecureJoin(rootfs, interp)
	if err != nil {
		return hostExec{}, err
	}
	if fi, err := os.Stat(ld); err != nil || !runtime.IsExecutable(fi) {
		return hostExec{}, fmt.Errorf("entrypoint %s is dynamically linked and its interpreter %s is not an executable file in the image: %w", args[0], interp, ErrNoDirectStart)
	}
	var dirs []string
	for _, d := range libDirs {
		if p, err := securejoin.SecureJoin(rootfs, d); err == nil {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() && !slices.Contains(dirs, p) {
				dirs = append(dirs, p)
			}
		}
	}
	argv := []string{interp}
	if len(dirs) > 0 {
		argv = append(argv, "--library-path", strings.Join(dirs, ":"))
	}
	argv = append(append(argv, "--argv0", args[0], exe), args[1:]...)
	return hostExec{Path: ld, Argv: argv}, nil
}
