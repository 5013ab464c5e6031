package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

const renderedStream = `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
  annotations:
    config.kubernetes.io/local-config: "true"
    config.kubernetes.io/path: 'Kptfile'
    config.kubernetes.io/index: '0'
pipeline:
  mutators:
  - image: set-labels:v0.2.0
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: fn-config
  annotations:
    config.kubernetes.io/local-config: "true"
    config.kubernetes.io/path: 'fn-config.yaml'
data:
  app: echo
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo # the server
  namespace: demo
  labels:
    app: echo
  annotations:
    config.kubernetes.io/path: 'deploy.yaml'
    config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/path: 'deploy.yaml'
    internal.config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/seqindent: 'compact'
    internal.config.kubernetes.io/package-path: '/tmp/x'
spec:
  replicas: 1
---
apiVersion: v1
kind: Service
metadata:
  name: echo
  annotations:
    config.kubernetes.io/path: 'svc.yaml'
    team: web
spec:
  ports:
  - port: 80
`

func parseStream(t *testing.T, s string) []*yaml.RNode {
	t.Helper()
	nodes, err := (&kio.ByteReader{Reader: strings.NewReader(s), OmitReaderAnnotations: true, PreserveSeqIndent: false}).Read()
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func writeStream(t *testing.T, nodes []*yaml.RNode) string {
	t.Helper()
	var b bytes.Buffer
	if err := (kio.ByteWriter{Writer: &b}).Write(nodes); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestFinishManifestsDropsLocalConfigAndBookkeeping(t *testing.T) {
	nodes, err := finishManifests(parseStream(t, renderedStream), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo # the server
  namespace: demo
  labels:
    app: echo
spec:
  replicas: 1
---
apiVersion: v1
kind: Service
metadata:
  name: echo
  annotations:
    team: web
spec:
  ports:
  - port: 80
`
	if got := writeStream(t, nodes); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestFinishManifestsKptfileWithoutLocalConfigAnnotation(t *testing.T) {
	nodes, err := finishManifests(parseStream(t, "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: x\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].GetKind() != "Namespace" {
		t.Fatalf("got %s", writeStream(t, nodes))
	}
}

func TestFinishManifestsAnnotatesAppMetadata(t *testing.T) {
	md := appMetadata(envMap(map[string]string{
		"ARGOCD_APP_NAME":                   "argocd_echo",
		"ARGOCD_APP_REVISION":               "0123abcd",
		"ARGOCD_APP_SOURCE_REPO_URL":        "https://user:s3cr3t@git.example.com/org/repo.git",
		"ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
		"ARGOCD_APP_SOURCE_PATH":            "apps/echo",
	}))
	nodes, err := finishManifests(parseStream(t, renderedStream), "kptr.dev", md)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("want 2 resources, got %d", len(nodes))
	}
	for _, n := range nodes {
		a := n.GetAnnotations()
		want := map[string]string{
			"kptr.dev/app-name":        "argocd_echo",
			"kptr.dev/revision":        "0123abcd",
			"kptr.dev/repo-url":        "https://REDACTED@git.example.com/org/repo.git",
			"kptr.dev/target-revision": "main",
			"kptr.dev/source-path":     "apps/echo",
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s: annotation %s = %q, want %q", n.GetName(), k, a[k], v)
			}
		}
		if strings.Contains(writeStream(t, []*yaml.RNode{n}), "s3cr3t") {
			t.Error("credential leaked into an annotation")
		}
	}
	// A numeric revision stays a string (Kubernetes annotations are strings).
	nodes, _ = finishManifests(parseStream(t, renderedStream), "kptr.dev", [][2]string{{"revision", "1234"}, {"app-name", "true"}})
	if out := writeStream(t, nodes); !strings.Contains(out, `kptr.dev/revision: "1234"`) && !strings.Contains(out, `kptr.dev/revision: '1234'`) {
		t.Errorf("numeric revision not quoted:\n%s", out)
	} else if !strings.Contains(out, `kptr.dev/app-name: "true"`) && !strings.Contains(out, `kptr.dev/app-name: 'true'`) {
		t.Errorf("boolean-looking value not quoted:\n%s", out)
	}
	// Without a domain nothing is added, even with metadata present.
	nodes, _ = finishManifests(parseStream(t, renderedStream), "", md)
	if strings.Contains(writeStream(t, nodes), "app-name") {
		t.Error("annotated without a domain")
	}
}

func TestRedactAndOneLine(t *testing.T) {
	in := "pull https://bob:hunter2@registry.example.com/v2/x: 401\nAuthorization: Bearer abc.def\n  token=zzz&x=1\n"
	got := oneLine(redact(in))
	for _, bad := range []string{"hunter2", "abc.def", "zzz", "\n"} {
		if strings.Contains(got, bad) {
			t.Errorf("%q still contains %q", got, bad)
		}
	}
	if !strings.Contains(got, "registry.example.com/v2/x: 401 | ") {
		t.Errorf("message mangled: %q", got)
	}
}

func TestDisplayPath(t *testing.T) {
	if got := displayPath("/tmp/_cmp_server/0d1f-uuid/apps/echo"); got != "apps/echo" {
		t.Errorf("got %q", got)
	}
	if got := displayPath("/srv/apps/echo"); got != "/srv/apps/echo" {
		t.Errorf("got %q", got)
	}
}

// runGenerateCmd runs `kptr generate` in dir through main's dispatcher.
func runGenerateCmd(t *testing.T, dir string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	var out, errb bytes.Buffer
	g := newGlobals(nil, &out, &errb, envMap(env))
	err := execIn(context.Background(), g, append([]string{"generate"}, args...)...)
	code = 0
	if err != nil {
		code = exitCodeOf(err)
		if !strings.Contains(err.Error(), errReported.Error()) {
			errb.WriteString("kptr generate: " + err.Error() + "\n")
		}
	}
	return code, out.String(), errb.String()
}

func TestGenerateWithoutKptfileFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"), 0o644)
	code, out, errs := runGenerateCmd(t, dir, map[string]string{"KPTR_CACHE_DIR": t.TempDir()})
	if code == 0 || out != "" {
		t.Fatalf("code %d stdout %q", code, out)
	}
	if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "no Kptfile") {
		t.Fatalf("stderr must be one clear line, got %q", errs)
	}
}

func TestGenerateRejectsBadParameterBeforeRendering(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runGenerateCmd(t, dir, map[string]string{"PARAM_ANNOTATION_DOMAIN": "Not Valid"})
	if code != exitUsage || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "annotation-domain") {
		t.Fatalf("code %d stdout %q stderr %q", code, out, errs)
	}
}
