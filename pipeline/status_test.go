package pipeline

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The Rendered condition's message words a failure as kpt main writes it
// (issue 32 item 7): packages named relative to the working directory (an
// absolute one, outside it, then shortened to "." for the root), a file by
// its path under the root ("./bad.yaml"). kptr's own error line on stderr
// keeps naming the file relative to its package.
func TestStatusMessageNamesPackagesAsKpt(t *testing.T) {
	const fails = "pipeline:\n  mutators:\n    - image: one\n"
	const badYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  x: [\n"
	const yamlErr = ": MalformedYAMLError: yaml: line 5: did not find expected node content"
	cases := []struct {
		name  string
		files map[string]string
		// the message with the working directory at the root's parent,
		// at the root, and outside the package
		parent, root, outside string
	}{
		{
			name:    "root function fails",
			files:   map[string]string{"Kptfile": kptfile("p1", fails), "db/Kptfile": kptfile("db", "")},
			parent:  "pkg.render: pkg p1:\n\tpipeline.run: already handled error",
			root:    "pkg.render: pkg .:\n\tpipeline.run: already handled error",
			outside: "pkg.render: pkg .:\n\tpipeline.run: already handled error",
		},
		{
			name:    "subpackage function fails",
			files:   map[string]string{"Kptfile": kptfile("p1", ""), "db/Kptfile": kptfile("db", fails)},
			parent:  "pkg.render: pkg p1/db:\n\tpipeline.run: already handled error",
			root:    "pkg.render: pkg db:\n\tpipeline.run: already handled error",
			outside: "pkg.render: pkg ./db:\n\tpipeline.run: already handled error",
		},
		{
			name:    "bad file in the root",
			files:   map[string]string{"Kptfile": kptfile("p1", ""), "bad.yaml": badYAML},
			parent:  "pkg.render: pkg p1:\n\tpkg.readResources: ./bad.yaml" + yamlErr,
			root:    "pkg.render: pkg .:\n\tpkg.readResources: ./bad.yaml" + yamlErr,
			outside: "pkg.render: pkg .:\n\tpkg.readResources: ./bad.yaml" + yamlErr,
		},
		{
			name:    "bad file in a subpackage",
			files:   map[string]string{"Kptfile": kptfile("p1", ""), "db/Kptfile": kptfile("db", ""), "db/bad.yaml": badYAML},
			parent:  "pkg.render: pkg p1/db:\n\tpkg.readResources: ./db/bad.yaml" + yamlErr,
			root:    "pkg.render: pkg db:\n\tpkg.readResources: ./db/bad.yaml" + yamlErr,
			outside: "pkg.render: pkg ./db:\n\tpkg.readResources: ./db/bad.yaml" + yamlErr,
		},
	}
	for _, tc := range cases {
		for _, where := range []string{"parent", "root", "outside"} {
			t.Run(tc.name+"/cwd "+where, func(t *testing.T) {
				dir := filepath.Join(filepath.Dir(writeTree(t, tc.files)), "p1")
				if err := os.Rename(filepath.Join(filepath.Dir(dir), "pkg"), dir); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"parent": tc.parent, "root": tc.root, "outside": tc.outside}[where]
				t.Chdir(map[string]string{"parent": filepath.Dir(dir), "root": dir, "outside": t.TempDir()}[where])
				fake := &fakeResolver{images: map[string][]string{"ghcr.io/kptdev/krm-functions-catalog/one:latest": nil}}
				_, err := Render(context.Background(), dir, Options{Resolver: fake, Runner: failingRunner{}, Stderr: io.Discard})
				if err == nil {
					t.Fatal("render succeeded")
				}
				if got := renderedMessage(t, dir); got != want {
					t.Errorf("Rendered message\n%s\nwant\n%s", got, want)
				}
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("error %T", err)
				}
				if m := pe.Message(); strings.Contains(tc.name, "bad file") && m != "Error: bad.yaml"+yamlErr {
					t.Errorf("stderr line changed: %q", m)
				}
			})
		}
	}
}

// renderedMessage is the message of the root Kptfile's Rendered condition.
func renderedMessage(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, kptv1.KptFileName))
	if err != nil {
		t.Fatal(err)
	}
	kf := &kptv1.KptFile{}
	if err := yaml.Unmarshal(b, kf); err != nil {
		t.Fatal(err)
	}
	if kf.Status != nil {
		for _, c := range kf.Status.Conditions {
			if c.Type == kptv1.ConditionRendered {
				return c.Message
			}
		}
	}
	t.Fatalf("no Rendered condition in\n%s", b)
	return ""
}
