package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kptr-dev/kptr/pipeline"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
)

// Render a package in memory, as `kptr generate` does: nothing is written,
// the resources come back with paths relative to the package.
func ExampleRender() {
	dir, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "Kptfile"), []byte(`apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
    - exec: cat # any KRM function; images need Options.Resolver and Runner
`), 0o644)
	_ = os.MkdirAll(filepath.Join(dir, "db"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "db", "Kptfile"), []byte("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: db\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "db", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"), 0o644)

	out, err := pipeline.Render(context.Background(), dir, pipeline.Options{
		AllowExec: true,
		Output:    pipeline.OutputMemory,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range out.Resources {
		path, _, _ := kioutil.GetFileAnnotations(r)
		fmt.Println(r.GetKind(), r.GetName(), path)
	}
	fmt.Println(out.Functions, "function(s) in", out.Packages, "package(s)")
	// Output:
	// Kptfile app Kptfile
	// Kptfile db db/Kptfile
	// ConfigMap settings db/cm.yaml
	// 1 function(s) in 2 package(s)
}
