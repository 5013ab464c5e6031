// Package argocd tests kptr's Argo CD sidecar image: the image `make image`
// builds without a daemon is imported into kptr's own cache and kptr's own
// sandbox runs the kptr inside it, as a pod would.
package argocd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	// libcontainer's container init (cgo): this test binary is the init of
	// the sandboxes it starts.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/runtime/namespace"
)

func TestMain(m *testing.M) {
	runtime.HandleInit()
	code := m.Run()
	if kptrDir != "" {
		os.RemoveAll(kptrDir)
	}
	os.Exit(code)
}

var root = func() string { d, _ := filepath.Abs("../../.."); return d }()

func goCmd(t *testing.T, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

var (
	kptrOnce sync.Once
	kptrPath string
	kptrDir  string
)

// staticKptr builds kptr once per test binary as `make image` does: static,
// cgo, with runc's seccomp support. The directory is readable by uid 999.
func staticKptr(t *testing.T) string {
	kptrOnce.Do(func() {
		d, err := os.MkdirTemp("", "kptr-e2e-argocd-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
		kptrDir = d
		p := filepath.Join(d, "kptr")
		goCmd(t, []string{"CGO_ENABLED=1"}, "build", "-tags", "netgo,osusergo", "-trimpath",
			"-ldflags", "-s -w -X main.version=e2e-image -linkmode external -extldflags -static", "-o", p, "./cmd/kptr")
		// its signature verifier beside it, as `make image` builds it
		goCmd(t, []string{"CGO_ENABLED=0"}, "build", "-trimpath", "-ldflags", "-s -w", "-o", staticVerifier(), "./cmd/kptr-sigverify")
		kptrPath = p
	})
	if kptrPath == "" {
		t.Fatal("building kptr failed earlier")
	}
	return kptrPath
}

// staticVerifier is where staticKptr puts kptr-sigverify.
func staticVerifier() string { return filepath.Join(kptrDir, "kptr-sigverify") }

func TestImageRunsKptrInKptrsOwnSandbox(t *testing.T) {
	tmp := t.TempDir()
	kptr := staticKptr(t)
	out := filepath.Join(tmp, "out")
	const ref = "ghcr.io/kptr-dev/kptr:e2e"
	goCmd(t, nil, "run", "./deploy/image", "--kptr", kptr, "--sigverify", staticVerifier(), "--out", out, "--tag", ref)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, src := range []string{filepath.Join(out, "kptr.tar"), filepath.Join(out, "oci")} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			c, err := cache.Open(t.TempDir(), cache.WithOffline(true))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Import(ctx, src); err != nil {
				t.Fatalf("import %s: %v", src, err)
			}
			b, err := c.Resolve(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			plugin, _ := os.ReadFile(filepath.Join(root, "plugin.yaml"))
			if got, err := os.ReadFile(filepath.Join(b.Rootfs, "home/argocd/cmp-server/config/plugin.yaml")); err != nil || !bytes.Equal(got, plugin) {
				t.Errorf("plugin.yaml in the image: %v", err)
			}

			sb, err := namespace.New(runtime.WithTimeout(time.Minute))
			if err != nil {
				t.Fatalf("sandbox: %v", err)
			}
			run := func(args ...string) runtime.Result {
				bb := b
				bb.Config.Cmd = args
				res, err := sb.Run(ctx, bb, runtime.Invocation{Stdin: strings.NewReader("")})
				if err != nil {
					t.Fatalf("kptr %v in the image: %v", args, err)
				}
				return res
			}
			res := run("version")
			if res.ExitCode != 0 || !strings.HasPrefix(string(res.Stdout), "kptr e2e-image ") {
				t.Errorf("kptr version: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
			}
			res = run("doctor")
			report := string(res.Stdout) + string(res.Stderr)
			t.Logf("kptr doctor in the image (exit %d):\n%s", res.ExitCode, report)
			// Inside kptr's own sandbox the outer seccomp filter refuses
			// namespaces, so the image's kptr finds no namespace tier and
			// takes the landlock tier, whose probe applies the image kptr's
			// own filter in a child: every build filters, this one too.
			for _, line := range []string{"[failed]    userns    cannot create a user namespace: operation not permitted",
				"[ok]        confine   no_new_privs, Landlock and the seccomp filter applied in a child",
				"sandbox: usable as"} {
				if !strings.Contains(report, line) {
					t.Errorf("doctor report lacks %q", line)
				}
			}
			if res.ExitCode != 0 && res.ExitCode != 3 {
				t.Errorf("doctor exit code %d (want 0, or 3 for a sandbox that cannot nest)", res.ExitCode)
			}
		})
	}
}
