package dockerface

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kptPipeline is a package whose Kptfile runs two mutators and a validator.
func kptPackage(t testing.TB, s *session, dir string) {
	t.Helper()
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\n  annotations:\n    config.kubernetes.io/local-config: \"true\"\npipeline:\n  mutators:\n  - image: " +
			s.images["set-labels"] + "\n    configMap:\n      tier: web\n  - image: " + s.images["set-annotations"] + "\n    configMap:\n      owner: platform\n  validators:\n  - image: " +
			s.images["validate-resources"] + "\n    configMap:\n      require-labels: tier\n",
		"deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web # the web tier\nspec:\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n",
		"configmap.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n",
	})
}

// kpt runs the kpt binary with the session's PATH (kptr as docker and
// podman, no other container CLI), as id.
func (s *session) kpt(t testing.TB, kpt string, id identity, env []string, args ...string) (string, string, error) {
	t.Helper()
	return s.run(t, id, env, append([]string{kpt}, args...)...)
}

// kpt's fn render and fn eval --image, with KPT_FN_RUNTIME=docker and
// podman, run their functions through kptr's docker face and render what
// kptr fn render renders natively.
func TestKptThroughTheDockerFace(t *testing.T) {
	kpt, err := exec.LookPath("kpt")
	if err != nil {
		t.Skip("no kpt on PATH: kpt's fn render and fn eval through kptr's docker face are not tested (install kpt v1.0.0-beta.56 or later to run this)")
	}
	if real, err := filepath.EvalSymlinks(kpt); err == nil && filepath.Base(real) == "kptr" {
		t.Skipf("the kpt on PATH (%s) is kptr itself, not kpt: nothing to test", kpt)
	}
	s := newSession(t)
	pkg := filepath.Join(s.base, "pkg")
	kptPackage(t, s, pkg)
	want, errs, err := s.kpt(t, filepath.Join(s.bin, "kptr"), self, nil, "fn", "render", pkg, "-o", "unwrap")
	if err != nil || !strings.Contains(want, "tier: web") || !strings.Contains(want, "owner: platform") {
		t.Fatalf("kptr fn render: %v\n%s\n%s", err, want, errs)
	}
	for _, id := range identities() {
		for _, rt := range []string{"docker", "podman"} {
			t.Run(id.name+"/"+rt, func(t *testing.T) {
				env := []string{"KPT_FN_RUNTIME=" + rt}
				got, errs, err := s.kpt(t, kpt, id, env, "fn", "render", pkg, "-o", "unwrap")
				if err != nil {
					t.Fatalf("kpt fn render: %v\n%s", err, errs)
				}
				if got != want {
					t.Errorf("kpt fn render through kptr as %s differs from kptr fn render:\n--- kpt\n%s\n--- kptr\n%s\nstderr: %s", rt, got, want, errs)
				}
				out, errs, err := s.kpt(t, kpt, id, env, "fn", "eval", pkg, "-o", "unwrap", "--image", s.images["set-labels"], "--", "evaluated=yes")
				if err != nil || !strings.Contains(out, "evaluated: \"yes\"") && !strings.Contains(out, "evaluated: yes") {
					t.Errorf("kpt fn eval --image: %v\n%s\n%s", err, out, errs)
				}
			})
		}
	}
}
