package pipeline

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// recordingRunner echoes stdin (a function that changes nothing) and keeps
// the bundles it was asked to run.
type recordingRunner struct{ bundles []bundle.Bundle }

func (r *recordingRunner) Run(_ context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	r.bundles = append(r.bundles, b)
	in, err := io.ReadAll(inv.Stdin)
	return runtime.Result{Stdout: in}, err
}

// Under AllowWasm an exec function naming a .wasm file runs through
// WasmRunner with the module's absolute path, as kpt runs it; without it,
// through ExecRunner as any exec function.
func TestExecWasmRunsThroughTheWasmRunner(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: ./fn.wasm\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		"fn.wasm": "\x00asm\x01\x00\x00\x00",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, allow := range []bool{true, false} {
		wasmR, execR := &recordingRunner{}, &recordingRunner{}
		var stderr strings.Builder
		_, err := Render(context.Background(), dir, Options{AllowExec: true, AllowWasm: allow, WasmRunner: wasmR, ExecRunner: execR,
			Output: OutputMemory, Stderr: &stderr})
		if err != nil {
			t.Fatalf("allow %v: %v\n%s", allow, err, stderr.String())
		}
		if allow {
			if len(wasmR.bundles) != 1 || len(execR.bundles) != 0 || wasmR.bundles[0].Wasm != filepath.Join(dir, "fn.wasm") {
				t.Fatalf("wasm runs %+v, exec runs %+v", wasmR.bundles, execR.bundles)
			}
			if !strings.Contains(stderr.String(), `[RUNNING] WASM "./fn.wasm"`) {
				t.Fatalf("transcript: %s", stderr.String())
			}
			continue
		}
		if len(wasmR.bundles) != 0 || len(execR.bundles) != 1 || execR.bundles[0].Wasm != "" {
			t.Fatalf("without the flag: wasm runs %+v, exec runs %+v", wasmR.bundles, execR.bundles)
		}
	}
}

// Under AllowWasm kptr's transcript labels WASM only what runs as wasm, kpt's
// (KptTranscript) every function, as kpt does (issue 32: container images
// were labelled WASM).
func TestWasmLabelOnlyOnWasm(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n    - exec: ./fn.wasm\n    - exec: ./plain\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		"fn.wasm": "\x00asm\x01\x00\x00\x00",
	})
	t.Chdir(dir)
	for _, kpt := range []bool{false, true} {
		var stderr strings.Builder
		_, err := Render(context.Background(), dir, Options{AllowExec: true, AllowWasm: true, WasmRunner: &recordingRunner{}, ExecRunner: &recordingRunner{},
			Output: OutputMemory, Stderr: &stderr, KptTranscript: kpt})
		if err != nil {
			t.Fatalf("kpt %v: %v\n%s", kpt, err, stderr.String())
		}
		got := stderr.String()
		if !strings.Contains(got, `[RUNNING] WASM "./fn.wasm"`) || strings.Contains(got, `[RUNNING] WASM "./plain"`) != kpt {
			t.Errorf("kpt transcript %v:\n%s", kpt, got)
		}
	}
}
