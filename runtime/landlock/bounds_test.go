package landlock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// runFacts runs the hostile fixture with args in the landlock tier and
// returns its output and facts; the run must succeed.
func runFacts(t *testing.T, args ...string) (runtime.Result, map[string]string) {
	t.Helper()
	res, err := landlock(t).Run(context.Background(), testBundle(t, args...), runtime.Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run %v: %v exit %d (stderr %q)", args, err, res.ExitCode, res.Stderr)
	}
	return res, facts(string(res.Stdout))
}

// From /proc a landlock-tier function reads only what language runtimes
// read of their own process (status, stat, maps, its fd directory...): not
// its network tables (net/unix lists the host's UNIX sockets by path), not
// the host's mount table, not its cgroup, not another process.
func TestLandlockProcOnlyWhatRuntimesRead(t *testing.T) {
	denied := []string{"/proc/self/net/unix", "/proc/self/net/tcp", "/proc/net/unix", "/proc/self/mountinfo", "/proc/self/mounts",
		"/proc/self/mountstats", "/proc/self/cgroup", "/proc/self/environ", "/proc/thread-self/mountinfo", "/proc/mounts",
		fmt.Sprintf("/proc/%d/status", os.Getpid()), "/proc/1/cmdline", "/proc/meminfo"}
	allowed := []string{"/proc/self/status", "/proc/self/stat", "/proc/self/statm", "/proc/self/maps", "/proc/self/cmdline", "/proc/self/auxv", "/proc/self/limits"}
	res, f := runFacts(t, append(append([]string{"read"}, denied...), allowed...)...)
	for _, p := range denied {
		if !strings.Contains(f[p], "permission denied") {
			t.Errorf("%s: %q, want permission denied", p, f[p])
		}
	}
	for _, p := range allowed {
		if !strings.HasPrefix(f[p], "readable") {
			t.Errorf("%s: %q, want readable\n%s", p, f[p], res.Stdout)
		}
	}
	_, f = runFacts(t, "ls", "/proc/self/fd")
	if _, ok := f["ls"]; ok {
		t.Errorf("its own fd directory: %v", f)
	}
}

// usrRootfs is a fair image for the host's interpreters: the host's /usr as
// the image's root, so that python3 and node, their libraries and standard
// libraries are readable and executable (the landlock tier grants the rootfs
// nothing more) and nothing of /proc or the rest of the host is.
const usrRootfs = "/usr"

// Go, Python and Node functions run in the landlock tier as it is confined
// (seccomp refusing socket(AF_UNIX) and datagram socketpairs, the /proc
// rules, RLIMIT_DATA at the memory limit): each starts a child of its own
// runtime, uses a stream socketpair and allocates 64 MiB; Node starts a
// worker thread too. (Node starts its child by the program's path: in this
// tier its process.execPath is the image's ELF interpreter, through which
// the entrypoint was started.)
func TestLandlockRuntimesRun(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err == nil {
		py, err = filepath.EvalSymlinks(py)
	}
	if err != nil || !strings.HasPrefix(py, "/usr/bin/") {
		py = "/usr/bin/python3"
	}
	for _, tc := range []struct {
		name  string
		entry []string
	}{
		{"go", nil},
		{"python", []string{strings.TrimPrefix(py, "/usr"), "-c", `
import socket, subprocess, sys, os
a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"
out = subprocess.run([sys.executable, "-c", "print(6*7)"], capture_output=True, check=True).stdout
buf = bytearray(64 << 20)
for i in range(0, len(buf), 4096): buf[i] = 1
print("ok", out.decode().strip())
`}},
		{"node", []string{"/bin/node", "-e", `
const cp = require("child_process"), net = require("net");
const out = cp.execFileSync("/usr/bin/node", ["-e", "console.log(6*7)"]).toString().trim();
const buf = Buffer.alloc(64 << 20, 1);
const w = new (require("worker_threads").Worker)("require('worker_threads').parentPort.postMessage(1)", {eval: true});
w.on("message", () => { console.log("ok", out); w.terminate(); });
`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBundle(t, "alloc", "64")
			if tc.entry != nil {
				if _, err := os.Stat(filepath.Join(usrRootfs, tc.entry[0])); err != nil {
					t.Skipf("no %s here", tc.entry[0])
				}
				// The image's /etc is not the function's (the tier's documented
				// limit): Node's OpenSSL would fail on the host's openssl.cnf.
				b = bundle.Bundle{Ref: "example.test/" + tc.name + ":v1", Rootfs: usrRootfs,
					Config: v1.Config{Entrypoint: tc.entry, Env: []string{imagePath, "OPENSSL_CONF=/dev/null"}}}
			}
			res, err := landlock(t).Run(context.Background(), b, runtime.Invocation{Timeout: 20 * time.Second})
			if tc.entry == nil {
				if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "allocated: 64 MiB") {
					t.Errorf("go: %v exit %d %q %q", err, res.ExitCode, res.Stdout, res.Stderr)
				}
				return
			}
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok 42" {
				t.Errorf("%s: %v exit %d stdout %q stderr %q", tc.name, err, res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}

// BenchmarkWatchPoll is one poll of the watchdog (watchRun's work between
// two ticks) over a run directory of n files (1 KiB each, in 10
// directories) and this process's tree: what a run costs kptr's CPU every
// watchInterval.
func BenchmarkWatchPoll(b *testing.B) {
	for _, n := range []int{100, 10000} {
		dir := filepath.Join(testTmp, fmt.Sprintf("watch-%d", n))
		for i := 0; i < n; i++ {
			sub := filepath.Join(dir, strconv.Itoa(i%10))
			must(b, os.MkdirAll(sub, 0o755))
			must(b, os.WriteFile(filepath.Join(sub, strconv.Itoa(i)), make([]byte, 1024), 0o644))
		}
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			for b.Loop() {
				procs := runTree(os.Getpid())
				for _, p := range procs {
					privateRSS(p)
				}
				dirUsage(dir, runDirEntries+1)
				deletedOpen(procs)
			}
		})
	}
}
