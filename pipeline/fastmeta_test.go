package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// dumpNode prints every field of a node tree that the YAML encoder or a
// later filter can see, so two trees compare exactly.
func dumpNode(b *strings.Builder, n *yaml.Node, depth int) {
	if n == nil {
		fmt.Fprintf(b, "%s<nil>\n", strings.Repeat(" ", depth))
		return
	}
	fmt.Fprintf(b, "%s%d %q %d %q a=%q c=%q/%q/%q\n", strings.Repeat(" ", depth), n.Kind, n.Tag, n.Style, n.Value,
		n.Anchor, n.HeadComment, n.LineComment, n.FootComment)
	for _, c := range n.Content {
		dumpNode(b, c, depth+1)
	}
}

func dump(rn *yaml.RNode) string {
	var b strings.Builder
	dumpNode(&b, rn.Document(), 0)
	return b.String()
}

// The in-place annotation edits must leave exactly the tree kyaml's
// filters leave, on every shape: the fast path and each fallback.
func TestAnnotationEditsMatchKyaml(t *testing.T) {
	shapes := map[string]string{
		"plain":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    x: \"1\"\n    k: \"old\"\n",
		"no-annotations":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"empty-annotation": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: {}\n",
		"null-annotations": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n",
		"no-metadata":      "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: b\n",
		"empty-metadata":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
		"only-annotation":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    k: v\n",
		"styled-value":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    k: |\n      multi\n    j: plain # comment\n",
		"commented":        "# head\napiVersion: v1\nkind: X\nmetadata: # m\n  annotations: # a\n    k: 'v' # c\n",
		"scalar-metadata":  "apiVersion: v1\nkind: X\nmetadata: 3\n",
		"list-annotations": "apiVersion: v1\nkind: X\nmetadata:\n  annotations:\n  - a\n",
		"dup-key":          "apiVersion: v1\nkind: X\nmetadata:\n  annotations:\n    k: a\n",
	}
	shapes["path-index"] = "apiVersion: v1\nkind: X\nmetadata:\n  annotations:\n    config.kubernetes.io/path: a.yaml\n    internal.config.kubernetes.io/index: '2'\n"
	shapes["legacy-only"] = "apiVersion: v1\nkind: X\nmetadata:\n  annotations:\n    config.kubernetes.io/index: '3'\n    internal.config.kubernetes.io/path: b.yaml\n    config.kubernetes.io/path: ~\n"
	values := []string{"v", "", "0", "true", "multi\nline", "it's", "\xff\xfe"}
	type op struct {
		name       string
		fast, slow func(*yaml.RNode) error
	}
	var ops []op
	for _, key := range []string{"k", "new", "x"} {
		for _, v := range values {
			ops = append(ops, op{fmt.Sprintf("set %s=%q", key, v),
				func(rn *yaml.RNode) error { return setAnnotation(rn, key, v) },
				func(rn *yaml.RNode) error { return rn.PipeE(yaml.SetAnnotation(key, v)) }})
		}
		ops = append(ops, op{"clear " + key,
			func(rn *yaml.RNode) error { return clearAnnotation(rn, key) },
			func(rn *yaml.RNode) error { return rn.PipeE(yaml.ClearAnnotation(key)) }})
	}
	ops = append(ops, op{"clear-empty", clearEmptyAnnotations, yaml.ClearEmptyAnnotations},
		op{"set two",
			func(rn *yaml.RNode) error { return setAnnotations(rn, "new", "1", "k", "\xff") },
			func(rn *yaml.RNode) error {
				if err := rn.PipeE(yaml.SetAnnotation("new", "1")); err != nil {
					return err
				}
				return rn.PipeE(yaml.SetAnnotation("k", "\xff"))
			}},
		op{"clear two",
			func(rn *yaml.RNode) error { return clearAnnotations(rn, "x", "k") },
			func(rn *yaml.RNode) error {
				if err := rn.PipeE(yaml.ClearAnnotation("x")); err != nil {
					return err
				}
				return rn.PipeE(yaml.ClearAnnotation("k"))
			}})
	for name, src := range shapes {
		for _, o := range ops {
			// the same op twice, then clear-empty: sequences as runFilter makes them
			fast, slow := yaml.MustParse(src), yaml.MustParse(src)
			if name == "dup-key" {
				// a duplicate key cannot come from a parser; build it
				for _, rn := range []*yaml.RNode{fast, slow} {
					ann := rn.YNode().Content[5].Content[1]
					ann.Content = append(ann.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "k"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "b"})
				}
			}
			for i := 0; i < 2; i++ {
				ef, es := o.fast(fast), o.slow(slow)
				if (ef == nil) != (es == nil) {
					t.Fatalf("%s / %s: error %v, kyaml %v", name, o.name, ef, es)
				}
			}
			ef, es := clearEmptyAnnotations(fast), yaml.ClearEmptyAnnotations(slow)
			if (ef == nil) != (es == nil) {
				t.Fatalf("%s / %s then clear-empty: error %v, kyaml %v", name, o.name, ef, es)
			}
			if df, ds := dump(fast), dump(slow); df != ds {
				t.Errorf("%s / %s differs from kyaml:\n--- kyaml\n%s--- fast\n%s", name, o.name, ds, df)
			}
			fp, fi, ef2 := fileAnnotations(fast)
			sp, si, es2 := kioutil.GetFileAnnotations(slow)
			if fp != sp || fi != si || (ef2 == nil) != (es2 == nil) {
				t.Errorf("%s / %s: file annotations %q %q %v, kioutil %q %q %v", name, o.name, fp, fi, ef2, sp, si, es2)
			}
		}
	}
}
