package namespace

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/seccomp"
)

// Every run is filtered, whichever launcher starts it: the function's
// status says Seccomp: 2 and the calls the policy refuses fail inside it
// (a user namespace, io_uring, ptrace of its parent, a vsock socket). As
// root with invocation mounts auto takes libcontainer (launch.go): that run
// is filtered as well.
func TestEveryLauncherFilters(t *testing.T) {
	cases := []struct {
		name     string
		launcher string
		inv      runtime.Invocation
	}{
		{"nsinit", LauncherNsinit, runtime.Invocation{}},
		{"libcontainer", LauncherLibcontainer, runtime.Invocation{}},
	}
	if os.Geteuid() == 0 {
		src := filepath.Join(testTmp, "filter-mount")
		must(t, os.MkdirAll(src, 0o755))
		cases = append(cases, struct {
			name     string
			launcher string
			inv      runtime.Invocation
		}{"auto with mounts as root", LauncherAuto, runtime.Invocation{Mounts: []runtime.Mount{{Source: src, Target: "/work", ReadOnly: true}}}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-filter-"+strings.ReplaceAll(c.name, " ", "-"))), WithLauncher(c.launcher))
			must(t, err)
			defer s.Close()
			want := c.launcher
			if want == LauncherAuto {
				want = LauncherLibcontainer
			}
			if got := launcherOf(t, s, testBundle(t), c.inv); got != want {
				t.Fatalf("planned for %s, want %s", got, want)
			}
			res, err := s.Run(context.Background(), testBundle(t, "id"), c.inv)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("id: %v exit %d %s", err, res.ExitCode, res.Stderr)
			}
			if f := facts(string(res.Stdout)); f["Seccomp"] != "2" || f["nnp"] != "1" {
				t.Errorf("Seccomp %q, no_new_privs %q: want a filter", f["Seccomp"], f["nnp"])
			}
			for args, want := range map[string]string{
				"unshare":  "operation not permitted",
				"io_uring": "operation not permitted",
			} {
				res, err := s.Run(context.Background(), testBundle(t, args), c.inv)
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("%s: %v exit %d %s", args, err, res.ExitCode, res.Stderr)
				}
				f := facts(string(res.Stdout))
				got := f[args]
				if args == "io_uring" {
					got = f["io_uring_setup"]
				}
				if !strings.Contains(got, want) {
					t.Errorf("%s in the sandbox: %q, want %q", args, got, want)
				}
			}
		})
	}
}

// allThreadsFiltered tells a process without a filter from one whose
// threads all run under kptr's, and says when the process is gone: what a
// libcontainer run is released on.
func TestAllThreadsFiltered(t *testing.T) {
	if os.Getenv("KPTR_FILTERED_CHILD") == "1" {
		if err := seccomp.LoadAllThreads(namespacePolicy); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("filtered")
		time.Sleep(30 * time.Second)
		os.Exit(0)
	}
	plain := exec.Command("/bin/sleep", "30")
	must(t, plain.Start())
	if ok, err := allThreadsFiltered(plain.Process.Pid); ok || err != nil {
		t.Errorf("an unfiltered process: %v %v", ok, err)
	}
	must(t, plain.Process.Kill())
	_, _ = plain.Process.Wait()
	if ok, err := allThreadsFiltered(plain.Process.Pid); ok || err == nil {
		t.Errorf("a reaped process: %v %v", ok, err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestAllThreadsFiltered$")
	child.Env = append(os.Environ(), "KPTR_FILTERED_CHILD=1")
	out, err := child.StdoutPipe()
	must(t, err)
	must(t, child.Start())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "filtered\n" {
		t.Fatalf("child: %q", line)
	}
	if ok, err := allThreadsFiltered(child.Process.Pid); !ok || err != nil {
		t.Errorf("a process filtered with TSYNC (Go: several threads): %v %v", ok, err)
	}
}
