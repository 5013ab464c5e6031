package runtimetest

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
)

// DiesWithKptr runs the test named name again in a child process (the
// "kptr" that will be killed), where run starts a function whose command
// line holds marker and never returns; it SIGKILLs that child once the
// function runs and asserts that nothing with marker is left; it then removes what the
// killed child left in stateDir. Each tier's pdeath test uses it.
func DiesWithKptr(t *testing.T, name, stateDir string, run func(marker string)) {
	t.Helper()
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
	Must(t, err)
	cmd.Stderr = os.Stderr
	Must(t, cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() && !strings.Contains(sc.Text(), "started") {
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ProcessesWith(marker)) == 0 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the function never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	Must(t, cmd.Process.Signal(syscall.SIGKILL))
	cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for {
		left := ProcessesWith(marker)
		if len(left) == 0 {
			// what the SIGKILLed kptr left in the run-state directory
			left, _ := filepath.Glob(filepath.Join(stateDir, fmt.Sprintf("kptr-%d-*", cmd.Process.Pid)))
			for _, p := range left {
				os.RemoveAll(p)
			}
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
