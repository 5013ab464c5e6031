package namespace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

var (
	runtimesOnce sync.Once
	runtimesDir  string
	runtimesErr  string
)

// runtimesRootfs is an image with the host's Python and Node (binaries,
// the shared libraries ldd names, Python's standard library), or "" and
// why not where the host has neither.
func runtimesRootfs(t *testing.T) (string, string) {
	runtimesOnce.Do(func() {
		dir := filepath.Join(testTmp, "cache", "rootfs-runtimes")
		var files []string
		for _, bin := range []string{"/usr/bin/python3.11", "/usr/bin/node"} {
			if _, err := os.Stat(bin); err != nil {
				runtimesErr = bin + " missing"
				return
			}
			files = append(files, bin)
			out, err := exec.Command("ldd", bin).Output()
			if err != nil {
				runtimesErr = "ldd " + bin + ": " + err.Error()
				return
			}
			for _, l := range strings.Split(string(out), "\n") {
				for _, f := range strings.Fields(l) {
					if strings.HasPrefix(f, "/") {
						files = append(files, f)
					}
				}
			}
		}
		for _, d := range []string{"proc", "dev", "tmp", "etc", "usr/lib"} {
			must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
		}
		must(t, os.Chmod(filepath.Join(dir, "tmp"), 0o1777))
		for _, f := range files {
			dst := filepath.Join(dir, f)
			must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
			if out, err := exec.Command("cp", "-L", f, dst).CombinedOutput(); err != nil {
				t.Fatalf("cp %s: %v %s", f, err, out)
			}
		}
		if out, err := exec.Command("cp", "-a", "/usr/lib/python3.11", filepath.Join(dir, "usr/lib/")).CombinedOutput(); err != nil {
			t.Fatalf("cp python stdlib: %v %s", err, out)
		}
		must(t, os.WriteFile(filepath.Join(dir, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/false\n"), 0o644))
		runtimesDir = dir
	})
	return runtimesDir, runtimesErr
}

// pythonScript and nodeScript do what a KRM function's runtime does
// under the filter: read stdin, start a thread or worker, start a child
// process of the same runtime through pipes, make a socketpair, and write
// the input back with a marker.
const pythonScript = `
import os, sys, socket, subprocess, threading, tempfile
data = sys.stdin.read()
t = threading.Thread(target=lambda: None); t.start(); t.join()
a, b = socket.socketpair(); a.sendall(b"x"); assert b.recv(1) == b"x"
out = subprocess.run([sys.executable, "-c", "print(6*7)"], capture_output=True, text=True, check=True).stdout.strip()
with tempfile.TemporaryFile() as f: f.write(b"y")
sys.stdout.write(data + "python " + out + "\n")
`

const nodeScript = `
const cp = require('child_process'), os = require('os'), fs = require('fs');
const { Worker } = require('worker_threads');
let data = fs.readFileSync(0, 'utf8');
const out = cp.spawnSync(process.execPath, ['-e', 'console.log(6*7)'], { encoding: 'utf8' });
if (out.status !== 0) { console.error(out.stderr, out.error); process.exit(1); }
new Worker('require("worker_threads").parentPort.postMessage(1)', { eval: true }).once('message', () => {
  process.stdout.write(data + 'node ' + out.stdout.trim() + ' ' + os.cpus().length + '\n');
});
`

// Python and Node, as the catalog's non-Go functions use them, run under
// kptr's seccomp allow-list with either launcher (Go is every other test:
// the hostile fixture).
func TestRuntimesUnderFilter(t *testing.T) {
	root, why := runtimesRootfs(t)
	if root == "" {
		t.Skip("no Python and Node on this host to build the image from: " + why)
	}
	for _, launcher := range []string{LauncherNsinit, LauncherLibcontainer} {
		t.Run(launcher, func(t *testing.T) {
			s, err := New(runtime.WithStateDir(filepath.Join(testTmp, "state-runtimes-"+launcher)), WithLauncher(launcher))
			must(t, err)
			defer s.Close()
			for name, argv := range map[string][]string{
				"python": {"/usr/bin/python3.11", "-c", pythonScript},
				"node":   {"/usr/bin/node", "-e", nodeScript},
			} {
				b := bundle.Bundle{Ref: "example.test/" + name + ":v1", Rootfs: root,
					Config: v1.Config{Entrypoint: argv, Env: []string{imagePath, "HOME=/tmp"}}}
				in := "kind: ResourceList\n"
				res, err := s.Run(context.Background(), b, runtime.Invocation{Stdin: strings.NewReader(in)})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("%s: %v exit %d\nstdout %s\nstderr %s", name, err, res.ExitCode, res.Stdout, res.Stderr)
				}
				if got := string(res.Stdout); !strings.HasPrefix(got, in+name+" 42") {
					t.Errorf("%s: output %q", name, got)
				}
			}
		})
	}
}
