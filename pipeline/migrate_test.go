package pipeline

import (
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// preprocessMigration and reconcileMigration give exactly kyaml's
// kio.PreprocessResourcesForInternalAnnotationMigration and
// kio.ReconcileInternalAnnotations results: the same function input, the
// same output nodes, the same errors, for functions that change nothing,
// move a resource by either spelling or both, drop one spelling, or add a
// resource of their own.
func TestMigrationMatchesKyaml(t *testing.T) {
	input := `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  annotations:
    config.kubernetes.io/index: '0'
    config.kubernetes.io/path: 'x.yaml'
    internal.config.kubernetes.io/index: '0'
    internal.config.kubernetes.io/path: 'x.yaml'
    internal.config.kubernetes.io/package-path: '/pkg'
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b # comment
  annotations:
    config.kubernetes.io/index: '1'
    config.kubernetes.io/path: 'x.yaml'
    internal.config.kubernetes.io/index: '1'
    internal.config.kubernetes.io/path: 'x.yaml'
`
	// as a package reader leaves resources (both spellings): kptr's usual
	// case; and with a resource carrying only the legacy path
	mixed := input + `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: legacy-only
  annotations:
    config.kubernetes.io/path: 'y.yaml'
`
	set := func(key, value string) func(*yaml.RNode) {
		return func(n *yaml.RNode) { _ = n.PipeE(yaml.SetAnnotation(key, value)) }
	}
	clear := func(key string) func(*yaml.RNode) {
		return func(n *yaml.RNode) { _ = n.PipeE(yaml.ClearAnnotation(key)) }
	}
	type migrationCase struct {
		name  string
		input string
		fn    func(nodes []*yaml.RNode) []*yaml.RNode
	}
	cases := []migrationCase{
		{"unchanged", input, func(n []*yaml.RNode) []*yaml.RNode { return n }},
		{"legacy path moved", input, func(n []*yaml.RNode) []*yaml.RNode {
			set("config.kubernetes.io/path", "moved.yaml")(n[0])
			return n
		}},
		{"internal index changed", input, func(n []*yaml.RNode) []*yaml.RNode {
			set("internal.config.kubernetes.io/index", "5")(n[1])
			return n
		}},
		{"both spellings moved", input, func(n []*yaml.RNode) []*yaml.RNode {
			set("config.kubernetes.io/path", "z.yaml")(n[0])
			set("internal.config.kubernetes.io/path", "z.yaml")(n[0])
			return n
		}},
		{"both moved apart", input, func(n []*yaml.RNode) []*yaml.RNode {
			set("config.kubernetes.io/path", "p.yaml")(n[0])
			set("internal.config.kubernetes.io/path", "q.yaml")(n[0])
			return n
		}},
		{"legacy spelling dropped", input, func(n []*yaml.RNode) []*yaml.RNode {
			clear("config.kubernetes.io/index")(n[0])
			return n
		}},
		{"new resource and a deletion", input, func(n []*yaml.RNode) []*yaml.RNode {
			return append(n[1:], yaml.MustParse("apiVersion: v1\nkind: Secret\nmetadata:\n  name: new\n"))
		}},
		{"no annotations anywhere", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bare\n", func(n []*yaml.RNode) []*yaml.RNode {
			set("config.kubernetes.io/path", "bare.yaml")(n[0])
			return n
		}},
		{"internal spelling only", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: i\n  annotations:\n    internal.config.kubernetes.io/path: 'i.yaml'\n", func(n []*yaml.RNode) []*yaml.RNode { return n }},
		{"mismatched input", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n  annotations:\n    internal.config.kubernetes.io/path: 'a.yaml'\n    config.kubernetes.io/path: 'b.yaml'\n", func(n []*yaml.RNode) []*yaml.RNode { return n }},
	}
	for _, tc := range cases[:7] {
		cases = append(cases, migrationCase{tc.name + " (mixed input)", mixed, tc.fn})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := func(pre func([]*yaml.RNode) (map[string]map[string]string, error), rec func([]*yaml.RNode, map[string]map[string]string) error) (in, out string, err error) {
				nodes, rerr := (&kio.ByteReader{Reader: strings.NewReader(tc.input), OmitReaderAnnotations: true}).Read()
				if rerr != nil {
					t.Fatal(rerr)
				}
				m, err := pre(nodes)
				if err != nil {
					return "", "", err
				}
				in = encodeAll(t, nodes)
				copies := make([]*yaml.RNode, len(nodes))
				for i, n := range nodes {
					copies[i] = n.Copy() // a function's output is new nodes
				}
				output := tc.fn(copies)
				err = rec(output, m)
				return in, encodeAll(t, output), err
			}
			wantIn, wantOut, wantErr := run(kio.PreprocessResourcesForInternalAnnotationMigration, kio.ReconcileInternalAnnotations)
			gotIn, gotOut, gotErr := run(preprocessMigration, reconcileMigration)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Fatalf("error %v, kyaml's %v", gotErr, wantErr)
			}
			if gotIn != wantIn {
				t.Errorf("function input differs:\n%s\nkyaml's:\n%s", gotIn, wantIn)
			}
			if gotOut != wantOut {
				t.Errorf("output differs:\n%s\nkyaml's:\n%s", gotOut, wantOut)
			}
		})
	}
}

func encodeAll(t *testing.T, nodes []*yaml.RNode) string {
	t.Helper()
	var b strings.Builder
	for _, n := range nodes {
		s, err := n.String()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "---\n")
	}
	return b.String()
}
