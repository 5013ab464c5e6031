// Package demo runs `make demo` (examples/demo.sh) into a temporary
// directory, with kptr built there too, and checks that what it prints can be
// copied and run: each "$ COMMAND" line is the command it ran, and the last
// one renders the package again.
package demo

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestDemoPrintsCommandsThatRunAgain(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin, out := filepath.Join(tmp, "bin", "kptr"), filepath.Join(tmp, "out")
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "demo", "BIN="+bin, "DEMO_OUT="+out)
	cmd.Env = withoutMake(os.Environ())
	b, err := cmd.CombinedOutput()
	log := string(b)
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, log)
	}
	var commands []string
	for _, l := range strings.Split(log, "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			commands = append(commands, c)
		}
	}
	// Every step that takes time, and every command the user might want to
	// repeat, is announced before it runs.
	wantRun := []string{
		"go build -tags netgo\\,osusergo -ldflags ", // static, as make build (printed as bash quotes it)
		"go run ./examples/build-images -out " + out + "/demo-images",
		bin + " cache import --cache-dir " + out + "/demo-cache " + out + "/demo-images",
		"cp -r examples/demo " + out + "/demo",
		bin + " fn render " + out + "/demo --cache-dir " + out + "/demo-cache --offline",
	}
	if len(commands) < len(wantRun)+1 {
		t.Fatalf("printed commands %q, want at least %d\n%s", commands, len(wantRun)+1, log)
	}
	for i, w := range wantRun {
		if !strings.HasPrefix(commands[i], w) {
			t.Errorf("command %d: %q, want it to start %q", i, commands[i], w)
		}
	}
	rerun := commands[len(commands)-1]
	if !strings.Contains(log, "== to render "+out+"/demo again") || rerun != wantRun[4] {
		t.Fatalf("the re-run command %q, want %q after its heading\n%s", rerun, wantRun[4], log)
	}

	// The printed command, copied into a shell in the same directory, renders
	// the package again, from the demo's own cache, changing no resource.
	before := snapshot(t, out+"/demo")
	sh := exec.Command("bash", "-c", rerun)
	sh.Dir = root
	sh.Env = append(os.Environ(), "KPTR_CACHE_DIR="+filepath.Join(tmp, "empty-user-cache"))
	if b, err := sh.CombinedOutput(); err != nil || !strings.Contains(string(b), "Successfully executed 4 function(s) in 2 package(s).") {
		t.Fatalf("%s: %v\n%s", rerun, err, b)
	}
	after := snapshot(t, out+"/demo")
	for f, content := range before {
		if filepath.Base(f) != "Kptfile" && after[f] != content {
			t.Errorf("rendering again changed %s:\n%s\nwas:\n%s", f, after[f], content)
		}
	}
	if len(after) != len(before) {
		t.Errorf("rendering again changed the files: %d, was %d", len(after), len(before))
	}

	// docs/install.md's recipe for real pulls without the internet: the
	// demo's images pushed to Debian's docker-registry on loopback, a fresh
	// copy rendered with an empty cache through --mirror; the registry
	// served every image and is stopped afterwards.
	port := freePort(t)
	try := exec.Command("examples/try-registry.sh", bin, out, port)
	try.Dir = root
	try.Env = append(os.Environ(), "KPTR_PROGRESS=none")
	b, err = try.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "Successfully executed 4 function(s) in 2 package(s).") {
		t.Fatalf("examples/try-registry.sh: %v\n%s", err, b)
	}
	for _, ref := range []string{"gcr.io/kpt-fn/set-labels:v0.1.5", "gcr.io/kpt-fn/set-annotations:v0.1.4", "gcr.io/kpt-fn/generator:v0.1.0"} {
		if !strings.Contains(string(b), "\n"+ref+" ") {
			t.Errorf("%s was not pulled into the recipe's cache\n%s", ref, b)
		}
	}
	reglog, _ := os.ReadFile(filepath.Join(out, "registry", "log"))
	n := 0
	for _, l := range strings.Split(string(reglog), "\n") {
		if strings.Contains(l, `"GET /v2/kpt-fn/`) && strings.Contains(l, `"kptr `) {
			n++
		}
	}
	if n < 6 {
		t.Errorf("the registry served kptr %d GETs of the images, want manifests and blobs of all three\n%s", n, reglog)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
		c.Close()
		t.Errorf("the registry still listens on %s after the recipe", port)
	}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// withoutMake drops the variables a make running `go test` passes down
// (MAKEFLAGS, MFLAGS, MAKELEVEL): the make this test starts is its own.
func withoutMake(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			out = append(out, kv)
		}
	}
	return out
}
