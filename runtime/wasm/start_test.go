package wasm

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/fnimage"
)

func needCompiler(t *testing.T) {
	t.Helper()
	if goruntime.GOARCH != "amd64" && goruntime.GOARCH != "arm64" {
		t.Skip("wazero compiles ahead only on amd64 and arm64")
	}
}

// compiledFiles are the regular files beneath dir that wazero would load
// (its temporary ".tmp" files aside).
func compiledFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".tmp") {
			files = append(files, p)
		}
		return nil
	})
	return files
}

// compiledExit0 compiles exit0 into a new cache directory and gives the
// module, its sum, the directory and the one compiled file there.
func compiledExit0(t *testing.T) (mod, sum, dir, file string) {
	t.Helper()
	mod, sum = exit0(t)
	dir = t.TempDir()
	r := New(WithCacheDir(dir), WithStart(StartCompiled))
	if _, err := run(t, r, mod, runtime.Invocation{}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	files := compiledFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("compiled files: %v", files)
	}
	return mod, sum, dir, files[0]
}

// setNamespaceJS is kpt's set-namespace built for js (a catalog-shaped Go
// module: a compilation takes seconds) and its sum.
func setNamespaceJS(t *testing.T) (string, string) {
	t.Helper()
	mod := fnimage.WasmModule(t, "set-namespace", "js")
	sum, err := ModuleSum(bundle.Bundle{Wasm: mod})
	if err != nil {
		t.Fatal(err)
	}
	return mod, sum
}

// exit0 writes a wasip1 module whose _start returns at once, and gives its
// path and sum.
func exit0(t *testing.T) (string, string) {
	t.Helper()
	mod := filepath.Join(t.TempDir(), "exit0.wasm")
	if err := os.WriteFile(mod, module(nil, []byte{0x00, 0x0b}, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := ModuleSum(bundle.Bundle{Wasm: mod})
	if err != nil {
		t.Fatal(err)
	}
	return mod, sum
}

// With StartBoth a module without compiled code runs at once under the
// interpreter: kpt's set-namespace (js) gives its right output while its
// compilation is held back and the cache directory is empty; Close waits
// for the compilation, which leaves the code in the cache directory, and a
// later runner then runs the module compiled, never starting the
// interpreter.
func TestColdRunInterpretsWhileCompiling(t *testing.T) {
	needCompiler(t)
	mod, sum := setNamespaceJS(t)
	dir := t.TempDir()
	r := New(WithCacheDir(dir), WithStart(StartBoth))
	release := make(chan struct{})
	r.compileGate = func(context.Context) { <-release }
	type ran struct {
		res runtime.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := run(t, r, mod, runtime.Invocation{Stdin: strings.NewReader(setNamespaceInput)})
		done <- ran{res, err}
	}()
	var got ran
	select {
	case got = <-done:
	case <-time.After(10 * time.Minute):
		close(release)
		t.Fatal("the run waited for the compilation it had held back")
	}
	if got.err != nil || got.res.ExitCode != 0 || strings.Count(string(got.res.Stdout), "namespace: staging") != 3 {
		t.Fatalf("interpreted run: %v exit %d\nstdout %s\nstderr %s", got.err, got.res.ExitCode, got.res.Stdout, got.res.Stderr)
	}
	if f := compiledFiles(t, dir); len(f) != 0 || r.CompiledOnDisk(sum) {
		t.Fatalf("compiled code before the compilation was let go: %v", f)
	}
	close(release)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !r.CompiledOnDisk(sum) {
		t.Fatalf("Close returned and the module is not compiled in %s: %v", dir, compiledFiles(t, dir))
	}

	later := New(WithCacheDir(dir), WithStart(StartBoth))
	defer later.Close()
	res, err := run(t, later, mod, runtime.Invocation{Stdin: strings.NewReader(setNamespaceInput)})
	if err != nil || res.ExitCode != 0 || strings.Count(string(res.Stdout), "namespace: staging") != 3 {
		t.Fatalf("compiled run: %v exit %d %s", err, res.ExitCode, res.Stderr)
	}
	if later.irt != nil {
		t.Fatal("a module compiled in the cache directory was interpreted")
	}
}

// countdown is a wasip1 module whose _start counts an i32 down from 2^26:
// seconds, compiled or interpreted (a loop that checks for its context's end
// at every turn is not much faster compiled).
var countdown = module(nil, []byte{
	0x01, 0x01, 0x7f, // one i32 local
	0x41, 0x80, 0x80, 0x80, 0x20, 0x21, 0x00, // local0 = 1<<26
	0x03, 0x40, // loop
	0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, // local0--; br_if local0 != 0
	0x0b, 0x0b, // end loop, end
}, 0)

// An interpreted run still going when the compiled module is ready is ended
// and the module run again compiled: the run ends well, switched once.
func TestInterpretedRunSwitchesToCompiled(t *testing.T) {
	needCompiler(t)
	mod := filepath.Join(t.TempDir(), "countdown.wasm")
	if err := os.WriteFile(mod, countdown, 0o644); err != nil {
		t.Fatal(err)
	}
	r := New(WithCacheDir(t.TempDir()), WithStart(StartBoth))
	defer r.Close()
	// the compilation starts once the interpreter has the module and its
	// run has had a moment to begin
	r.compileGate = func(context.Context) {
		for {
			r.mu.Lock()
			n := len(r.interpreted)
			r.mu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	res, err := run(t, r, mod, runtime.Invocation{Timeout: 10 * time.Minute})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v exit %d %s", err, res.ExitCode, res.Stderr)
	}
	if n := r.switches.Load(); n != 1 {
		t.Fatalf("switched to the compiled module %d times, want 1", n)
	}
}

// A compilation in the background ends with the context of the run that
// started it when that context ends for a cause (a signal, a deadline), and
// leaves nothing in the cache directory a later run would load; when the
// run's context is merely done (cancelled without a cause, as a caller
// does when it returns) the compilation goes on and Close waits for it.
func TestAbandonedCompilationLeavesNothing(t *testing.T) {
	needCompiler(t)
	mod, sum := exit0(t)
	for _, tc := range []struct {
		name     string
		cause    error
		compiled bool
	}{
		{"interrupted", errors.New("interrupted"), false},
		{"caller done", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := New(WithCacheDir(dir), WithStart(StartBoth))
			ctx, cancel := context.WithCancelCause(context.Background())
			gateDone := make(chan error, 1)
			r.compileGate = func(cctx context.Context) {
				// the run's context ends while the compilation waits to start
				cancel(tc.cause)
				select {
				case <-cctx.Done():
					gateDone <- context.Cause(cctx)
				case <-time.After(2 * time.Second):
					gateDone <- nil
				}
			}
			_, _ = r.Run(ctx, bundle.Bundle{Ref: "exit0", Wasm: mod}, runtime.Invocation{})
			closed := make(chan error, 1)
			go func() { closed <- r.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Minute):
				t.Fatal("Close did not return")
			}
			cause := <-gateDone
			if tc.compiled {
				if cause != nil {
					t.Fatalf("the compilation's context ended (%v) with its caller's plain end", cause)
				}
				if !r.CompiledOnDisk(sum) {
					t.Fatal("the compilation did not finish before Close returned")
				}
				return
			}
			if cause == nil || cause.Error() != "interrupted" {
				t.Fatalf("the compilation's context: cause %v, want the run's", cause)
			}
			if f := compiledFiles(t, dir); len(f) != 0 || r.CompiledOnDisk(sum) {
				t.Fatalf("an abandoned compilation left %v", f)
			}
			// and a later run compiles it whole
			later := New(WithCacheDir(dir), WithStart(StartCompiled))
			defer later.Close()
			if res, err := run(t, later, mod, runtime.Invocation{}); err != nil || res.ExitCode != 0 {
				t.Fatalf("later run: %v", err)
			}
			if !later.CompiledOnDisk(sum) {
				t.Fatal("the later run left no compiled code")
			}
		})
	}
}

// By default (StartCompiled) a run waits for its module's compilation, so
// what is left in the background when the Runner closes was started ahead
// for a function that never ran: Close drops it at once, and it leaves
// nothing in the cache directory.
func TestCloseDropsAPreparedCompilation(t *testing.T) {
	needCompiler(t)
	mod, sum := exit0(t)
	dir := t.TempDir()
	r := New(WithCacheDir(dir))
	started, seen := make(chan struct{}), make(chan error, 1)
	r.compileGate = func(cctx context.Context) {
		close(started)
		select {
		case <-cctx.Done():
			seen <- context.Cause(cctx)
		case <-time.After(time.Minute):
			seen <- nil
		}
	}
	m, err := r.load(bundle.Bundle{Wasm: mod})
	if err != nil {
		t.Fatal(err)
	}
	r.background(context.Background(), m)
	<-started
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if cause := <-seen; !errors.Is(cause, errClosed) {
		t.Fatalf("the compilation's context: cause %v, want Close's", cause)
	}
	if f := compiledFiles(t, dir); len(f) != 0 || r.CompiledOnDisk(sum) {
		t.Fatalf("a dropped compilation left %v", f)
	}
}

// A run that joins a compilation started ahead (by a preparation whose
// context goes on) stops waiting for it when the run's own context ends:
// Ctrl-C ends a render at once, whoever started the compilation.
func TestRunStopsWaitingForAJoinedCompilation(t *testing.T) {
	needCompiler(t)
	mod, _ := exit0(t)
	r := New(WithCacheDir(t.TempDir()))
	release := make(chan struct{})
	r.compileGate = func(context.Context) { <-release }
	defer func() { close(release); r.Close() }()
	m, err := r.load(bundle.Bundle{Wasm: mod})
	if err != nil {
		t.Fatal(err)
	}
	r.background(context.Background(), m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, bundle.Bundle{Wasm: mod}, runtime.Invocation{})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("run: %v, want its context's end", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the run still waits for the compilation after its context ended")
	}
}

// What a compilation killed midway leaves (wazero's temporary file, not
// yet renamed into place) is not compiled code: the module counts as not
// compiled, and a run neither loads nor trips over it.
func TestHalfWrittenCompiledCodeIsNotTrusted(t *testing.T) {
	needCompiler(t)
	mod, sum, dir, file := compiledExit0(t)
	// as a process killed while writing leaves it: a truncated temporary
	code, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file+".123.tmp", code[:len(code)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	r := New(WithCacheDir(dir), WithStart(StartBoth))
	if r.CompiledOnDisk(sum) {
		t.Fatal("a temporary file counts as compiled code")
	}
	if res, err := run(t, r, mod, runtime.Invocation{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v", err)
	}
	r.Close()
	if !r.CompiledOnDisk(sum) {
		t.Fatal("the run did not compile the module again")
	}
}
