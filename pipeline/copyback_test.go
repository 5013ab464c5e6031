package pipeline

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/comments"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/order"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// roundTrip is what a kyaml function returns for a resource it leaves
// alone: the resource printed and parsed again (an item, not a document).
func roundTrip(t *testing.T, rn *yaml.RNode) *yaml.RNode {
	t.Helper()
	var b bytes.Buffer
	if err := writeResourceList(&b, []*yaml.RNode{rn.Copy()}, nil); err != nil {
		t.Fatal(err)
	}
	out, err := (&kio.ByteReader{Reader: &b}).Read()
	if err != nil || len(out) != 1 {
		t.Fatalf("round trip: %v", err)
	}
	return out[0]
}

// What a function may do to a resource, each a way for the comments and
// field order of its output to differ from its input's.
var outputVariants = map[string]func(*yaml.RNode){
	"unchanged": func(*yaml.RNode) {},
	"no-comments": func(rn *yaml.RNode) {
		var walk func(*yaml.Node)
		walk = func(n *yaml.Node) {
			n.HeadComment, n.LineComment, n.FootComment = "", "", ""
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(rn.YNode())
	},
	"label": func(rn *yaml.RNode) { _ = rn.PipeE(yaml.SetLabel("touched", "yes")) },
	"new-comment": func(rn *yaml.RNode) {
		if c := rn.YNode().Content; len(c) > 1 {
			c[len(c)-1].LineComment = "# added"
		}
	},
	"value-changed": func(rn *yaml.RNode) {
		var walk func(*yaml.Node) bool
		walk = func(n *yaml.Node) bool {
			if n.Kind == yaml.ScalarNode && n.Value != "" && n.Tag == "!!str" {
				n.Value += "-x"
				return true
			}
			for i, c := range n.Content {
				if n.Kind == yaml.MappingNode && i%2 == 0 {
					continue
				}
				if walk(c) {
					return true
				}
			}
			return false
		}
		walk(rn.YNode())
	},
	"list-item-added": func(rn *yaml.RNode) {
		var walk func(*yaml.Node) bool
		walk = func(n *yaml.Node) bool {
			if n.Kind == yaml.SequenceNode && len(n.Content) > 0 {
				n.Content = append(n.Content, yaml.CopyYNode(n.Content[0]))
				return true
			}
			for _, c := range n.Content {
				if walk(c) {
					return true
				}
			}
			return false
		}
		walk(rn.YNode())
	},
	"reordered": func(rn *yaml.RNode) {
		c := rn.YNode().Content
		if len(c) >= 4 {
			c[0], c[1], c[2], c[3] = c[2], c[3], c[0], c[1]
		}
	},
	"kind-changed": func(rn *yaml.RNode) {
		if m := mapField(rn.YNode(), "metadata"); m != nil {
			m.Kind, m.Tag, m.Value, m.Content = yaml.ScalarNode, "!!str", "gone", nil
		}
	},
	"folded": func(rn *yaml.RNode) {
		if c := rn.YNode().Content; len(c) > 1 && c[1].Kind == yaml.ScalarNode {
			c[1].Style = yaml.FoldedStyle
		}
	},
}

// copyBackFast leaves exactly the tree kyaml's CopyComments + SyncOrder
// leave, wherever it claims a case; and it claims most comment-carrying
// cases a function leaves alone or only adds to.
func TestCopyBackFastMatchesKyaml(t *testing.T) {
	claimed, total, withComments := 0, 0, 0
	for name, nodes := range corpusPackages(t) {
		for i, rn := range nodes {
			hasComments := !noComments(rn.YNode()) || !noDocComments(rn)
			if hasComments {
				withComments++
			}
			for vname, v := range outputVariants {
				out := roundTrip(t, rn)
				v(out)
				fromA, toA := rn.Copy(), out.Copy()
				fromB, toB := rn.Copy(), out.Copy()
				errA := comments.CopyComments(fromA, toA)
				if errA == nil {
					errA = order.SyncOrder(fromA, toA)
				}
				total++
				if !copyBackFast(fromB, toB) {
					if d1, d2 := dump(toB), dump(out); d1 != d2 {
						t.Fatalf("%s[%d]/%s: declined but changed the output", name, i, vname)
					}
					continue
				}
				claimed++
				if errA != nil {
					t.Fatalf("%s[%d]/%s: claimed a case kyaml fails: %v", name, i, vname, errA)
				}
				if da, db := dump(toA), dump(toB); da != db {
					t.Fatalf("%s[%d]/%s differs from kyaml:\n--- kyaml\n%s--- fast\n%s", name, i, vname, da, db)
				}
				if d1, d2 := dump(fromB), dump(rn); d1 != d2 {
					t.Fatalf("%s[%d]/%s: changed its source", name, i, vname)
				}
			}
		}
	}
	t.Logf("%d of %d cases claimed; %d resources with comments", claimed, total, withComments)
	if withComments < 100 || claimed < total/3 {
		t.Fatalf("too little coverage: %d resources with comments, %d of %d claimed", withComments, claimed, total)
	}
}

// The cases copyBackFast must decline.
func TestCopyBackFastDeclines(t *testing.T) {
	from := yaml.MustParse("apiVersion: v1\nkind: X\nmetadata:\n  name: a # n\nspec:\n  list:\n  - a # in a list\n  s: |\n    x\n")
	for name, src := range map[string]string{
		"value-to-null":  "apiVersion: v1\nkind: X\nmetadata:\n  name: a\nspec:\n  list:\n  - b\n  s: null\n",
		"schema-comment": "apiVersion: v1\nkind: X\nmetadata:\n  name: a # {\"type\": \"integer\"}\nspec:\n  list:\n  - a\n  s: |\n    x\n",
		"kind-changed":   "apiVersion: v1\nkind: X\nmetadata: a\nspec:\n  list:\n  - a\n  s: |\n    x\n",
		"out-of-order":   "kind: X\napiVersion: v1\nmetadata:\n  name: a\nspec:\n  list:\n  - a\n  s: |\n    x\n",
		"folded":         "apiVersion: v1\nkind: X\nmetadata:\n  name: a\nspec:\n  list:\n  - a\n  s: >\n    x\n",
	} {
		to := yaml.MustParse(src)
		if copyBackFast(from.Copy(), to) {
			t.Errorf("%s: claimed", name)
		}
	}
	// and one it must take: comments on mapping fields, and on the document
	from = yaml.MustParse("# license\n\napiVersion: v1\nkind: X\nmetadata:\n  name: a # n\nspec:\n  list:\n  - a\n  s: |\n    x\n")
	to := yaml.MustParse("apiVersion: v1\nkind: X\nmetadata:\n  name: a\n  labels:\n    new: x\nspec:\n  list:\n  - a # its own\n  s: |\n    x\n")
	to = yaml.NewRNode(to.YNode()) // an item, as functions return them
	if !copyBackFast(from.Copy(), to) {
		t.Fatal("declined a plain case")
	}
	if s := to.MustString(); !strings.Contains(s, "name: a # n") || !strings.Contains(s, "# license") || !strings.Contains(s, "# its own") {
		t.Fatalf("comments not copied:\n%s", s)
	}
}
