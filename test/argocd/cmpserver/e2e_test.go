// End-to-end test of kptr as an Argo CD config-management plugin, the fast
// path: the real argocd-cmp-server (built from this module's main.go) runs the repository's
// plugin.yaml as uid 999 without capabilities, and the test plays the
// repo-server: it streams a repository over the plugin's unix socket with
// Argo CD's own client and stream code and checks what comes back.
//
// Run with `make test-argocd` (builds bin/kptr and the cached Argo CD
// binary); KPTR_BIN and ARGOCD_BIN override the binaries. chain_test.go runs
// the real repo-server in front of it.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v3/cmpserver/apiclient"
	"github.com/argoproj/argo-cd/v3/util/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// repoRoot is the kptr repository (this module lives in test/argocd/cmpserver).
var repoRoot = func() string {
	d, _ := filepath.Abs("../../..")
	return d
}()

// pluginUID is the uid Argo CD's plugin docs (and deploy/) run the sidecar as.
const pluginUID = 999

func kptrBinary(t testing.TB) string {
	p := os.Getenv("KPTR_BIN")
	if p == "" {
		p = filepath.Join(repoRoot, "bin", "kptr")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kptr binary: %v (run `make build`, or `make test-argocd`)", err)
	}
	return p
}

var (
	argocdOnce sync.Once
	argocdPath string
	argocdErr  error
	// argocdRequire finds the Argo CD version in go.mod's require block.
	argocdRequire = regexp.MustCompile(`(?m)^\tgithub\.com/argoproj/argo-cd/v3 (v\S+)$`)
)

// argocdBinary returns Argo CD's multi-call binary (main.go: argv[0]
// argocd-repo-server or argocd-cmp-server), ARGOCD_BIN or built once per
// Argo CD version and content of this module into ~/.cache/kptr-test, the
// path `make argocd` builds (same key: the version go.mod requires and the
// hash of go.mod, go.sum and main.go). `go test` puts its own toolchain's
// bin first in PATH, so the build below uses the toolchain go.mod names.
func argocdBinary(t testing.TB) string {
	if p := os.Getenv("ARGOCD_BIN"); p != "" {
		return p
	}
	argocdOnce.Do(func() {
		h := sha256.New()
		version := ""
		for _, f := range []string{"go.mod", "go.sum", "main.go"} {
			b, err := os.ReadFile(f)
			if err != nil {
				argocdErr = err
				return
			}
			h.Write(b)
			if f == "go.mod" {
				if m := argocdRequire.FindSubmatch(b); m != nil {
					version = string(m[1])
				}
			}
		}
		if version == "" {
			argocdErr = fmt.Errorf("go.mod requires no github.com/argoproj/argo-cd/v3")
			return
		}
		home, _ := os.UserHomeDir()
		argocdPath = filepath.Join(home, ".cache", "kptr-test", "argocd-"+version+"-"+hex.EncodeToString(h.Sum(nil))[:16])
		if _, err := os.Stat(argocdPath); err == nil {
			return
		}
		if err := os.MkdirAll(filepath.Dir(argocdPath), 0o755); err != nil {
			argocdErr = err
			return
		}
		// The settings of `go test` itself, so the compiled packages are shared.
		cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", argocdPath+".tmp", ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			argocdErr = fmt.Errorf("building Argo CD: %v\n%s", err, out)
			return
		}
		argocdErr = os.Rename(argocdPath+".tmp", argocdPath)
	})
	if argocdErr != nil {
		t.Fatal(argocdErr)
	}
	return argocdPath
}

var (
	argocdSourceOnce sync.Once
	argocdSourceDir  string
	argocdSourceErr  error
)

// argocdSource is the directory of the Argo CD module go.mod requires, as
// the go command extracted it into the module cache (read-only), for the
// files the binary does not carry (hack/git-verify-wrapper.sh).
func argocdSource(t testing.TB) string {
	argocdSourceOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v3").Output()
		argocdSourceDir = strings.TrimSpace(string(out))
		if err != nil || argocdSourceDir == "" {
			argocdSourceErr = fmt.Errorf("go list -m github.com/argoproj/argo-cd/v3: %q, %v", out, err)
		}
	})
	if argocdSourceErr != nil {
		t.Fatal(argocdSourceErr)
	}
	return argocdSourceDir
}

// server is one running argocd-cmp-server with kptr as its plugin.
type server struct {
	init   int // host pid of kptr init, pid 1 of the sidecar's pid namespace
	sock   string
	cache  string
	tmp    string // the sidecar's /tmp (TMPDIR)
	client apiclient.ConfigManagementPluginServiceClient
	log    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mkdir creates a directory owned by the plugin user (when we are root).
func mkdir(t testing.TB, p string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(p, mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
	if os.Geteuid() == 0 {
		if err := os.Chown(p, pluginUID, pluginUID); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// readOnlyDir creates a directory the plugin user can enter but not write.
func readOnlyDir(t testing.TB, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func copyFile(t testing.TB, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// startServer starts argocd-cmp-server as the sidecar runs: uid 999, no
// capabilities (bounding set empty), no_new_privs, the repository's
// plugin.yaml, a read-only HOME, and only its /tmp (TMPDIR: work dir and
// sandbox state), the socket directory and the cache writable to it.
// operatorEnv is the sidecar's env.
func startServer(t testing.TB, operatorEnv map[string]string) *server {
	t.Helper()
	return startServerWith(t, operatorEnv, sidecarOptions{})
}

// sidecarOptions are what a benchmark changes in the sidecar.
type sidecarOptions struct {
	// seccomp is a seccomp profile (Kubernetes' JSON) the sidecar runs
	// under, loaded by test/e2e/argocd/seccompexec as a node would: the
	// containerd default for a RuntimeDefault pod.
	seccomp string
	// rss records each kptr invocation's peak resident set (GNU time's
	// %M, the largest process of its tree) and wall time in
	// $TMPDIR/kptr-rss.log.
	rss bool
	// plugin is the plugin.yaml the sidecar reads instead of the
	// repository's: fleetVariantPlugin's has no discover section, so
	// Applications must name the plugin (kpt-v1), and the repo-server
	// never sends the repository for discovery.
	plugin string
}

// seccompExec builds test/e2e/argocd/seccompexec (libseccomp, cgo) where
// the sidecar's user can run it, for as long as the test runs (the Go build
// cache makes a second build cheap).
func seccompExec(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kptr-seccompexec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "seccompexec")
	cmd := exec.Command("go", "build", "-o", bin, "./test/e2e/argocd/seccompexec")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building seccompexec: %v\n%s", err, out)
	}
	return bin
}

func startServerWith(t testing.TB, operatorEnv map[string]string, o sidecarOptions) *server {
	t.Helper()
	base, err := os.MkdirTemp("", "kptr-cmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	bin := filepath.Join(base, "bin")
	os.Mkdir(bin, 0o755)
	// kptr behind a wrapper that records each invocation's arguments, so
	// that a test can tell whether Argo CD ran it (server.calls).
	copyFile(t, kptrBinary(t), filepath.Join(bin, "kptr.real"), 0o755)
	// its signature verifier beside it, where kptr looks (make build puts it
	// beside bin/kptr)
	copyFile(t, filepath.Join(filepath.Dir(kptrBinary(t)), "kptr-sigverify"), filepath.Join(bin, "kptr-sigverify"), 0o755)
	run := `exec -a kptr "$0.real" "$@"`
	if o.rss {
		run = `exec /usr/bin/time -f "%M %e $1" -a -o "$TMPDIR/kptr-rss.log" "$0.real" "$@"`
	}
	if err := os.WriteFile(filepath.Join(bin, "kptr"), []byte("#!/bin/bash\necho \"$*\" >> \"$TMPDIR/kptr-calls.log\"\n"+run+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, argocdBinary(t), filepath.Join(bin, "argocd-cmp-server"), 0o755)
	cfg := filepath.Join(base, "config")
	os.Mkdir(cfg, 0o755)
	if o.plugin != "" {
		write(t, cfg, map[string]string{"plugin.yaml": o.plugin})
	} else {
		copyFile(t, filepath.Join(repoRoot, "plugin.yaml"), filepath.Join(cfg, "plugin.yaml"), 0o644)
	}
	s := &server{
		sock:  filepath.Join(mkdir(t, filepath.Join(base, "plugins"), 0o755), "kpt-v1.sock"),
		cache: mkdir(t, filepath.Join(base, "cache"), 0o700),
		log:   &syncBuffer{},
	}
	s.tmp = mkdir(t, filepath.Join(base, "tmp"), 0o700)
	env := map[string]string{
		"PATH":                      bin + ":/usr/local/bin:/usr/bin:/bin",
		"HOME":                      readOnlyDir(t, filepath.Join(base, "home")), // as in the pod (read-only root filesystem)
		"TMPDIR":                    s.tmp,
		"ARGOCD_PLUGINSOCKFILEPATH": filepath.Dir(s.sock),
		"KPTR_CACHE_DIR":            s.cache,
		"KPTR_PROGRESS":             "none",
	}
	for k, v := range operatorEnv {
		env[k] = v
	}
	// As deploy/ starts it: under kptr init, pid 1 of the container's (here
	// a new) pid namespace, which reaps what argocd-cmp-server would leave
	// as zombies (argoproj/argo-cd#29349).
	argv := []string{filepath.Join(bin, "kptr.real"), "init", "--",
		filepath.Join(bin, "argocd-cmp-server"), "--config-dir-path", cfg, "--logformat", "text", "--loglevel", "info"}
	// The namespace gets its own /proc, as a container's: kptr reads
	// /proc/PID of its own pids. sh mounts it and execs the rest, keeping
	// pid 1.
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	if o.seccomp != "" {
		argv = append([]string{seccompExec(t), o.seccomp}, argv...)
	}
	if os.Geteuid() == 0 {
		argv = append([]string{"setpriv", "--reuid", fmt.Sprint(pluginUID), "--regid", fmt.Sprint(pluginUID), "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}, argv...)
	}
	argv = append([]string{"/bin/sh", "-c", `mount --make-rprivate / && mount -t proc proc /proc && exec "$@"`, "sh"}, argv...)
	if os.Geteuid() != 0 {
		t.Logf("not root: running argocd-cmp-server as uid %d", os.Geteuid())
		// the pid namespace needs a user namespace: one mapping only our ids
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.init = cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("argocd-cmp-server log:\n%s", s.log.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(s.sock); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("argocd-cmp-server exited:\n%s", s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket %s after 20s:\n%s", s.sock, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if os.Geteuid() == 0 {
		checkConfined(t, cmd.Process.Pid)
	}
	conn, err := apiclient.NewConnection(s.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.client = apiclient.NewConfigManagementPluginServiceClient(conn)
	return s
}

// checkNamespaceClean waits (up to 15 s) until the sidecar's pid namespace
// holds only kptr init and argocd-cmp-server, neither a zombie: every
// process a render started (functions, background fetches) has ended and
// been reaped.
func (s *server) checkNamespaceClean(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		procs := s.namespaceProcs(t)
		left := []string{}
		for pid, p := range procs {
			if pid == s.init || p.ppid == s.init && strings.Contains(p.cmd, "argocd-cmp-server") && p.state != "Z" {
				continue
			}
			left = append(left, fmt.Sprintf("%d %s %s", pid, p.state, p.cmd))
		}
		if len(left) == 0 && len(procs) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar's pid namespace holds, besides kptr init and argocd-cmp-server (state Z: a zombie):\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type nsProc struct {
	ppid       int
	state, cmd string
}

// namespaceProcs lists the processes in the sidecar's pid namespace (the
// pid namespace of kptr init) by host pid.
func (s *server) namespaceProcs(t testing.TB) map[int]nsProc {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", s.init))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]nsProc{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if l, err := os.Readlink(d + "/ns/pid"); err != nil || l != ns {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// "pid (comm) S ppid ...": comm may hold anything, the last ')' ends it
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		cmdline, _ := os.ReadFile(d + "/cmdline")
		pid, _ := strconv.Atoi(filepath.Base(d))
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = nsProc{ppid: ppid, state: f[0], cmd: strings.ReplaceAll(string(cmdline), "\x00", " ") + string(stat[:i+1])}
	}
	return out
}

// calls counts the kptr invocations whose first argument is command.
func (s *server) calls(command string) int {
	b, _ := os.ReadFile(filepath.Join(s.tmp, "kptr-calls.log"))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if first, _, _ := strings.Cut(line, " "); first == command {
			n++
		}
	}
	return n
}

// checkConfined asserts the server runs as the sidecar does: uid/gid 999, no
// capabilities at all (bounding set included), no_new_privs.
func checkConfined(t testing.TB, pid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Uid":        fmt.Sprintf("%d\t%d\t%d\t%d", pluginUID, pluginUID, pluginUID, pluginUID),
		"Gid":        fmt.Sprintf("%d\t%d\t%d\t%d", pluginUID, pluginUID, pluginUID, pluginUID),
		"Groups":     "",
		"CapInh":     "0000000000000000",
		"CapPrm":     "0000000000000000",
		"CapEff":     "0000000000000000",
		"CapBnd":     "0000000000000000",
		"CapAmb":     "0000000000000000",
		"NoNewPrivs": "1",
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if w, check := want[k]; ok && check {
			if got := strings.TrimSpace(v); got != w {
				t.Errorf("argocd-cmp-server %s = %q, want %q", k, got, w)
			}
			delete(want, k)
		}
	}
	if len(want) != 0 {
		t.Errorf("status fields not found: %v", want)
	}
}

// requestEnv is what the repo-server sends for an Application (getPluginEnvs).
func requestEnv(app string, params map[string]string) []string {
	env := []string{
		"ARGOCD_APP_NAME=" + app,
		"ARGOCD_APP_NAMESPACE=" + app,
		"ARGOCD_APP_PROJECT_NAME=default",
		"ARGOCD_APP_REVISION=0123456789abcdef0123456789abcdef01234567",
		"ARGOCD_APP_REVISION_SHORT=0123456",
		"ARGOCD_APP_REVISION_SHORT_8=01234567",
		"ARGOCD_APP_SOURCE_REPO_URL=https://git.example.com/org/apps.git",
		"ARGOCD_APP_SOURCE_PATH=apps/echo",
		"ARGOCD_APP_SOURCE_TARGET_REVISION=main",
		"KUBE_VERSION=1.34.0",
		"KUBE_API_VERSIONS=v1,apps/v1",
	}
	if params != nil {
		var list []map[string]string
		keys := make([]string, 0, len(params))
		for k := range params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			list = append(list, map[string]string{"name": k, "string": params[k]})
			env = append(env, "PARAM_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))+"="+params[k])
		}
		b, _ := json.Marshal(list)
		env = append(env, "ARGOCD_APP_PARAMETERS="+string(b))
	}
	return env
}

// generate sends repo (app at appRel) as the repo-server does and returns
// the manifests or the error Argo CD would show.
func (s *server) generate(repo, appRel string, env []string) ([]string, error) {
	return s.generateWithin(60*time.Second, repo, appRel, env)
}

// generateWithin is generate with the repo-server's deadline set to d
// (controller.repo.server.timeout.seconds).
func (s *server) generateWithin(d time.Duration, repo, appRel string, env []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	stream, err := s.client.GenerateManifest(ctx)
	if err != nil {
		return nil, err
	}
	if err := cmp.SendRepoStream(ctx, filepath.Join(repo, appRel), repo, stream, env, nil); err != nil {
		return nil, err
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return nil, err
	}
	return resp.GetManifests(), nil
}

func (s *server) match(t testing.TB, repo, appRel string) *apiclient.RepositoryResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := s.client.MatchRepository(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmp.SendRepoStream(ctx, filepath.Join(repo, appRel), repo, stream, requestEnv("echo", nil), nil); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// fns is the local registry with the fixture functions.
type fns struct {
	reg                  *registry.Registry
	labels, annots, fx   string
	labelsImg, annotsImg v1.Image
	allowed              string
}

func pushFunctions(t testing.TB) *fns {
	reg := registry.Start(t)
	f := &fns{reg: reg, allowed: reg.Addr + "/fn/*"}
	f.labelsImg = fnimage.Build(t, "set-labels")
	f.annotsImg = fnimage.Build(t, "set-annotations")
	f.labels = reg.Addr + "/fn/set-labels:v0.2.0"
	f.annots = reg.Addr + "/fn/set-annotations:v0.1.4"
	f.fx = reg.Addr + "/fn/kptr-fx:v1"
	fnimage.Push(t, f.labelsImg, f.labels)
	fnimage.Push(t, f.annotsImg, f.annots)
	fnimage.Push(t, fnimage.Build(t, "kptr-fx"), f.fx)
	return f
}

// blobs lists every blob digest (config and layers) of imgs.
func blobs(t testing.TB, imgs ...v1.Image) []string {
	seen := map[string]bool{}
	for _, img := range imgs {
		cn, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		seen[cn.String()] = true
		ls, _ := img.Layers()
		for _, l := range ls {
			d, _ := l.Digest()
			seen[d.String()] = true
		}
	}
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

func write(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// repository is a checkout as the repo-server holds it: .git included, the
// app under apps/echo (with a subpackage), a second app elsewhere.
func repository(t testing.TB, f *fns) string {
	repo := t.TempDir()
	write(t, repo, map[string]string{
		".git/HEAD":   "ref: refs/heads/main\n",
		".git/config": "[core]\n\tbare = false\n",
		"README.md":   "apps\n",
		"apps/echo/Kptfile": `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: echo
  annotations:
    config.kubernetes.io/local-config: "true"
pipeline:
  mutators:
  - image: ` + f.labels + `
    configMap:
      app.kubernetes.io/name: echoserver
  - image: ` + f.annots + `
    configPath: annotations.yaml
`,
		"apps/echo/annotations.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: echo-annotations
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  owner: platform-team
`,
		"apps/echo/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: echoserver
spec:
  replicas: 2
  selector:
    matchLabels:
      app: echoserver
  template:
    metadata:
      labels:
        app: echoserver
    spec:
      containers:
      - name: echoserver
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: [netexec, --http-port=8080]
`,
		"apps/echo/svc/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: svc\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\n",
		"apps/echo/svc/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: echoserver
spec:
  selector:
    app: echoserver
  ports:
  - port: 80
    targetPort: 8080
`,
		"apps/failing/Kptfile": `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: failing
pipeline:
  mutators:
  - image: ` + f.fx + `
    configMap:
      op: crash
      code: "1"
      message: "policy check failed: Deployment echoserver must set resources.limits"
`,
		"apps/failing/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: echoserver\n",
		"apps/plain/deployment.yaml":   "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: plain\n",
	})
	return repo
}

// expected is the rendering of apps/echo: labels and annotations set by
// the functions, local config (Kptfiles, the annotations config) gone.
func expected(extraAnnotations map[string]string) []map[string]any {
	ann := func() map[string]any {
		m := map[string]any{"owner": "platform-team"}
		for k, v := range extraAnnotations {
			m[k] = v
		}
		return m
	}
	labels := map[string]any{"app.kubernetes.io/name": "echoserver"}
	return []map[string]any{
		{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "echoserver", "labels": labels, "annotations": ann()},
			"spec": map[string]any{
				"replicas": float64(2),
				"selector": map[string]any{"matchLabels": map[string]any{"app": "echoserver"}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": "echoserver"}},
					"spec": map[string]any{"containers": []any{map[string]any{
						"name": "echoserver", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
						"args": []any{"netexec", "--http-port=8080"},
					}}},
				},
			},
		},
		{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "echoserver", "labels": labels, "annotations": ann()},
			"spec": map[string]any{
				"selector": map[string]any{"app": "echoserver"},
				"ports":    []any{map[string]any{"port": float64(80), "targetPort": float64(8080)}},
			},
		},
	}
}

func decode(t testing.TB, manifests []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range manifests {
		var obj map[string]any
		if err := json.Unmarshal([]byte(m), &obj); err != nil {
			t.Fatalf("manifest is not a JSON object: %v\n%s", err, m)
		}
		out = append(out, obj)
	}
	return out
}

func assertManifests(t testing.TB, got []string, want []map[string]any) {
	t.Helper()
	objs := decode(t, got)
	if !reflect.DeepEqual(objs, want) {
		g, _ := json.MarshalIndent(objs, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("manifests:\n%s\nwant:\n%s", g, w)
	}
}

func TestArgoCDPlugin(t *testing.T) {
	f := pushFunctions(t)
	repo := repository(t, f)
	s := startServer(t, map[string]string{"KPTR_ALLOWED_IMAGES": f.allowed})

	t.Run("configuration and discovery", func(t *testing.T) {
		cfg, err := s.client.CheckPluginConfiguration(context.Background(), &emptypb.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.IsDiscoveryConfigured {
			t.Error("plugin.yaml's discovery is not configured")
		}
		if r := s.match(t, repo, "apps/echo"); !r.IsSupported || !r.IsDiscoveryEnabled {
			t.Errorf("apps/echo (Kptfile) not matched: %+v", r)
		}
		// Discovery looks at the app path only: apps/ has Kptfiles below it, not in it.
		if r := s.match(t, repo, "apps"); r.IsSupported {
			t.Error("apps/ matched without a Kptfile of its own")
		}
		if r := s.match(t, repo, "apps/plain"); r.IsSupported {
			t.Error("a directory without a Kptfile matched")
		}
	})

	t.Run("parameter announcements", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stream, err := s.client.GetParametersAnnouncement(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmp.SendRepoStream(ctx, filepath.Join(repo, "apps/echo"), repo, stream, requestEnv("echo", nil), nil); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range resp.ParameterAnnouncements {
			names = append(names, p.Name)
		}
		if strings.Join(names, ",") != "functions,annotation-domain,fn-timeout" {
			t.Errorf("announced parameters = %v", names)
		}
	})

	t.Run("manifests", func(t *testing.T) {
		got, err := s.generate(repo, "apps/echo", requestEnv("echo", nil))
		if err != nil {
			t.Fatalf("generate: %v\n%s", err, s.log.String())
		}
		assertManifests(t, got, expected(nil))
	})

	t.Run("annotations with the parameter", func(t *testing.T) {
		env := requestEnv("argocd_echo", map[string]string{"annotation-domain": "kptr.dev"})
		got, err := s.generate(repo, "apps/echo", env)
		if err != nil {
			t.Fatalf("generate: %v", err)
		}
		assertManifests(t, got, expected(map[string]string{
			"kptr.dev/app-name":        "argocd_echo",
			"kptr.dev/revision":        "0123456789abcdef0123456789abcdef01234567",
			"kptr.dev/repo-url":        "https://git.example.com/org/apps.git",
			"kptr.dev/target-revision": "main",
			"kptr.dev/source-path":     "apps/echo",
		}))
	})

	t.Run("a failing function", func(t *testing.T) {
		got, err := s.generate(repo, "apps/failing", requestEnv("failing", nil))
		if err == nil {
			t.Fatalf("no error; manifests %v", got)
		}
		if len(got) != 0 {
			t.Errorf("manifests returned with an error: %v", got)
		}
		msg := err.Error()
		t.Logf("Argo CD shows: %s", msg)
		for _, want := range []string{"policy check failed: Deployment echoserver must set resources.limits", "kptr-fx:v1", "exit code 1"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error shown in Argo CD %q does not contain %q", msg, want)
			}
		}
		if strings.Contains(msg, "_cmp_server") {
			t.Errorf("error leaks the server's work directory: %q", msg)
		}
	})

	t.Run("parameters cannot widen the policy", func(t *testing.T) {
		// An app that names an image outside the allow-list and passes every
		// parameter that could sound like permission.
		evil := t.TempDir()
		write(t, evil, map[string]string{
			"app/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + f.reg.Addr + "/other/set-labels:v0.2.0\n",
			"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		})
		env := requestEnv("evil", map[string]string{
			"allowed-images": "**", "allow-exec": "true", "allow-network": "true", "sandbox": "none",
			"kptr-allowed-images": "**", "args": "--allowed-images=** --allow-exec",
		})
		env = append(env, "ARGOCD_ENV_KPTR_ALLOWED_IMAGES=**", "ARGOCD_ENV_ALLOWED_IMAGES=**")
		got, err := s.generate(evil, "app", env)
		if err == nil || len(got) != 0 {
			t.Fatalf("refused image rendered: %v %v", got, err)
		}
		if !strings.Contains(err.Error(), "not allowed") || !strings.Contains(err.Error(), f.allowed) {
			t.Errorf("error %q does not explain the refusal", err)
		}
	})
}

// A render that outlives the repo-server's deadline: Argo CD terminates
// kptr, no manifests come back, and no function process is left behind; the
// next render (of another app) on the same cache works.
func TestArgoCDPluginDeadline(t *testing.T) {
	f := pushFunctions(t)
	slow := f.reg.Addr + "/fn/sleep:v1"
	fnimage.Push(t, fnimage.Build(t, "", fnimage.WithEntrypoint("/bin/sleep", "271")), slow)
	repo := repository(t, f)
	write(t, repo, map[string]string{
		"apps/slow/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: slow\npipeline:\n  mutators:\n  - image: " + slow + "\n",
		"apps/slow/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	s := startServer(t, map[string]string{"KPTR_ALLOWED_IMAGES": f.allowed})
	t.Cleanup(killSleepers) // do not leave a leak behind when the check below fails
	start := time.Now()
	got, err := s.generateWithin(4*time.Second, repo, "apps/slow", requestEnv("slow", nil))
	if err == nil || len(got) != 0 {
		t.Fatalf("render past the deadline returned %v, %v", got, err)
	}
	t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	// Argo CD sends SIGTERM at the deadline and SIGKILL 5 s later; kptr must
	// have taken its sandboxed function down with it either way.
	waitNoSleepers(t)
	if _, err := s.generate(repo, "apps/echo", requestEnv("echo", nil)); err != nil {
		t.Fatalf("render after a killed one: %v", err)
	}
}

// sleepers lists the pids running the slow function ("sleep 271").
func sleepers() []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "sleep\x00271") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// Eight Applications rendered at once on a cold cache: every request
// succeeds with the same manifests and each blob is downloaded once.
func TestArgoCDPluginConcurrentColdCache(t *testing.T) {
	f := pushFunctions(t)
	repo := repository(t, f)
	s := startServer(t, map[string]string{"KPTR_ALLOWED_IMAGES": f.allowed})
	digests := blobs(t, f.labelsImg, f.annotsImg)
	before := map[string]int{}
	for _, d := range digests {
		before[d] = f.reg.BlobGets(d)
	}
	const n = 8
	results := make([][]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = s.generate(repo, "apps/echo", requestEnv(fmt.Sprintf("echo-%d", i), nil))
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("request %d: %v", i, errs[i])
			continue
		}
		assertManifests(t, results[i], expected(nil))
	}
	for _, d := range digests {
		if got := f.reg.BlobGets(d) - before[d]; got != 1 {
			t.Errorf("blob %s downloaded %d times by %d concurrent renders, want 1", d, got, n)
		}
	}
	// The cache is owned by the plugin user, nothing else was written.
	if os.Geteuid() == 0 {
		var st syscall.Stat_t
		if err := syscall.Stat(s.cache, &st); err != nil || st.Uid != pluginUID {
			t.Errorf("cache dir owner %d: %v", st.Uid, err)
		}
	}
}
