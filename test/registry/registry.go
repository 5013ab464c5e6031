// Package registry runs a real container registry for end-to-end tests:
// Debian's docker-registry (the CNCF distribution registry), on 127.0.0.1
// with a free port and its own storage directory.
//
//	reg := registry.Start(t)
//	fnimage.Push(t, img, reg.Addr+"/kpt-fn/set-labels:v0.1.5")
//	... reg.BlobGets(digest) counts how often a blob was served ...
//
// The registry writes an access log; BlobGets and Requests read it, so a test
// can prove that N concurrent pulls fetched each blob once, and Agents says
// who asked (the User-Agent of each request), so a test can prove that only
// a mirror, never kptr itself, reached a registry.
//
//	up := registry.Start(t)
//	mirror := registry.StartMirror(t, up)   // pull-through cache of up
//	up.Stop()                               // mirror serves what it holds
package registry

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binary is the registry executable from Debian's docker-registry package.
const Binary = "/usr/bin/docker-registry"

// Registry is one running (or stopped) registry.
type Registry struct {
	// Addr is host:port, always on 127.0.0.1.
	Addr string
	// Dir holds the registry's storage, config and log.
	Dir string

	t       testing.TB
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	logPath string
}

// Start starts a registry and stops it when the test ends. The test fails
// (it does not skip) when the registry binary is missing: .ci/run installs it.
func Start(t testing.TB) *Registry {
	t.Helper()
	r, err := newRegistry(t, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	r.Start()
	return r
}

// Launch starts a registry outside a test (a benchmark command). The
// caller ends it with Close; until then it serves as Start's does. Its
// Start, Requests and BlobGets are a test's (they fail the test): a
// launched registry has none.
func Launch() (*Registry, error) {
	r, err := newRegistry(nil, "")
	if err != nil {
		return nil, err
	}
	if err := r.start(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// StartMirror starts a pull-through mirror of upstream (the registry's
// proxy mode): a pull from it fetches from upstream what it does not hold
// and keeps it. Debian's docker-registry refuses to start while its
// upstream is unreachable, so upstream must be running; once started, the
// mirror serves what it holds, tags included, with upstream stopped.
func StartMirror(t testing.TB, upstream *Registry) *Registry {
	t.Helper()
	r, err := newRegistry(t, "proxy:\n  remoteurl: http://"+upstream.Addr+"\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	r.Start()
	return r
}

// Close stops the registry and removes its storage.
func (r *Registry) Close() {
	r.Stop()
	os.RemoveAll(r.Dir)
}

// newRegistry writes the configuration of a registry in a fresh directory,
// listening on a free loopback port; extra is appended to it (YAML).
func newRegistry(t testing.TB, extra string) (*Registry, error) {
	if _, err := os.Stat(Binary); err != nil {
		return nil, fmt.Errorf("registry: %s not found (apt-get install docker-registry): %v", Binary, err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	dir, err := os.MkdirTemp("", "kptr-registry-")
	if err != nil {
		return nil, err
	}
	r := &Registry{Addr: addr, Dir: dir, t: t, logPath: filepath.Join(dir, "registry.log")}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
%s`, filepath.Join(dir, "storage"), r.Addr, extra)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// Start starts the registry again after Stop, on the same address and storage.
func (r *Registry) Start() {
	r.t.Helper()
	if err := r.start(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *Registry) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(Binary, "serve", filepath.Join(r.Dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = []string{"PATH=/usr/bin:/bin", "OTEL_TRACES_EXPORTER=none"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startOnLockedThread(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("registry: start: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	r.cmd, r.done = cmd, done
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(r.logPath)
			r.cmd, r.done = nil, nil
			return fmt.Errorf("registry: exited at start:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("registry: not ready on %s after 15s: %v", r.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the registry; its storage stays for a later Start.
func (r *Registry) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd, r.done = nil, nil
	// Wait until the port is closed, so "registry down" is really down.
	for i := 0; i < 100; i++ {
		c, err := net.DialTimeout("tcp", r.Addr, 50*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
}

// requestLine matches the request of an access-log line (Apache combined
// format: request, status, size, referer, user agent).
var requestLine = regexp.MustCompile(`"(GET|HEAD|PUT|POST|PATCH|DELETE) (\S+) HTTP/[0-9.]+" (\d{3}) \S+ "[^"]*" "([^"]*)"`)

// Requests returns "METHOD PATH STATUS" for every request the registry served.
// The registry logs a request once its handler has returned, which can be
// after the client has read the whole response: while it runs, Requests
// first sends a marker request and reads the log once the marker is in it,
// so every request answered before the call is counted.
func (r *Registry) Requests() []string {
	var out []string
	for _, req := range r.Agents() {
		out = append(out, req[0])
	}
	return out
}

// Agents is Requests with who sent each: pairs of "METHOD PATH STATUS" and
// the request's User-Agent.
func (r *Registry) Agents() [][2]string {
	r.syncLog()
	var out [][2]string
	for _, req := range r.readLog() {
		if !strings.Contains(req[0], logSyncQuery) {
			out = append(out, req)
		}
	}
	return out
}

func (r *Registry) readLog() [][2]string {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		r.t.Fatalf("registry: read log: %v", err)
	}
	var out [][2]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if m := requestLine.FindStringSubmatch(sc.Text()); m != nil {
			out = append(out, [2]string{m[1] + " " + m[2] + " " + m[3], m[4]})
		}
	}
	return out
}

// logSyncQuery marks the requests syncLog sends (Requests leaves them out).
const logSyncQuery = "kptr-test-log-sync="

// syncLog sends a marker request to a running registry and waits (up to
// 10 s) until its log holds it; a stopped registry's log is complete.
func (r *Registry) syncLog() {
	r.mu.Lock()
	running := r.cmd != nil
	r.mu.Unlock()
	if !running {
		return
	}
	marker := logSyncQuery + strconv.FormatInt(time.Now().UnixNano(), 10)
	resp, err := http.Get("http://" + r.Addr + "/v2/?" + marker)
	if err != nil {
		r.t.Fatalf("registry: log sync: %v", err)
	}
	resp.Body.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, req := range r.readLog() {
			if strings.Contains(req[0], marker) {
				return
			}
		}
	}
	r.t.Fatalf("registry: the access log never showed %s", marker)
}

// BlobGets counts the successful GETs of the blob with this digest
// ("sha256:..."), in any repository.
func (r *Registry) BlobGets(digest string) int {
	n := 0
	for _, req := range r.Requests() {
		f := strings.Fields(req)
		if f[0] == "GET" && strings.HasSuffix(f[1], "/blobs/"+digest) && (f[2] == "200" || f[2] == "206") {
			n++
		}
	}
	return n
}

// Pdeathsig fires when the OS thread that started the child exits, not the
// process, and Go retires threads at will: a registry started from an
// ordinary goroutine can be killed in the middle of a test. Every registry is
// therefore started from one goroutine locked to a thread that lives as long
// as the test binary, so the signal fires only when the tests are gone.
var (
	starterOnce sync.Once
	starts      chan startReq
)

type startReq struct {
	cmd  *exec.Cmd
	errc chan error
}

func startOnLockedThread(cmd *exec.Cmd) error {
	starterOnce.Do(func() {
		starts = make(chan startReq)
		go func() {
			goruntime.LockOSThread() // never unlocked: the thread lives until exit
			for r := range starts {
				r.errc <- r.cmd.Start()
			}
		}()
	})
	errc := make(chan error)
	starts <- startReq{cmd, errc}
	return <-errc
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
