package wasm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/runtime"
)

// leftoverFixture is a cache directory holding exit0's compiled code and,
// beside that file, what killed compilations leave there: a temporary file
// of wazero's unchanged for two hours (stale), one written a moment ago
// (young: another kptr's compilation may be writing it) and a ".tmp" file of
// a name wazero never gives (foreign), 5000 bytes each.
type leftoverFixture struct {
	dir, sum, mod                   string
	compiled, stale, young, foreign string
}

// plantLeftovers makes a leftoverFixture.
func plantLeftovers(t *testing.T) leftoverFixture {
	t.Helper()
	needCompiler(t)
	mod, sum, dir, file := compiledExit0(t)
	f := leftoverFixture{dir: dir, sum: sum, mod: mod, compiled: file,
		stale: file + ".3141592653.tmp", young: file + ".2718281828.tmp",
		foreign: filepath.Join(filepath.Dir(file), "notes.tmp")}
	hoursAgo := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{f.stale, f.young, f.foreign} {
		if err := os.WriteFile(p, make([]byte, 5000), 0o600); err != nil {
			t.Fatal(err)
		}
		if p != f.young {
			if err := os.Chtimes(p, hoursAgo, hoursAgo); err != nil {
				t.Fatal(err)
			}
		}
	}
	return f
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// A prune keeps a cached module's compiled code and removes from its
// directory what a compilation killed between wazero's write and rename
// left, once unchanged for the grace period; a younger one may be another
// kptr's compilation under way and stays, as does a file of a name wazero
// never writes. The freed bytes are counted, and a dry run only reports.
func TestPruneRemovesLeftoversOfKilledCompilations(t *testing.T) {
	f := plantLeftovers(t)
	compiledSize := treeSize(f.compiled)
	keep := map[string]bool{f.sum: true}
	wazeroDir := filepath.Base(filepath.Dir(f.compiled))
	want := []string{f.sum + "/" + wazeroDir + "/" + filepath.Base(f.stale)}

	dry, err := PruneCompiled(f.dir, keep, runtime.PruneOptions{Grace: time.Hour, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dry.Leftovers, want) || dry.FreedBytes != 5000 || len(dry.Removed) != 0 {
		t.Fatalf("dry run's report: %+v, want leftovers %v and 5000 bytes freed", dry, want)
	}
	if !exists(f.stale) {
		t.Fatal("a dry run removed the stale leftover")
	}

	rep, err := PruneCompiled(f.dir, keep, runtime.PruneOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Leftovers, want) || rep.FreedBytes != 5000 || len(rep.Removed) != 0 || len(rep.KeptInUse) != 0 {
		t.Fatalf("report: %+v, want leftovers %v and 5000 bytes freed", rep, want)
	}
	if rep.TotalBytes != compiledSize+2*5000 {
		t.Errorf("total %d, want the compiled file's %d and the two files that stay", rep.TotalBytes, compiledSize)
	}
	if exists(f.stale) {
		t.Error("the leftover of a compilation killed two hours ago survived the prune")
	}
	for _, p := range []string{f.compiled, f.young, f.foreign} {
		if !exists(p) {
			t.Errorf("the prune removed %s", filepath.Base(p))
		}
	}
	if r := New(WithCacheDir(f.dir)); !r.CompiledOnDisk(f.sum) {
		t.Error("the module's compiled code is no longer on disk")
	}
}

// A compilation clears its module's directory of leftovers unchanged for
// an hour, as a sidecar never prunes; a young one, which may be another
// process's write under way, stays.
func TestCompilationSweepsStaleLeftovers(t *testing.T) {
	f := plantLeftovers(t)
	r := New(WithCacheDir(f.dir), WithStart(StartCompiled))
	if res, err := run(t, r, f.mod, runtime.Invocation{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v", err)
	}
	r.Close()
	if exists(f.stale) {
		t.Error("the run left the leftover of a compilation killed two hours ago")
	}
	for _, p := range []string{f.compiled, f.young, f.foreign} {
		if !exists(p) {
			t.Errorf("the run removed %s", filepath.Base(p))
		}
	}
}

// A kptr killed while compiling a real module, at the worst moment (wazero
// has written the code to its temporary file and not yet renamed it: a
// seccomp filter kills the process at its first rename), leaves that file
// and no compiled code. A prune at once keeps it, as it may be another
// kptr's write under way; once it has not changed for the grace period, the
// prune removes it and counts its bytes.
func TestKilledCompilationLeftoverIsPruned(t *testing.T) {
	if dir := os.Getenv("KPTR_KILLED_COMPILE_DIR"); dir != "" {
		killAtRename(t)
		r := New(WithCacheDir(dir), WithStart(StartCompiled))
		_, err := run(t, r, os.Getenv("KPTR_KILLED_COMPILE_MODULE"), runtime.Invocation{Stdin: strings.NewReader(setNamespaceInput)})
		t.Fatalf("the compilation was not killed at its rename: %v", err)
	}
	needCompiler(t)
	mod, sum := setNamespaceJS(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestKilledCompilationLeftoverIsPruned$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "KPTR_KILLED_COMPILE_DIR="+dir, "KPTR_KILLED_COMPILE_MODULE="+mod)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSYS {
		t.Fatalf("the compiling process was not killed at its rename: %v\n%s", err, out)
	}
	if f := compiledFiles(t, dir); len(f) != 0 {
		t.Fatalf("compiled code although the rename never ran: %v", f)
	}
	left, _ := filepath.Glob(filepath.Join(compiledDir(dir, sum), "wazero-*", "*.tmp"))
	if len(left) != 1 || !leftoverName.MatchString(filepath.Base(left[0])) {
		t.Fatalf("what the killed compilation left: %v", left)
	}
	size := treeSize(left[0])
	t.Logf("the killed compilation left %s, %d bytes", filepath.Base(left[0]), size)

	keep := map[string]bool{sum: true}
	rep, err := PruneCompiled(dir, keep, runtime.PruneOptions{Grace: time.Hour})
	if err != nil || len(rep.Leftovers) != 0 || !exists(left[0]) {
		t.Fatalf("a prune right after the kill: %+v, %v", rep, err)
	}
	hoursAgo := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(left[0], hoursAgo, hoursAgo); err != nil {
		t.Fatal(err)
	}
	rep, err = PruneCompiled(dir, keep, runtime.PruneOptions{Grace: time.Hour})
	if err != nil || len(rep.Leftovers) != 1 || rep.FreedBytes != size || rep.TotalBytes != 0 || exists(left[0]) {
		t.Fatalf("a prune two hours after the kill: %+v, %v (the leftover's %d bytes)", rep, err, size)
	}
}

// killAtRename makes the process die (SIGSYS) at its first rename, on every
// thread: what SIGKILL does to a kptr that has just written a file.
func killAtRename(t *testing.T) {
	t.Helper()
	// no core file of the death asked for
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		t.Fatal(err)
	}
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_RENAMEAT, Jt: 1},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_RENAMEAT2, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); errno != 0 {
		t.Fatalf("seccomp: %v", errno)
	}
}
