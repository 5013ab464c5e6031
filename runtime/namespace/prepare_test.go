package namespace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
)

// preparedPid waits until the oldest prepared sandbox of s is set up and
// returns its init's host pid.
func preparedPid(t *testing.T, s *Sandbox) int {
	t.Helper()
	s.mu.Lock()
	if len(s.prepared) == 0 {
		s.mu.Unlock()
		t.Fatal("nothing prepared")
	}
	pr := s.prepared[0]
	s.mu.Unlock()
	<-pr.ready
	if pr.err != nil {
		t.Fatalf("prepare: %v", pr.err)
	}
	pid, err := pr.st.ct.pid()
	must(t, err)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		t.Fatalf("prepared init %d not running: %v", pid, err)
	}
	return pid
}

// gone waits until host pid has disappeared (reaped, not a zombie).
func gone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			t.Fatalf("prepared init %d is still there: %.200s", pid, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A prepared run gives exactly what a cold run gives (identity, limits,
// environment, stdin → stdout), and is then used up.
func TestPreparedRunSameAsCold(t *testing.T) {
	bothRootfs(t, func(t *testing.T, rootfs string) {
		s := sandbox(t)
		for _, args := range [][]string{{"id"}, {"env"}, {"cat"}, {"ls", "/"}} {
			b := testBundle(t, args...)
			b.Rootfs = rootfs
			input := []byte("apiVersion: v1\nkind: ResourceList\nitems: []\n")
			inv := func() runtime.Invocation {
				return runtime.Invocation{Stdin: bytes.NewReader(input), Env: []string{"FROM_INV=1"}}
			}
			cold, err := s.Run(context.Background(), b, inv())
			must(t, err)
			hits := s.prepHits.Load()
			s.Prepare(context.Background(), b, inv())
			warm, err := s.Run(context.Background(), b, inv())
			must(t, err)
			if got := s.prepHits.Load() - hits; got != 1 {
				t.Fatalf("%v: the prepared sandbox was used %d times, want 1", args, got)
			}
			if s.Prepared() != 0 {
				t.Fatalf("%v: %d prepared sandboxes left after the run", args, s.Prepared())
			}
			if cold.ExitCode != 0 || warm.ExitCode != 0 || !bytes.Equal(cold.Stdout, warm.Stdout) || !bytes.Equal(cold.Stderr, warm.Stderr) {
				t.Errorf("%v: cold %d %q %q, prepared %d %q %q", args, cold.ExitCode, cold.Stdout, cold.Stderr, warm.ExitCode, warm.Stdout, warm.Stderr)
			}
			if args[0] == "cat" && !bytes.Equal(warm.Stdout, input) {
				t.Errorf("cat: got %q", warm.Stdout)
			}
		}
	})
}

// A prepared sandbox is used by one run only, never by a run of another
// image, command, environment, network or user, and two runs that both
// match it never share it.
func TestPreparedUsedOnceAndOnlyByItsShape(t *testing.T) {
	s := sandbox(t)
	ctx := context.Background()
	b := testBundle(t, "token", "run-0")
	inv := runtime.Invocation{AsCurrentUser: true}
	s.Prepare(ctx, b, inv)
	hits := s.prepHits.Load()
	other := b
	other.Config.Cmd = []string{"token", "run-1"}
	otherRootfs := b
	otherRootfs.Rootfs = directRootfs(t)
	mismatches := []struct {
		name string
		run  func() (runtime.Result, error)
		want string
	}{
		{"other command", func() (runtime.Result, error) { return s.Run(ctx, other, inv) }, "run-1 <nil>"},
		{"other rootfs", func() (runtime.Result, error) { return s.Run(ctx, otherRootfs, inv) }, "run-0 <nil>"},
		{"other env", func() (runtime.Result, error) {
			return s.Run(ctx, b, runtime.Invocation{AsCurrentUser: true, Env: []string{"X=1"}})
		}, "run-0 <nil>"},
		{"other network", func() (runtime.Result, error) {
			return s.Run(ctx, b, runtime.Invocation{AsCurrentUser: true, Network: true})
		}, "run-0 <nil>"},
	}
	for _, m := range mismatches {
		res, err := m.run()
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if got := facts(string(res.Stdout))["/tmp/token"]; got != m.want {
			t.Errorf("%s: token %q, want %q", m.name, got, m.want)
		}
		if s.prepHits.Load() != hits || s.Prepared() != 1 {
			t.Fatalf("%s: the prepared sandbox was used (or lost) by a run of another shape", m.name)
		}
	}
	// Two concurrent runs of the matching shape: one gets it, the other
	// starts cold; each sees only its own /tmp and $HOME.
	var wg sync.WaitGroup
	out := make([]map[string]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Run(ctx, b, inv)
			if err != nil {
				t.Error(err)
			}
			out[i] = facts(string(res.Stdout))
		}()
	}
	wg.Wait()
	if got := s.prepHits.Load() - hits; got != 1 {
		t.Fatalf("prepared sandbox used %d times, want exactly once", got)
	}
	for i := range 2 {
		if out[i]["/tmp/token"] != "run-0 <nil>" || out[i]["/root/token"] != "run-0 <nil>" {
			t.Errorf("run %d saw %v", i, out[i])
		}
	}
	// A run after that is cold: nothing left to reuse.
	if _, err := s.Run(ctx, b, inv); err != nil {
		t.Fatal(err)
	}
	if got := s.prepHits.Load() - hits; got != 1 || s.Prepared() != 0 {
		t.Fatalf("after a third run: %d uses, %d prepared", got, s.Prepared())
	}
}

// An unused prepared sandbox leaves nothing behind: Close (and the end of
// the context it was prepared under) kills its init and removes its state.
func TestPreparedUnusedLeavesNothing(t *testing.T) {
	s, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-prepared")))
	must(t, err)
	b := testBundle(t, "id")

	s.Prepare(context.Background(), b, runtime.Invocation{})
	pid := preparedPid(t, s)
	must(t, s.Close())
	gone(t, pid)
	if s.Prepared() != 0 {
		t.Fatalf("%d prepared after Close", s.Prepared())
	}
	s.Prepare(context.Background(), b, runtime.Invocation{})
	if s.Prepared() != 0 {
		t.Fatal("Prepare after Close prepared a sandbox")
	}
	if res, err := s.Run(context.Background(), b, runtime.Invocation{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run after Close: %v %d", err, res.ExitCode)
	}

	s2, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-prepared")))
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s2.Prepare(ctx, b, runtime.Invocation{})
	pid = preparedPid(t, s2)
	cancel()
	gone(t, pid)
	// More than maxPrepared unused: the oldest is destroyed.
	var pids []int
	for i := range maxPrepared + 1 {
		s2.Prepare(context.Background(), testBundle(t, "id", fmt.Sprint(i)), runtime.Invocation{})
		if i < maxPrepared {
			s2.mu.Lock()
			pr := s2.prepared[len(s2.prepared)-1]
			s2.mu.Unlock()
			<-pr.ready
			p, err := pr.st.ct.pid()
			must(t, err)
			pids = append(pids, p)
		}
	}
	if s2.Prepared() != maxPrepared {
		t.Fatalf("%d prepared, want the bound %d", s2.Prepared(), maxPrepared)
	}
	gone(t, pids[0])
	must(t, s2.Close())
	gone(t, pids[1])
	des, err := os.ReadDir(filepath.Join(testTmp, "state-prepared"))
	must(t, err)
	for _, de := range des {
		t.Errorf("state left behind: %s", de.Name())
	}
}

// A prepared run that ended normally leaves its state (libcontainer's, the
// overlay's upper layer) to be removed in the background after Run has
// returned its result; Close waits for that, so nothing is left once it
// returns, and a run after Close removes its state before returning.
func TestPreparedRunStateGoneAfterClose(t *testing.T) {
	dir := filepath.Join(testTmp, "state-prepared-run")
	s, err := New(runtime.WithStateDir(dir))
	must(t, err)
	b := testBundle(t, "cat")
	for i := range 3 {
		s.Prepare(context.Background(), b, runtime.Invocation{})
		res, err := s.Run(context.Background(), b, runtime.Invocation{Stdin: strings.NewReader(fmt.Sprint("in", i))})
		must(t, err)
		if res.ExitCode != 0 || string(res.Stdout) != fmt.Sprint("in", i) {
			t.Fatalf("run %d: exit %d, stdout %q", i, res.ExitCode, res.Stdout)
		}
	}
	if got := s.prepHits.Load(); got != 3 {
		t.Fatalf("%d runs used a prepared sandbox, want 3", got)
	}
	must(t, s.Close())
	s.Prepare(context.Background(), b, runtime.Invocation{}) // after Close: nothing prepared
	if res, err := s.Run(context.Background(), b, runtime.Invocation{Stdin: strings.NewReader("x")}); err != nil || string(res.Stdout) != "x" {
		t.Fatalf("run after Close: %v %q", err, res.Stdout)
	}
	des, err := os.ReadDir(dir)
	must(t, err)
	for _, de := range des {
		t.Errorf("state left behind: %s", de.Name())
	}
}

// The timeout covers the released function of a prepared sandbox and kills
// every process of it.
func TestPreparedTimeoutKillsEveryProcess(t *testing.T) {
	marker := fmt.Sprintf("kptr-prep-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	s := sandbox(t)
	b := testBundle(t, "forksleep", marker)
	s.Prepare(context.Background(), b, runtime.Invocation{})
	preparedPid(t, s)
	// Time spent prepared does not count against the run's limit.
	time.Sleep(1500 * time.Millisecond)
	hits := s.prepHits.Load()
	start := time.Now()
	res, err := s.Run(context.Background(), b, runtime.Invocation{Timeout: time.Second})
	if !errors.Is(err, runtime.ErrTimeout) {
		t.Fatalf("want timeout, got %v (exit %d)", err, res.ExitCode)
	}
	if s.prepHits.Load() != hits+1 {
		t.Fatal("the prepared sandbox was not used")
	}
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	if !bytes.Contains(res.Stdout, []byte("child: ")) {
		t.Errorf("the child was never started: %q %q", res.Stdout, res.Stderr)
	}
	if left := processesWith(marker); len(left) > 0 {
		t.Fatalf("processes left after the timeout: %v", left)
	}
}

// A prepared sandbox dies with a SIGKILLed kptr as a running one does.
func TestPreparedDiesWithKptr(t *testing.T) {
	if os.Getenv("KPTR_PREP_PDEATH_CHILD") != "" {
		s := sandbox(t)
		s.Prepare(context.Background(), testBundle(t, "id"), runtime.Invocation{})
		fmt.Printf("prepared-pid: %d\n", preparedPid(t, s))
		time.Sleep(time.Minute)
		t.Fatal("not killed")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPreparedDiesWithKptr$", "-test.v")
	cmd.Env = append(os.Environ(), "KPTR_PREP_PDEATH_CHILD=1")
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "prepared-pid: %d", &pid); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatal("the child never prepared a sandbox")
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	gone(t, pid)
	removeStateOf(t, cmd.Process.Pid)
}

// removeStateOf removes the run state a SIGKILLed kptr (pid) left behind
// (kptr itself prunes it only after an hour).
func removeStateOf(t *testing.T, pid int) {
	left, _ := filepath.Glob(filepath.Join(sandbox(t).stateDir, fmt.Sprintf("kptr-%d-*", pid)))
	for _, p := range left {
		os.RemoveAll(p)
	}
}
