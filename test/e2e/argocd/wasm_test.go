package argocd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// Under containerd's RuntimeDefault seccomp profile, as the sidecar (uid
// 999, no capabilities, no_new_privs), with --sandbox=namespace so that no
// tier for container images can run here (the profile refuses user
// namespaces): kptr doctor says the sandbox is unavailable and the wasm tier
// runs; a render of a kpt-format wasm image succeeds; and the wasm tier's
// own suite (runtime/wasm: the hostile modules - loop, sleep, memory growth,
// output flood, panic, host files, environment, network, a trap, an unknown
// import - each ending with its one-line error in bounded time) passes
// under the same confinement.
func TestWasmUnderRuntimeDefaultWithoutASandboxTier(t *testing.T) {
	kptr, base, helper := seccompSetup(t, "kptr-wasm-runtimedefault-")
	profile := filepath.Join(root, "test/e2e/argocd/testdata/runtime-default/containerd-docker-default.json")
	bin := filepath.Join(base, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"wasm-hostile", "set-namespace"} {
		for _, goos := range []string{"js", "wasip1"} {
			goCmd(t, []string{"GOOS=" + goos, "GOARCH=wasm", "CGO_ENABLED=0"}, "build", "-trimpath", "-o", filepath.Join(bin, f+"."+goos+".wasm"), "./test/fixtures/"+f)
		}
	}
	// the suite's modules of the js port before Go 1.21, prebuilt as the
	// Makefile's uid-999 suite does (the sidecar has no Go toolchain)
	for _, f := range fnimage.LegacyJSFixtures {
		mod := fnimage.WasmModuleWith(t, f, "js", fnimage.LegacyJSToolchain)
		b, err := os.ReadFile(mod)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, f+".js."+fnimage.LegacyJSToolchain+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	suite := filepath.Join(base, "wasm.test")
	goCmd(t, nil, "test", "-c", "-o", suite, "./runtime/wasm")
	chmodTree(t, base)
	home := ownedDir(t, filepath.Join(base, "home"))
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + home, "KPTR_FIXTURE_BIN_DIR=" + bin,
		"KPTR_CACHE_DIR=" + filepath.Join(home, "cache"), "KPTR_PROGRESS=none", "KPTR_SANDBOX=namespace"}

	out, errs, code := asSidecar(t, helper, profile, base, env, kptr, "doctor")
	if code != 3 || !strings.Contains(out, "sandbox: UNAVAILABLE") || !strings.Contains(out, "wasm tier") ||
		!strings.Contains(out, "[ok]        wazero") {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, out, errs)
	}

	reg := registry.Start(t)
	mod := filepath.Join(bin, "set-namespace.js.wasm")
	fnimage.PushIndex(t, fnimage.WasmIndex(t, mod, fnimage.PlatformJS), reg.Addr+"/kpt-fn-demo/set-namespace:v0.5.0")
	pkg := ownedDir(t, filepath.Join(base, "pkg"))
	for name, body := range map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n" +
			"    - image: " + reg.Addr + "/kpt-fn-demo/set-namespace:v0.5.0\n      configMap:\n        namespace: staging\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
	} {
		p := filepath.Join(pkg, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			os.Chown(p, pluginUID, pluginUID)
		}
	}
	// a container image cannot run here; the wasm image can
	if _, errs, code = asSidecar(t, helper, profile, pkg, env, kptr, "fn", "render", pkg, "--allow-alpha-wasm"); code != 0 {
		t.Fatalf("render: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(pkg, "cm.yaml")); !strings.Contains(string(b), "namespace: staging") {
		t.Fatalf("cm.yaml not rendered: %s", b)
	}

	out, errs, code = asSidecar(t, helper, profile, base, env, suite, "-test.count=1", "-test.v")
	if code != 0 || !strings.Contains(out, "--- PASS: TestHostile ") || !strings.Contains(out, "--- PASS: TestHostileModules ") {
		t.Fatalf("runtime/wasm suite under the profile: exit %d\n%s\n%s", code, tailOf(out), errs)
	}
}

func tailOf(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}
