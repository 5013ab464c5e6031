package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

const preparedLog = "sandbox: using the prepared sandbox"

// kptr fn render and kptr generate prepare the next function's sandbox
// while the current one runs once its image is cached, through every
// wrapper (the lazy cache/sandbox, generate's allow-list and policy), with
// the same output as cold starts.
func TestNextSandboxPrepared(t *testing.T) {
	f := fixture(t)
	kf := `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
  annotations:
    config.kubernetes.io/local-config: "true"
pipeline:
  mutators:
  - image: ` + f.labels + `
    configMap: {a: "1"}
  - image: ` + f.annots + `
    configMap: {b: "2"}
  - image: ` + f.labels + `
    configMap: {c: "3"}
`
	files := map[string]string{"Kptfile": kf, "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n"}
	env := genEnv(t, f, map[string]string{"KPTR_LOG_LEVEL": "debug", "KPTR_INSECURE_REGISTRY": f.reg.Addr})
	render := func(extra map[string]string) (string, int) {
		t.Helper()
		dir := t.TempDir()
		writeTree(t, dir, files)
		e := map[string]string{}
		for k, v := range env {
			e[k] = v
		}
		for k, v := range extra {
			e[k] = v
		}
		var out, errb bytes.Buffer
		g := newGlobals(nil, &out, &errb, envMap(e))
		if err := execIn(context.Background(), g, "fn", "render", dir, "-o", "stdout"); err != nil {
			t.Fatalf("render: %v\n%s", err, errb.String())
		}
		return out.String(), strings.Count(errb.String(), preparedLog)
	}
	// First render pulls: the next image is not cached yet when the current
	// function runs, except the third (the same image as the first).
	first, _ := render(nil)
	for _, want := range []string{"a: \"1\"", "b: \"2\"", "c: \"3\""} {
		if !strings.Contains(first, want) {
			t.Fatalf("output lacks %s:\n%s", want, first)
		}
	}
	warm, n := render(nil)
	if n != 2 {
		t.Errorf("cached images: %d runs used a prepared sandbox, want 2 (the second and third function)", n)
	}
	cold, n := render(map[string]string{"KPTR_PREPARE": "0"})
	if n != 0 {
		t.Errorf("KPTR_PREPARE=0: %d prepared runs", n)
	}
	if warm != first || cold != first {
		t.Errorf("outputs differ:\nfirst\n%s\nprepared\n%s\ncold\n%s", first, warm, cold)
	}

	// generate (Argo CD): through the allow-list and the operator's policy.
	dir := t.TempDir()
	writeTree(t, dir, files)
	code, out, errs := generateIn(t, dir, env)
	if code != 0 {
		t.Fatalf("generate: exit %d: %s", code, errs)
	}
	if n := strings.Count(errs, preparedLog); n != 2 {
		t.Errorf("generate: %d runs used a prepared sandbox, want 2", n)
	}
	if !strings.Contains(out, "c: \"3\"") {
		t.Errorf("generate output:\n%s", out)
	}
}
