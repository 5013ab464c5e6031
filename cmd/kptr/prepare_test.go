package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
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
		err := execIn(context.Background(), g, "fn", "render", dir, "-o", "stdout")
		g.cleanup() // as run does when the command ends: the sandbox is closed
		if err != nil {
			t.Fatalf("render: %v\n%s", err, errb.String())
		}
		noRunState(t)
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
	if n != 3 {
		t.Errorf("cached images: %d runs used a prepared sandbox, want 3 (the first prepared while the package was read, then each one ahead)", n)
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
	// generate memoises: preparing waits until a run is not replayed (the
	// first one runs cold), then goes one ahead
	if n := strings.Count(errs, preparedLog); n != 2 {
		t.Errorf("generate: %d runs used a prepared sandbox, want 2", n)
	}
	if !strings.Contains(out, "c: \"3\"") {
		t.Errorf("generate output:\n%s", out)
	}
}

// noRunState fails t if this process left run state (a run's or a prepared
// sandbox's entries) in the run-state directory; the owner's lock file of a
// Sandbox another test did not close may stay.
func noRunState(t *testing.T) {
	t.Helper()
	des, err := os.ReadDir(runtime.DefaultStateDir())
	if err != nil {
		t.Fatal(err)
	}
	mine := fmt.Sprintf("kptr-%d-", os.Getpid())
	for _, de := range des {
		if strings.HasPrefix(de.Name(), mine) && !strings.HasSuffix(de.Name(), ".lock") {
			t.Errorf("run state left behind: %s", de.Name())
		}
	}
}

// A render that fails before any function runs (a resource that cannot be
// read) with every image cached: the sandboxes prepared while the package
// was being read are never used, the render fails exactly as without
// preparing, and nothing of them is left once the command has ended.
func TestUnusedPreparedSandboxLeavesNothing(t *testing.T) {
	f := fixture(t)
	kf := "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + f.labels +
		"\n    configMap: {a: \"1\"}\n  - image: " + f.annots + "\n    configMap: {b: \"2\"}\n"
	env := genEnv(t, f, map[string]string{"KPTR_INSECURE_REGISTRY": f.reg.Addr})
	render := func(files map[string]string, extra ...string) (string, error) {
		t.Helper()
		dir := t.TempDir()
		writeTree(t, dir, files)
		var errb bytes.Buffer
		g := newGlobals(nil, &bytes.Buffer{}, &errb, envMap(env))
		err := execIn(context.Background(), g, append([]string{"fn", "render", dir, "-o", "stdout"}, extra...)...)
		g.cleanup()
		return strings.ReplaceAll(errb.String(), dir, "DIR"), err
	}
	good := map[string]string{"Kptfile": kf, "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"}
	if out, err := render(good); err != nil { // pulls both images
		t.Fatalf("render: %v\n%s", err, out)
	}
	bad := map[string]string{"Kptfile": kf, "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n"}
	out, err := render(bad)
	if err == nil {
		t.Fatalf("a package with an unreadable resource rendered:\n%s", out)
	}
	noRunState(t)
	env["KPTR_PREPARE"] = "0"
	coldOut, coldErr := render(bad)
	if out != coldOut || exitCodeOf(err) != exitCodeOf(coldErr) || err.Error() != coldErr.Error() {
		t.Fatalf("prepared: exit %d %v\n%s\ncold: exit %d %v\n%s", exitCodeOf(err), err, out, exitCodeOf(coldErr), coldErr, coldOut)
	}
}
