package landlock

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
)

// diesWithKptr runs the test named name again in a child process (the
// "kptr" that will be killed), where run starts a function whose command
// line holds marker and never returns; it SIGKILLs that child once the
// function runs and asserts that nothing with marker is left.
func diesWithKptr(t *testing.T, name string, run func(marker string)) {
	if marker := os.Getenv("KPTR_PDEATH_CHILD"); marker != "" {
		go func() {
			time.Sleep(200 * time.Millisecond)
			fmt.Println("started")
		}()
		run(marker)
		return
	}
	marker := fmt.Sprintf("pdeath-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd := exec.Command(os.Args[0], "-test.run", "^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), "KPTR_PDEATH_CHILD="+marker)
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "started") {
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(processesWith(marker)) == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the function never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for {
		left := processesWith(marker)
		if len(left) == 0 {
			removeStateOf(cmd.Process.Pid)
			return
		}
		if time.Now().After(deadline) {
			for _, p := range left {
				pid, _, _ := strings.Cut(p, ":")
				var n int
				fmt.Sscan(pid, &n)
				syscall.Kill(n, syscall.SIGKILL)
			}
			t.Fatalf("the function outlived the SIGKILLed kptr: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeStateOf removes what the SIGKILLed kptr of pid left in the
// run-state directory.
func removeStateOf(pid int) {
	left, _ := filepath.Glob(filepath.Join(runtime.DefaultStateDir(), fmt.Sprintf("kptr-%d-*", pid)))
	for _, p := range left {
		os.RemoveAll(p)
	}
}
