package namespace

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// The whole way a function takes in kptr: an image built the way catalog
// images are (busybox base layer, /usr/local/bin/function, ENTRYPOINT
// ["function"]), pushed to a registry, pulled and unpacked by the cache,
// run in the sandbox. The cache's rootfs has no /proc or /dev, and it is
// the shared, read-only one: a run must not change it.
func TestCatalogShapedImageThroughTheCache(t *testing.T) {
	reg := registry.Start(t)
	dir := filepath.Join(testTmp, "image-cache")
	c, err := cache.Open(dir)
	must(t, err)
	ctx := context.Background()

	catRef := reg.Addr + "/kpt-fn/cat:v1"
	fnimage.Push(t, fnimage.Build(t, "cat"), catRef)
	b, err := c.Resolve(ctx, catRef)
	must(t, err)
	before := snapshot(t, b.Rootfs)
	rl := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"
	res, err := sandbox(t).Run(ctx, b, runtime.Invocation{Stdin: strings.NewReader(rl)})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != rl {
		t.Fatalf("cat image: %v exit %d out %q err %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}

	hostileRef := reg.Addr + "/kpt-fn/hostile:v1"
	fnimage.Push(t, fnimage.Build(t, "hostile", fnimage.WithCmd("id"), fnimage.WithEnv("FROM_IMAGE=1")), hostileRef)
	hb, err := c.Resolve(ctx, hostileRef)
	must(t, err)
	hostileBefore := snapshot(t, hb.Rootfs)
	res, err = sandbox(t).Run(ctx, hb, runtime.Invocation{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("hostile id: %v exit %d %s", err, res.ExitCode, res.Stderr)
	}
	f := facts(string(res.Stdout))
	if f["pid"] != "1" || f["CapEff"] != "0000000000000000" || f["NoNewPrivs"] != "1" {
		t.Errorf("catalog-shaped image not isolated: %v", f)
	}
	if os.Geteuid() == 0 && f["uid"] != "65534" {
		t.Errorf("as root, functions run as nobody: uid %s", f["uid"])
	}
	hb.Config.Cmd = []string{"write", "/usr/local/bin/function", "/etc/passwd", "/tmp/ok"}
	res, err = sandbox(t).Run(ctx, hb, runtime.Invocation{})
	f = facts(string(res.Stdout))
	// Unprivileged with an overlay, container root owns the image's files
	// and may change them in its throw-away view (the snapshot below shows
	// the cache untouched); otherwise they are read-only to the function.
	viewWritable := sandbox(t).Overlay() && os.Geteuid() != 0
	if err != nil || !viewWritable && (f["/usr/local/bin/function"] == "written" || f["/etc/passwd"] == "written") ||
		viewWritable && f["/etc/passwd"] != "written" || f["/tmp/ok"] != "written" {
		t.Errorf("writes (writable view %v): %v %v", viewWritable, err, f)
	}
	if snapshot(t, b.Rootfs) != before || snapshot(t, hb.Rootfs) != hostileBefore {
		t.Fatal("a cached rootfs changed")
	}
}

// A KRM function (kyaml fn/framework) that tries every escape and reports
// what it achieved in the ResourceList it returns: through the cache and
// the sandbox, the report must show that nothing got out.
func TestKRMEscapeReport(t *testing.T) {
	reg := registry.Start(t)
	c, err := cache.Open(filepath.Join(testTmp, "krm-cache"))
	must(t, err)
	ctx := context.Background()
	ref := reg.Addr + "/kpt-fn/escape-report:v1"
	fnimage.Push(t, fnimage.Build(t, "escape-report"), ref)
	b, err := c.Resolve(ctx, ref)
	must(t, err)

	sentinel := filepath.Join(testTmp, "krm-sentinel")
	must(t, os.WriteFile(sentinel, []byte("secret"), 0o644))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Setenv("KPTR_TEST_SECRET", "hunter2")
	pid := strconv.Itoa(os.Getpid())
	rl := `apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: web
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: attempts
  data:
    read: ` + sentinel + `,` + b.Rootfs + `/usr/local/bin/function
    write: /usr/local/bin/function,/etc/passwd,/tmp/scratch
    connect: ` + l.Addr().String() + `
    kill: ` + pid + `
`
	before := snapshot(t, b.Rootfs)
	res, err := sandbox(t).Run(ctx, b, runtime.Invocation{Stdin: strings.NewReader(rl), Env: []string{"FROM_INVOCATION=1"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	if snapshot(t, b.Rootfs) != before {
		t.Fatal("the cached rootfs changed")
	}
	// Writes into the run's own throw-away overlay (unprivileged, container
	// root owns the image's files) are no escape: the cache is unchanged.
	viewWritable := sandbox(t).Overlay() && os.Geteuid() != 0
	out, err := kyaml.Parse(string(res.Stdout))
	must(t, err)
	items, err := out.Pipe(kyaml.Lookup("items"))
	must(t, err)
	var report map[string]string
	for _, it := range items.Content() {
		n := kyaml.NewRNode(it)
		if n.GetKind() == "ConfigMap" && n.GetName() == "escape-report" {
			report = n.GetDataMap()
		}
	}
	if report == nil {
		t.Fatalf("no escape-report in\n%s", res.Stdout)
	}
	for k, v := range report {
		switch {
		case strings.HasPrefix(k, "read ") && v == "readable",
			strings.HasPrefix(k, "write ") && v == "written" && k != "write /tmp/scratch" && !viewWritable,
			strings.HasPrefix(k, "connect ") && v == "connected",
			strings.HasPrefix(k, "kill ") && v == "signalled":
			t.Errorf("escaped: %s: %s", k, v)
		}
	}
	if report["write /tmp/scratch"] != "written" {
		t.Errorf("/tmp not writable: %q", report["write /tmp/scratch"])
	}
	if report["capeff"] != "0000000000000000" || report["nonewprivs"] != "1" || report["pids"] != "1" {
		t.Errorf("privileges or processes: capeff %s nonewprivs %s pids %s", report["capeff"], report["nonewprivs"], report["pids"])
	}
	if report["env"] != "FROM_INVOCATION,HOME,PATH" {
		t.Errorf("environment %q, want only the image's and the invocation's", report["env"])
	}
	if !strings.Contains(report["unshare"], "operation not permitted") {
		t.Errorf("seccomp: a user namespace inside the sandbox: %q", report["unshare"])
	}
	if os.Geteuid() != 0 && report["uid"] != "0" || os.Geteuid() == 0 && report["uid"] != "65534" {
		t.Errorf("uid %s", report["uid"])
	}
}
