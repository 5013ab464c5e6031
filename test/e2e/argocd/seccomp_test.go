package argocd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

const pluginUID = 999

// asSidecar runs argv as the sidecar container runs: uid/gid 999, no
// capabilities (bounding set included), no_new_privs, under the seccomp
// profile at profile (applied by seccompexec, as the node would).
func asSidecar(t *testing.T, seccompexec, profile, dir string, env []string, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	full := append([]string{seccompexec, profile}, argv...)
	if os.Geteuid() == 0 {
		full = append([]string{"setpriv", "--reuid", fmt.Sprint(pluginUID), "--regid", fmt.Sprint(pluginUID), "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}, full...)
	}
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	return runCmd(t, cmd)
}

// runCmd runs cmd and returns its output and exit code; a command that
// cannot start fails the test.
func runCmd(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return o.String(), e.String(), code
}

// seccompSetup builds the static kptr and the seccompexec helper, which
// applies a JSON profile as a runtime would, into a fresh directory every
// identity can read (removed when the test ends).
func seccompSetup(t *testing.T, prefix string) (kptr, base, helper string) {
	t.Helper()
	kptr = staticKptr(t)
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	helper = filepath.Join(base, "seccompexec")
	goCmd(t, []string{"CGO_ENABLED=1"}, "build", "-o", helper, "./test/e2e/argocd/seccompexec")
	return kptr, base, helper
}

func ownedDir(t *testing.T, p string) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		os.Chown(p, pluginUID, pluginUID)
	}
	return p
}

// The Localhost seccomp profile of deploy/variants/seccomp-localhost lets
// kptr's sandbox work in a sidecar confined like the pod (uid 999, no
// capabilities, no_new_privs): kptr doctor finds it usable and a real
// render runs a function image. A profile that also denies the namespace
// and mount calls (what RuntimeDefault refuses) breaks both, which shows the
// test would notice a profile that is too tight.
func TestLocalhostSeccompProfileAllowsTheSandbox(t *testing.T) {
	kptr, base, helper := seccompSetup(t, "kptr-seccomp-")

	profile := filepath.Join(root, "deploy/variants/seccomp-localhost/profiles/kptr-sandbox.json")
	tight := filepath.Join(base, "tight.json")
	var p map[string]any
	b, _ := os.ReadFile(profile)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	p["syscalls"] = append(p["syscalls"].([]any), map[string]any{
		"names": []string{"unshare", "setns", "mount", "pivot_root"}, "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
	})
	b, _ = json.Marshal(p)
	os.WriteFile(tight, b, 0o644)

	reg := registry.Start(t)
	img := reg.Addr + "/fn/set-labels:v1"
	fnimage.Push(t, fnimage.Build(t, "set-labels"), img)
	pkg := ownedDir(t, filepath.Join(base, "pkg"))
	os.WriteFile(filepath.Join(pkg, "Kptfile"), []byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\npipeline:\n  mutators:\n  - image: "+img+"\n    configMap:\n      team: web\n"), 0o644)
	os.WriteFile(filepath.Join(pkg, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"), 0o644)

	for _, tc := range []struct {
		profile string
		usable  bool
	}{{profile, true}, {tight, false}} {
		t.Run(filepath.Base(tc.profile), func(t *testing.T) {
			home := ownedDir(t, filepath.Join(base, filepath.Base(tc.profile)+"-home"))
			env := []string{
				"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home,
				"KPTR_CACHE_DIR=" + filepath.Join(home, "cache"),
				"KPTR_ALLOWED_IMAGES=" + reg.Addr + "/fn/*", "KPTR_PROGRESS=none",
				// The namespace tier: auto would fall back to the landlock
				// tier under the tight profile (runtimedefault_test.go).
				"KPTR_SANDBOX=namespace",
			}
			out, errs, code := asSidecar(t, helper, tc.profile, pkg, env, kptr, "doctor")
			report := out + errs
			t.Logf("kptr doctor under %s (exit %d):\n%s", filepath.Base(tc.profile), code, report)
			if usable := strings.Contains(report, "sandbox: usable") && code == 0; usable != tc.usable {
				t.Errorf("sandbox usable = %v, want %v", usable, tc.usable)
			}
			out, errs, code = asSidecar(t, helper, tc.profile, pkg, env, kptr, "generate")
			if tc.usable {
				if code != 0 || !strings.Contains(out, "team: web") {
					t.Errorf("generate under the profile: exit %d\nstdout %s\nstderr %s", code, out, errs)
				}
			} else if code == 0 || out != "" {
				t.Errorf("generate succeeded under a profile that denies namespaces: %s", out)
			}
		})
	}
}
