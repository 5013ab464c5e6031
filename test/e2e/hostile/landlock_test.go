package hostile

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
	"sigs.k8s.io/kustomize/kyaml/kio"
)

// A function image that tries to escape, rendered by the real kptr in the
// landlock tier (--sandbox=landlock: what a pod under RuntimeDefault gets),
// as root and as the sidecar: it reads the sentinels in $HOME, the cache and
// the package's neighbours by absolute path, writes into them, dials a host
// listener, signals kptr's parent and pid 1, and tries a user namespace;
// every attempt fails, the sentinels stay unchanged, and the render
// otherwise succeeds. As root, a cache others cannot traverse is refused
// before any pull (exit 3) with an error naming the fix.
func TestLandlockTierHoldsAgainstAnEscapingFunction(t *testing.T) {
	reg := registry.Start(t)
	ref := reg.Addr + "/kpt-fn/escape-report:v1"
	fnimage.Push(t, fnimage.Build(t, "escape-report"), ref)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	forEachIdentity(t, func(t *testing.T, h *harness) {
		outside := h.sentinel(t, filepath.Join(h.base, "outside"))
		targets := []string{filepath.Join(h.home, ".bashrc"), filepath.Join(outside, "config/app.yaml"), filepath.Join(h.cache, "x")}
		reads := append([]string{filepath.Join(h.home, ".ssh/id_ed25519"), "/proc/1/environ", "/etc/shadow"}, targets[1])
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - image: " + ref + "\n      configMap:\n" +
				"        read: " + strings.Join(reads, ",") + "\n" +
				"        write: " + strings.Join(targets, ",") + "\n" +
				"        connect: " + l.Addr().String() + "\n" +
				"        kill: 1," + strconv.Itoa(os.Getpid()) + "\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		if h.id.uid < 0 && os.Geteuid() == 0 {
			// refused before any pull, exit 3, as kptr doctor's cache line says
			h.kptr(t, call{args: []string{"fn", "render", pkg, "--sandbox=landlock"}}).exits(t, 3).
				says(t, "is not traversable by other users", "chmod o+x")
			// The cache and the run-state directory ($TMPDIR) reachable.
			for _, d := range []string{h.cache, h.tmp} {
				if err := os.Chmod(d, 0o711); err != nil {
					t.Fatal(err)
				}
			}
		}
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--sandbox=landlock"}}).exits(t, 0).rssBelow(t, 512<<20)
		h.sentinelsUnchanged(t)
		report := escapeReport(t, pkg)
		for k, v := range report {
			switch verb, _, _ := strings.Cut(k, " "); verb {
			case "read", "write", "connect", "kill":
				if v == "readable" || v == "written" || v == "connected" || v == "signalled" || strings.HasPrefix(v, "refused") {
					t.Errorf("%s: %s", k, v)
				}
			}
		}
		if report["unshare"] == "created" || report["nonewprivs"] != "1" || report["capeff"] != "0000000000000000" || report["uid"] == "0" {
			t.Errorf("privileges: %v", report)
		}
		if len(report) < len(reads)+len(targets)+3 {
			t.Errorf("the report is incomplete: %v", report)
		}
	})
}

// escapeReport reads the escape-report ConfigMap the function added to pkg.
func escapeReport(t *testing.T, pkg string) map[string]string {
	t.Helper()
	nodes, err := kio.LocalPackageReader{PackagePath: pkg}.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.GetKind() == "ConfigMap" && n.GetName() == "escape-report" {
			return n.GetDataMap()
		}
	}
	var all []string
	for _, n := range nodes {
		s, _ := n.String()
		all = append(all, s)
	}
	t.Fatalf("no escape-report in the rendered package:\n%s", strings.Join(all, "---\n"))
	return nil
}
