package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/kptr-dev/kptr/bundle"
)

// Host runs functions without a sandbox: kpt's exec functions (a Bundle
// without Rootfs: Config.Entrypoint+Cmd on the host, with the host
// environment plus inv.Env), and images under --sandbox=none (the
// entrypoint resolved inside the rootfs and executed directly, with only the
// image's Env plus inv.Env; this works for static binaries such as the
// catalog's Go functions). The timeout and output caps still apply; every
// process of the run is in its own process group and killed with it.
type Host struct {
	Timeout   time.Duration // 0: DefaultTimeout
	MaxOutput int64         // 0: DefaultMaxOutput
}

// Run implements Runner.
func (h Host) Run(ctx context.Context, b bundle.Bundle, inv Invocation) (Result, error) {
	start := time.Now()
	res, err := h.run(ctx, b, inv)
	res.Duration = time.Since(start)
	if err != nil {
		name := b.Ref
		if name == "" {
			name = "exec"
		}
		return res, &RunError{Image: name, Err: err}
	}
	return res, nil
}

func (h Host) run(ctx context.Context, b bundle.Bundle, inv Invocation) (Result, error) {
	var cmd *exec.Cmd
	if b.Rootfs == "" {
		args := append(append([]string(nil), b.Config.Entrypoint...), b.Config.Cmd...)
		if len(args) == 0 {
			return Result{}, errors.New("exec function has no command")
		}
		cmd = exec.Command(args[0], args[1:]...)
		if cmd.Err != nil {
			return Result{}, cmd.Err
		}
		cmd.Env = MergeEnv(os.Environ(), inv.Env)
	} else {
		p, err := ResolveProcess(b.Rootfs, b.Config, inv, false)
		if err != nil {
			return Result{}, err
		}
		exe, err := securejoin.SecureJoin(b.Rootfs, p.Args[0])
		if err != nil {
			return Result{}, err
		}
		cmd = exec.Command(exe, p.Args[1:]...)
		cmd.Args[0] = p.Args[0]
		cmd.Env = p.Env
		if dir, err := securejoin.SecureJoin(b.Rootfs, p.Cwd); err == nil && p.Cwd != "/" {
			cmd.Dir = dir
		} else {
			cmd.Dir = filepath.Clean(b.Rootfs)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	timeout := inv.Timeout
	if timeout <= 0 {
		timeout = h.Timeout
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxOut := inv.MaxOutput
	if maxOut <= 0 {
		maxOut = h.MaxOutput
	}
	if maxOut <= 0 {
		maxOut = DefaultMaxOutput
	}
	sio, err := NewStdio(inv.Stdin, maxOut)
	if err != nil {
		return Result{}, err
	}
	defer sio.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = sio.ChildIn, sio.ChildOut, sio.ChildErr
	if err := OnStableThread(cmd.Start); err != nil {
		sio.CloseChild()
		return Result{}, fmt.Errorf("start: %w", err)
	}
	sio.CloseChild()
	sio.Start()
	pgid := cmd.Process.Pid
	r := NewReaper(pgid, func() (*os.ProcessState, error) {
		err := cmd.Wait()
		// The function's own children would keep the pipes open: end them too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return cmd.ProcessState, ignoreExit(err)
	}, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	return Wait(ctx, timeout, sio, r)
}

func ignoreExit(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil
	}
	return err
}

// RunImage is Run for every sandbox tier: exec functions (no Rootfs) through
// Host, images through run, timed, with failures wrapped in a RunError that
// names the image.
func RunImage(ctx context.Context, b bundle.Bundle, inv Invocation, timeout time.Duration, maxOutput int64,
	run func(context.Context, bundle.Bundle, Invocation) (Result, error)) (Result, error) {
	if b.Rootfs == "" {
		return Host{Timeout: timeout, MaxOutput: maxOutput}.Run(ctx, b, inv)
	}
	start := time.Now()
	res, err := run(ctx, b, inv)
	res.Duration = time.Since(start)
	if err != nil {
		name := b.Ref
		if name == "" {
			name = b.Rootfs
		}
		return res, &RunError{Image: name, Err: err}
	}
	return res, nil
}
