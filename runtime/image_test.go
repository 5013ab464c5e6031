package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
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
	res, err := sandbox(t).Run(ctx, b, Invocation{Stdin: strings.NewReader(rl)})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != rl {
		t.Fatalf("cat image: %v exit %d out %q err %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}

	hostileRef := reg.Addr + "/kpt-fn/hostile:v1"
	fnimage.Push(t, fnimage.Build(t, "hostile", fnimage.WithCmd("id"), fnimage.WithEnv("FROM_IMAGE=1")), hostileRef)
	hb, err := c.Resolve(ctx, hostileRef)
	must(t, err)
	hostileBefore := snapshot(t, hb.Rootfs)
	res, err = sandbox(t).Run(ctx, hb, Invocation{})
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
	res, err = sandbox(t).Run(ctx, hb, Invocation{})
	f = facts(string(res.Stdout))
	if err != nil || f["/usr/local/bin/function"] == "written" || f["/etc/passwd"] == "written" || f["/tmp/ok"] != "written" {
		t.Errorf("writes: %v %v", err, f)
	}
	if snapshot(t, b.Rootfs) != before || snapshot(t, hb.Rootfs) != hostileBefore {
		t.Fatal("a cached rootfs changed")
	}
}
