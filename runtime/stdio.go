package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultTimeout is kpt's per-function time limit.
const DefaultTimeout = 5 * time.Minute

// DefaultMaxOutput caps stdout and stderr of one run, each.
const DefaultMaxOutput = 256 << 20

// RunError says which image could not be run and why. Runs that ended in a
// limit (timeout, output cap) are RunErrors too.
type RunError struct {
	Image string
	Err   error
}

func (e *RunError) Error() string { return e.Image + ": " + e.Err.Error() }
func (e *RunError) Unwrap() error { return e.Err }

// ErrTimeout, ErrOutputLimit, ErrMemoryLimit and ErrDiskLimit are the
// limits a run can be killed by (the last two: where a tier ends a run
// that crosses Limits rather than failing its allocation or write, as the
// landlock tier's watchdog does).
var (
	ErrTimeout     = errors.New("timed out")
	ErrOutputLimit = errors.New("output limit exceeded")
	ErrMemoryLimit = errors.New("memory limit exceeded")
	ErrDiskLimit   = errors.New("disk limit exceeded")
)

// wait waits for the run r reaps, enforcing the timeout, the context and
// the output caps by ending every process of the run. It never waits longer
// than the timeout plus KillGrace (plus OutputGrace for output that is still
// held open): what is not reaped by then is left to r in the background and
// reported in the error.
func Wait(ctx context.Context, timeout time.Duration, sio *Stdio, r *Reaper) (Result, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cause error
	select {
	case <-r.done:
	case <-timer.C:
		cause = fmt.Errorf("%w after %s", ErrTimeout, timeout)
	case <-ctx.Done():
		cause = context.Cause(ctx) // ctx.Err() unless a watchdog said why
	case <-sio.overflow:
		cause = fmt.Errorf("%w: more than %d bytes on %s", ErrOutputLimit, sio.Max, sio.overflowName())
	}
	if cause != nil && !r.End(KillGrace) {
		cause = fmt.Errorf("%w; its processes were still not reaped %s after SIGKILL (left to a background reaper)", cause, KillGrace)
	}
	sio.finish()
	res := Result{Stdout: sio.Out.Bytes(), Stderr: sio.Err.Bytes()}
	if cause == nil && sio.overflowName() != "" {
		cause = fmt.Errorf("%w: more than %d bytes on %s", ErrOutputLimit, sio.Max, sio.overflowName())
	}
	if cause != nil {
		res.ExitCode = -1
		return res, cause
	}
	ps, werr := r.ps, r.err
	if ps == nil {
		return res, fmt.Errorf("wait: %w", werr)
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSS = ru.Maxrss << 10
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
		return res, nil
	}
	res.ExitCode = ps.ExitCode()
	return res, nil
}

// stdio is a run's three pipes. The output side collects up to max bytes
// of each stream and signals overflow instead of blocking the function.
type Stdio struct {
	ChildIn, ChildOut, ChildErr *os.File
	in, outR, errR              *os.File
	Src                         io.Reader
	Max                         int64
	Out, Err                    capBuffer
	overflow                    chan struct{}
	overOnce                    sync.Once
	overWhich                   atomic.Value
	readers                     sync.WaitGroup
}

func NewStdio(src io.Reader, max int64) (*Stdio, error) {
	s := &Stdio{Src: src, Max: max, overflow: make(chan struct{})}
	var err error
	if s.ChildIn, s.in, err = os.Pipe(); err != nil {
		return nil, err
	}
	if s.outR, s.ChildOut, err = os.Pipe(); err != nil {
		s.Close()
		return nil, err
	}
	if s.errR, s.ChildErr, err = os.Pipe(); err != nil {
		s.Close()
		return nil, err
	}
	s.Out.Max, s.Err.Max = max, max
	return s, nil
}

func (s *Stdio) Start() {
	go func() {
		if s.Src != nil {
			_, _ = io.Copy(s.in, s.Src) // EPIPE when the function does not read: fine
		}
		s.in.Close()
	}()
	s.readers.Add(2)
	go s.drain(s.outR, &s.Out, "stdout")
	go s.drain(s.errR, &s.Err, "stderr")
}

func (s *Stdio) drain(r *os.File, b *capBuffer, name string) {
	defer s.readers.Done()
	if _, err := io.Copy(b, r); errors.Is(err, errCapped) {
		s.overWhich.CompareAndSwap(nil, name)
		s.overOnce.Do(func() { close(s.overflow) })
	}
	r.Close() // a writer still alive now gets EPIPE instead of blocking
}

func (s *Stdio) overflowName() string {
	v, _ := s.overWhich.Load().(string)
	return v
}

// finish waits for both output streams to end. In a sandbox every process
// that held them is dead once the run's init is (its pid namespace is torn
// down); on the host a process that left the process group may still hold
// them, so after a grace period the streams are cut.
func (s *Stdio) finish() {
	done := make(chan struct{})
	go func() { s.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(OutputGrace):
		s.outR.Close()
		s.errR.Close()
		<-done
	}
}

// OutputGrace is how long output may still arrive after the function exited.
const OutputGrace = 2 * time.Second

func (s *Stdio) CloseChild() {
	for _, f := range []*os.File{s.ChildIn, s.ChildOut, s.ChildErr} {
		if f != nil {
			f.Close()
		}
	}
}

func (s *Stdio) Close() {
	s.CloseChild()
	for _, f := range []*os.File{s.in, s.outR, s.errR} {
		if f != nil {
			f.Close()
		}
	}
	s.Out.free()
	s.Err.free()
}
