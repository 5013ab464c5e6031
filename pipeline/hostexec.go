package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

// Defaults of the built-in host runner, matching the sandbox's.
const (
	defaultTimeout   = 5 * time.Minute
	defaultMaxOutput = 256 << 20
)

// hostExec runs kpt `exec:` functions on the host: the binary and arguments
// in Config.Entrypoint+Cmd, the whole host environment plus inv.Env. It is
// the fallback when Options.ExecRunner is nil.
type hostExec struct{}

func (hostExec) Run(ctx context.Context, b cache.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	argv := append(append([]string{}, b.Config.Entrypoint...), b.Config.Cmd...)
	if len(argv) == 0 {
		return runtime.Result{}, errors.New("exec function has no command")
	}
	timeout := inv.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	limit := inv.MaxOutput
	if limit <= 0 {
		limit = defaultMaxOutput
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), inv.Env...)
	cmd.Stdin = inv.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	over := make(chan struct{})
	var once sync.Once
	stdout := &capWriter{limit: limit, over: func() { once.Do(func() { close(over); cancel() }) }}
	stderr := &capWriter{limit: limit, over: stdout.over}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err := cmd.Run()
	res := runtime.Result{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), Duration: time.Since(start)}
	select {
	case <-over:
		return res, fmt.Errorf("function output exceeds the limit of %d bytes", limit)
	default:
	}
	if ctx.Err() == context.DeadlineExceeded {
		return res, fmt.Errorf("function timed out after %v", timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode()
		if res.ExitCode < 0 {
			return res, fmt.Errorf("function killed: %v", ee)
		}
		return res, nil
	}
	return res, err
}

type capWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int64
	over  func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if int64(w.buf.Len()+len(p)) > w.limit {
		w.over()
		return 0, errors.New("output limit exceeded")
	}
	return w.buf.Write(p)
}
