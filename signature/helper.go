package signature

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kptr-dev/kptr/internal/sigwire"
)

// The cryptography runs in kptr's signature verifier, kptr-sigverify (see
// internal/sigwire): a program of its own, so the sigstore libraries it
// links cost only the runs that check a signature. It is looked for where
// kptr itself is installed, never on PATH or by any setting: whoever can
// replace it could replace kptr.

// verifyTimeout bounds one signature's check by the verifier (milliseconds
// of work; the bound is for a verifier that hangs). A variable for tests.
var verifyTimeout = time.Minute

// helper is the run's verifier: one process, started at the first
// signature to check, serving every policy and image of the run (a request
// carries its requirement's keys). It ends when kptr does (its input ends).
var helper = verifier{locate: locate}

// VerifierError is a signature that could not be checked at all: kptr's
// signature verifier is missing, would not start, or failed. The image is
// neither allowed nor refused; the exit code is 3 (environment).
type VerifierError struct {
	Image, Digest string
	Err           error
}

func (e *VerifierError) Error() string {
	img := e.Image
	if e.Digest != "" && !strings.HasSuffix(img, "@"+e.Digest) {
		img += "@" + e.Digest
	}
	return img + ": signatures not checked: " + e.Err.Error()
}

func (e *VerifierError) Unwrap() error { return e.Err }

// ExitCode is 3: kptr's installation or the machine is at fault.
func (e *VerifierError) ExitCode() int { return 3 }

// ChecksSignatures reports whether some scope of p has a sigstoreSigned
// requirement: only then can p need the verifier.
func (p *Policy) ChecksSignatures() bool {
	for _, reqs := range p.docker {
		if slices.ContainsFunc(reqs, requirement.checksSignatures) {
			return true
		}
	}
	return slices.ContainsFunc(p.def, requirement.checksSignatures)
}

func (q requirement) checksSignatures() bool { return q.kind == "sigstoreSigned" }

// VerifierPath is the signature verifier this kptr would run, or why there
// is none (an error naming where kptr looked).
func VerifierPath() (string, error) { return locate() }

// locate finds the verifier beside kptr's executable, then in
// ../libexec/kptr/ from it (symbolic links to kptr resolved first).
func locate() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("the signature verifier %s is found beside kptr, and kptr cannot tell where it is installed: %v", sigwire.Name, err)
	}
	return locateFrom(exe)
}

// locateFrom is locate for the executable exe.
func locateFrom(exe string) (string, error) {
	exe, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return "", fmt.Errorf("the signature verifier %s is found beside kptr, and kptr cannot tell where it is installed: %v", sigwire.Name, err)
	}
	dir := filepath.Dir(exe)
	looked := []string{filepath.Join(dir, sigwire.Name), filepath.Join(filepath.Dir(dir), "libexec", "kptr", sigwire.Name)}
	for _, p := range looked {
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return "", fmt.Errorf("the signature verifier %s: %v", p, err)
		case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
			return "", fmt.Errorf("the signature verifier %s is not an executable file (mode %v); reinstall kptr", p, st.Mode())
		case st.Mode().Perm()&0o002 != 0:
			return "", fmt.Errorf("the signature verifier %s is writable by every user (mode %v); kptr does not run it", p, st.Mode())
		}
		return p, nil
	}
	return "", fmt.Errorf("kptr's signature verifier %s is not installed (looked for %s); it ships with kptr: install both (make install)", sigwire.Name, strings.Join(looked, " and "))
}

// verifier talks to the verifier process, one request at a time.
type verifier struct {
	locate func() (string, error)

	mu   sync.Mutex
	proc *process
	err  error // a verifier that failed is not started again in this run
}

// process is a started verifier.
type process struct {
	path   string
	cmd    *exec.Cmd
	in     *os.File
	out    *bufio.Reader
	outF   *os.File
	stderr *lastWords
	exited chan struct{} // closed when cmd.Wait returned
	werr   error
}

// verify sends one request and returns its answer; an error is a verifier
// that could not answer (not a verdict).
func (v *verifier) verify(req sigwire.Request) (sigwire.Response, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return sigwire.Response{}, v.err
	}
	if v.proc == nil {
		p, err := v.start()
		if err != nil {
			v.err = err
			return sigwire.Response{}, err
		}
		v.proc = p
	}
	resp, err := v.proc.roundTrip(req)
	if err != nil {
		v.err = err
		v.proc.kill()
		v.proc = nil
	}
	return resp, err
}

func (v *verifier) start() (*process, error) {
	path, err := v.locate()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("the signature verifier %s: %v", path, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("the signature verifier %s: %v", path, err)
	}
	p := &process{path: path, in: inW, outF: outR, out: bufio.NewReaderSize(outR, 64<<10), stderr: &lastWords{}, exited: make(chan struct{})}
	p.cmd = &exec.Cmd{
		Path:   path,
		Args:   []string{sigwire.Name},
		Env:    []string{}, // it needs none; nothing of the user's reaches it
		Dir:    "/",
		Stdin:  inR,
		Stdout: outW,
		Stderr: p.stderr,
		// its own process group: a ^C is kptr's to handle; the verifier
		// ends when kptr closes its input
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		// a verifier's descendant holding standard error open does not
		// keep Wait (and so kptr) waiting
		WaitDelay: time.Second,
	}
	err = p.cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("the signature verifier %s would not start: %v", path, err)
	}
	go func() {
		p.werr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *process) roundTrip(req sigwire.Request) (sigwire.Response, error) {
	line, err := json.Marshal(req)
	if err != nil {
		return sigwire.Response{}, err
	}
	deadline := time.Now().Add(verifyTimeout)
	_ = p.in.SetWriteDeadline(deadline)
	_ = p.outF.SetReadDeadline(deadline)
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		return sigwire.Response{}, p.failed(err)
	}
	answer, err := sigwire.ReadLine(p.out)
	if err != nil {
		return sigwire.Response{}, p.failed(err)
	}
	var resp sigwire.Response
	if err := json.Unmarshal(answer, &resp); err != nil {
		return sigwire.Response{}, fmt.Errorf("the signature verifier %s answered what kptr cannot read (%v); reinstall kptr", p.path, err)
	}
	if resp.Error != "" {
		return sigwire.Response{}, fmt.Errorf("the signature verifier %s: %s", p.path, resp.Error)
	}
	return resp, nil
}

// failed words a broken conversation: a verifier that hung, or died (with
// its exit status and last line on standard error).
func (p *process) failed(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("the signature verifier %s did not answer within %v", p.path, verifyTimeout)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("the signature verifier %s stopped answering (%v)", p.path, err)
	}
	why := fmt.Sprint(p.werr)
	if p.werr == nil {
		why = "exit status 0"
	}
	if w := p.stderr.last(); w != "" {
		why += ": " + w
	}
	return fmt.Errorf("the signature verifier %s ended before it answered (%s)", p.path, why)
}

// kill ends the verifier and whatever it started (its process group), and
// waits for it.
func (p *process) kill() {
	p.in.Close()
	select {
	case <-p.exited: // reaped: its pid may be another's now
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-p.exited
	p.outF.Close()
}

// lastWords keeps the last line a process wrote to standard error, bounded.
type lastWords struct {
	mu  sync.Mutex
	buf []byte
}

func (w *lastWords) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if len(w.buf) > 4096 {
		w.buf = w.buf[len(w.buf)-4096:]
	}
	return len(b), nil
}

func (w *lastWords) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(w.buf)), "\n")
	return strings.TrimSpace(string(bytes.ToValidUTF8([]byte(lines[len(lines)-1]), []byte("?"))))
}
