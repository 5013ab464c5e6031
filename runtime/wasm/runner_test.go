package wasm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/tetratelabs/wazero"
)

const setNamespaceInput = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm
    namespace: old
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: fn
  data:
    namespace: staging
`

// shared compiles each fixture module once per test binary, keeping the
// compiled code in a per-user directory across runs (as kptr's cache does).
var shared = New(WithCacheDir(filepath.Join(os.TempDir(), fmt.Sprintf("kptr-wasm-test-cache-%d", os.Getuid()))))

func newRunner(t *testing.T, opts ...Option) *Runner {
	t.Helper()
	return shared.with(opts...)
}

func run(t *testing.T, r *Runner, module string, inv runtime.Invocation) (runtime.Result, error) {
	t.Helper()
	return r.Run(context.Background(), bundle.Bundle{Ref: filepath.Base(module), Wasm: module}, inv)
}

// The fixture set-namespace, built for both hosts, does what the native one
// does: through kpt's processResourceList contract (js) and through stdin
// and stdout (wasip1).
func TestSetNamespace(t *testing.T) {
	r := newRunner(t)
	for _, goos := range []string{"js", "wasip1"} {
		t.Run(goos, func(t *testing.T) {
			mod := fnimage.WasmModule(t, "set-namespace", goos)
			res, err := run(t, r, mod, runtime.Invocation{Stdin: strings.NewReader(setNamespaceInput)})
			if err != nil {
				t.Fatalf("run: %v (stderr %q)", err, res.Stderr)
			}
			if res.ExitCode != 0 {
				t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			out := string(res.Stdout)
			// two items and the functionConfig's data
			if strings.Count(out, "namespace: staging") != 3 || !strings.Contains(out, "kind: ResourceList") ||
				!strings.Contains(out, `namespace [default old] updated to \"staging\", 2 value(s) changed`) &&
					!strings.Contains(out, `namespace [default old] updated to "staging", 2 value(s) changed`) {
				t.Fatalf("output:\n%s", out)
			}
		})
	}
}

// A function that fails under kpt's js contract reports its error text on
// stderr and exit code 1, as a failing container function does.
func TestJSFunctionFailure(t *testing.T) {
	r := newRunner(t)
	mod := fnimage.WasmModule(t, "set-namespace", "js")
	in := strings.Replace(setNamespaceInput, "namespace: staging", "other: x", 1)
	res, err := run(t, r, mod, runtime.Invocation{Stdin: strings.NewReader(in)})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "`data.namespace` should not be empty") || len(res.Stdout) != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// Modules of Go's js port before Go 1.21 import the host as module "go",
// not "gojs" (kpt's earliest published wasm images are such modules). Built
// by Go 1.20, one that follows kpt's contract and one that reads stdin run
// as the current port's do, and a failure under the contract is reported
// as one.
func TestJSBeforeGo121(t *testing.T) {
	const toolchain = fnimage.LegacyJSToolchain // the Makefile's LEGACY_JS_GO: prebuilt there for the uid-999 suite
	r := newRunner(t)
	for _, fixture := range fnimage.LegacyJSFixtures {
		t.Run(fixture, func(t *testing.T) {
			mod := fnimage.WasmModuleWith(t, fixture, "js", toolchain)
			code, err := os.ReadFile(mod)
			if err != nil {
				t.Fatal(err)
			}
			rt := wazero.NewRuntime(context.Background())
			defer rt.Close(context.Background())
			cm, err := rt.CompileModule(context.Background(), code)
			if err != nil {
				t.Fatal(err)
			}
			hosts := map[string]bool{}
			for _, f := range cm.ImportedFunctions() {
				m, _, _ := f.Import()
				hosts[m] = true
			}
			if !hosts["go"] || hosts["gojs"] {
				t.Fatalf("the module built by %s imports %v, want the host module \"go\" only", toolchain, hosts)
			}
			res, err := run(t, r, mod, runtime.Invocation{Stdin: strings.NewReader(setNamespaceInput)})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%v exit %d: %s", err, res.ExitCode, res.Stderr)
			}
			want := setNamespaceInput
			if fixture == "js-contract" {
				want = strings.ReplaceAll(want, "namespace: old", "namespace: "+toolchain)
			}
			if string(res.Stdout) != want {
				t.Fatalf("output:\n%s\nwant:\n%s", res.Stdout, want)
			}
		})
	}
	res, err := run(t, r, fnimage.WasmModuleWith(t, "js-contract", "js", toolchain), runtime.Invocation{Stdin: strings.NewReader("kind: ConfigMap\n")})
	if err != nil || res.ExitCode != 1 || len(res.Stdout) != 0 || !strings.Contains(string(res.Stderr), "js-contract: the input is not a ResourceList") {
		t.Fatalf("a failure under kpt's contract: %v exit %d, stdout %q, stderr %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
}

// The module of an image is read beneath its rootfs.
func TestModuleInRootfs(t *testing.T) {
	r := newRunner(t)
	code, err := os.ReadFile(fnimage.WasmModule(t, "set-namespace", "js"))
	if err != nil {
		t.Fatal(err)
	}
	rootfs := t.TempDir()
	if err := os.WriteFile(filepath.Join(rootfs, "fn.wasm"), code, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), bundle.Bundle{Ref: "img", Rootfs: rootfs, Wasm: "fn.wasm"},
		runtime.Invocation{Stdin: strings.NewReader(setNamespaceInput)})
	if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "namespace: staging") {
		t.Fatalf("%v exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	// a module path that climbs out of the rootfs is not followed
	if err := os.Symlink("/etc/passwd", filepath.Join(rootfs, "out.wasm")); err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background(), bundle.Bundle{Ref: "img", Rootfs: rootfs, Wasm: "out.wasm"}, runtime.Invocation{})
	if err == nil || !strings.Contains(err.Error(), "reading module") {
		t.Fatalf("symlink out of the rootfs: %v", err)
	}
}

// Hostile modules end with one line naming the cause, in bounded time.
func TestHostile(t *testing.T) {
	r := newRunner(t, WithMemoryLimit(48<<20))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cases := []struct {
		mode    string
		inv     runtime.Invocation
		wantErr string // substring of the error; "" means none
		check   func(t *testing.T, res runtime.Result)
	}{
		{mode: "cat", check: func(t *testing.T, res runtime.Result) {
			if string(res.Stdout) != "hello\n" {
				t.Fatalf("stdout %q", res.Stdout)
			}
		}},
		{mode: "loop", inv: runtime.Invocation{Timeout: time.Second}, wantErr: "timed out after 1s"},
		{mode: "sleep", inv: runtime.Invocation{Timeout: time.Second}, wantErr: "timed out after 1s"},
		{mode: "alloc", wantErr: "memory limit of 48 MiB reached"},
		{mode: "flood", inv: runtime.Invocation{MaxOutput: 1 << 20}, wantErr: "output limit exceeded: more than 1048576 bytes on stdout"},
		{mode: "panic", check: func(t *testing.T, res runtime.Result) {
			if res.ExitCode != 2 || !strings.Contains(string(res.Stderr), "hostile panic") {
				t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr)
			}
		}},
		{mode: "files", check: func(t *testing.T, res runtime.Result) {
			out := string(res.Stdout)
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if strings.HasSuffix(line, "<nil>") || strings.Contains(line, ": 1") && strings.HasPrefix(line, "readdir") {
					t.Errorf("host file reachable: %s", line)
				}
			}
			if strings.Count(out, "\n") != 6 {
				t.Fatalf("output %q", out)
			}
			if _, err := os.Stat("/tmp/kptr-wasm-hostile"); err == nil {
				t.Fatal("the module created a host file")
			}
		}},
		{mode: "env", inv: runtime.Invocation{Env: []string{"A=b"}}, check: func(t *testing.T, res runtime.Result) {
			for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
				if l != "A=b" && !strings.HasPrefix(l, "KPTR_WASM_HOSTILE") {
					t.Errorf("environment beyond the invocation's: %q", l)
				}
			}
		}},
		{mode: "dial", inv: runtime.Invocation{Env: []string{"KPTR_WASM_HOSTILE_ARG=" + ln.Addr().String()}}, check: func(t *testing.T, res runtime.Result) {
			if !strings.HasPrefix(string(res.Stdout), "dial: failed") {
				t.Fatalf("stdout %q", res.Stdout)
			}
		}},
	}
	for _, goos := range []string{"js", "wasip1"} {
		mod := fnimage.WasmModule(t, "wasm-hostile", goos)
		for _, tc := range cases {
			t.Run(goos+"/"+tc.mode, func(t *testing.T) {
				inv := tc.inv
				inv.Env = append([]string{"KPTR_WASM_HOSTILE=" + tc.mode}, inv.Env...)
				inv.Stdin = strings.NewReader("hello\n")
				start := time.Now()
				res, err := run(t, r, mod, inv)
				if d := time.Since(start); d > 60*time.Second {
					t.Errorf("took %v", d)
				}
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
						t.Fatalf("error %v, want one line with %q (exit %d, stderr %q)", err, tc.wantErr, res.ExitCode, tail(res.Stderr))
					}
					return
				}
				if err != nil {
					t.Fatalf("%v (stderr %q)", err, tail(res.Stderr))
				}
				tc.check(t, res)
			})
		}
	}
}

func tail(b []byte) string {
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}

// Hand-made modules: a trap, a loop with no call in it, an import nobody
// provides, memory larger than the limit at start.
func TestHostileModules(t *testing.T) {
	r := newRunner(t, WithMemoryLimit(1<<20))
	dir := t.TempDir()
	cases := []struct {
		name    string
		code    []byte
		timeout time.Duration
		wantErr string
	}{
		{"trap", module(nil, []byte{0x00, 0x00, 0x0b}, 0), 0, "wasm trap: "},
		{"loop", module(nil, []byte{0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}, 0), time.Second, "timed out after 1s"},
		{"unknown import", module([]byte("env.foo"), []byte{0x00, 0x0b}, 0), 0, "module imports env.foo, which kptr does not provide"},
		{"memory", module(nil, []byte{0x00, 0x0b}, 64), 0, "module needs more memory at start than the limit of 1 MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".wasm")
			if err := os.WriteFile(p, tc.code, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := run(t, r, p, runtime.Invocation{Timeout: tc.timeout})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line with %q", err, tc.wantErr)
			}
			var re *runtime.RunError
			if !errors.As(err, &re) {
				t.Fatalf("%T is not a RunError", err)
			}
		})
	}
}

// module assembles a wasm module exporting _start with body (locals and
// code, ending in 0x0b); imp "mod.name" adds a function import of type
// () -> (); memPages > 0 adds a memory of that many pages.
func module(imp, body []byte, memPages byte) []byte {
	sec := func(id byte, content []byte) []byte { return append([]byte{id, byte(len(content))}, content...) }
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	m := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	m = append(m, sec(1, []byte{0x01, 0x60, 0x00, 0x00})...)
	fnIndex := byte(0)
	if imp != nil {
		modName, fnName, _ := strings.Cut(string(imp), ".")
		c := append([]byte{0x01}, str(modName)...)
		c = append(c, str(fnName)...)
		c = append(c, 0x00, 0x00)
		m = append(m, sec(2, c)...)
		fnIndex = 1
	}
	m = append(m, sec(3, []byte{0x01, 0x00})...)
	if memPages > 0 {
		m = append(m, sec(5, []byte{0x01, 0x00, memPages})...)
	}
	exp := append([]byte{0x01}, str("_start")...)
	exp = append(exp, 0x00, fnIndex)
	m = append(m, sec(7, exp)...)
	code := append([]byte{byte(len(body))}, body...)
	m = append(m, sec(10, append([]byte{0x01}, code...))...)
	return m
}

// Compiled modules are kept in the cache directory, so a second runner (a
// later kptr process) does not compile again.
func TestCompilationCache(t *testing.T) {
	if goruntime.GOARCH != "amd64" && goruntime.GOARCH != "arm64" {
		t.Skip("wazero compiles ahead only on amd64 and arm64")
	}
	dir := t.TempDir()
	mod := filepath.Join(t.TempDir(), "exit0.wasm")
	if err := os.WriteFile(mod, module(nil, []byte{0x00, 0x0b}, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		r := New(WithCacheDir(dir))
		res, err := run(t, r, mod, runtime.Invocation{})
		r.Close()
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run %d: %v %s", i, err, res.Stderr)
		}
		n := 0
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode().IsRegular() {
				n++
			}
			return nil
		})
		if n == 0 {
			t.Fatalf("run %d left nothing in the compilation cache", i)
		}
	}
}

// wazero loads the compiled code it finds in the cache directory as machine
// code, unchecked (issue 30: uid 999, able to write root's cache's wasm/,
// rewrote a module's code and root's kptr ran it). So a module's compiled
// code is used only if nobody but its user or root can have written it: a
// file or directory of another uid's, one group or others may write, or a
// link there fails the run (exit 3, naming the entry) before wazero reads it.
func TestCompiledCodeOnlyFromTheOwner(t *testing.T) {
	if goruntime.GOARCH != "amd64" && goruntime.GOARCH != "arm64" {
		t.Skip("wazero compiles ahead only on amd64 and arm64")
	}
	mod := filepath.Join(t.TempDir(), "exit0.wasm")
	if err := os.WriteFile(mod, module(nil, []byte{0x00, 0x0b}, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	compiled := func(t *testing.T) (dir string, files, dirs []string) {
		dir = t.TempDir()
		r := New(WithCacheDir(dir))
		res, err := run(t, r, mod, runtime.Invocation{})
		// Close waits for a compilation still under way
		r.Close()
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("first run: %v %s", err, res.Stderr)
		}
		_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			switch {
			case err != nil || p == dir:
			case info.Mode().IsRegular():
				files = append(files, p)
			case info.IsDir():
				dirs = append(dirs, p)
			}
			return nil
		})
		if len(files) == 0 || len(dirs) == 0 {
			t.Fatalf("the first run left no compiled code: files %v, dirs %v", files, dirs)
		}
		return dir, files, dirs
	}
	cases := map[string]func(files, dirs []string) string{
		"file writable by others": func(files, _ []string) string { return chmod(t, files[0], 0o666) },
		"directory writable by group": func(_, dirs []string) string {
			return chmod(t, dirs[len(dirs)-1], 0o770)
		},
		"file replaced by a link": func(files, _ []string) string {
			other := filepath.Join(t.TempDir(), "planted")
			if err := os.Rename(files[0], other); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, files[0]); err != nil {
				t.Fatal(err)
			}
			return files[0]
		},
	}
	if os.Geteuid() == 0 {
		cases["file of uid 999"] = func(files, _ []string) string { return chown(t, files[0], 999) }
		cases["directory of uid 999"] = func(_, dirs []string) string { return chown(t, dirs[0], 999) }
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			dir, files, dirs := compiled(t)
			bad := plant(files, dirs)
			r := New(WithCacheDir(dir))
			defer r.Close()
			_, err := run(t, r, mod, runtime.Invocation{})
			var ce *cache.Error
			if err == nil || !errors.As(err, &ce) || ce.ExitCode() != 3 || !strings.Contains(err.Error(), bad) {
				t.Fatalf("want the run refused (exit 3) naming %s, got %v", bad, err)
			}
		})
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) string {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func chown(t *testing.T, p string, uid int) string {
	t.Helper()
	if err := os.Lchown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
	return p
}
