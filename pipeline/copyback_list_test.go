package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/comments"
	"sigs.k8s.io/kustomize/kyaml/order"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// listShapes are resources with comments inside lists, as setter packages
// carry them: on scalar items, on fields of items of merge-keyed lists
// (containers by name, ports by containerPort and protocol, env), of
// lists without a merge key (args, a custom resource's lists), nested,
// head comments above items, items naming their own apiVersion and kind.
var listShapes = map[string]string{
	"deployment": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app # kpt-set: ${name}
  finalizers:
  - a.example/f # f
spec:
  replicas: 3 # kpt-set: ${replicas}
  template:
    spec:
      containers:
      # the main one
      - name: app # kpt-set: ${name}
        image: nginx:1.25 # kpt-set: ${image}
        args:
        - --port=80 # kpt-set: --port=${port}
        - --v=2
        ports:
        - containerPort: 80 # kpt-set: ${port}
          name: http
        - containerPort: 443 # p
        env:
        - name: A
          value: "1" # kpt-set: ${a}
      - name: sidecar
        image: busybox # kpt-set: ${side}
        command: [sh, -c] # cmd
      volumes:
      - name: v # vol
        emptyDir: {}
`,
	"mixed-ports": `apiVersion: v1
kind: Service
metadata:
  name: svc
spec:
  ports:
  - port: 80 # kpt-set: ${port}
  - port: 81
    protocol: UDP # udp
`,
	"service": `apiVersion: v1
kind: Service
metadata:
  name: svc
spec:
  selector:
    app: app # sel
  ports:
  - port: 80 # kpt-set: ${port}
    targetPort: 8080 # kpt-set: ${target}
  - port: 81
    targetPort: 8081
`,
	"custom": `apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
spec:
  items:
  - name: a # first
    value: x # kpt-set: ${x}
  - name: b
    list:
    - p # kpt-set: ${p}
    - q
  - plain # plain item
  - [nested, list] # nested
  inner:
    apiVersion: apps/v1
    kind: Deployment
    spec:
      template:
        spec:
          containers:
          - name: c
            image: i # kpt-set: ${i}
`,
	"list-kind": `apiVersion: v1
kind: List
metadata:
  name: l
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: c # c
  data:
    k: v # kpt-set: ${v}
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: d
  spec:
    template:
      spec:
        containers:
        - name: x
          image: y # kpt-set: ${y}
`,
}

// listEdits are what functions do to such resources (each on the output).
var listEdits = map[string]func(*yaml.Node){
	"none":  func(*yaml.Node) {},
	"strip": strip,
	"no-comments": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) { c.HeadComment, c.LineComment, c.FootComment = "", "", "" })
	},
	"set-image": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.MappingNode {
				if v := mapField(c, "image"); v != nil {
					v.Value += ":2"
				}
			}
		})
	},
	"set-scalar-items": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.SequenceNode && len(c.Content) > 0 && c.Content[0].Kind == yaml.ScalarNode {
				c.Content[0].Value += "-x"
			}
		})
	},
	"reverse-lists": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.SequenceNode {
				for i, j := 0, len(c.Content)-1; i < j; i, j = i+1, j-1 {
					c.Content[i], c.Content[j] = c.Content[j], c.Content[i]
				}
			}
		})
	},
	"append-item": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.SequenceNode && len(c.Content) > 0 {
				it := yaml.CopyYNode(c.Content[0])
				visitNodes(it, func(x *yaml.Node) {
					if x.Kind == yaml.ScalarNode {
						x.Value += "-new"
					}
				})
				c.Content = append(c.Content, it)
			}
		})
	},
	"drop-first-item": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.SequenceNode && len(c.Content) > 1 {
				c.Content = c.Content[1:]
			}
		})
	},
	"add-protocol": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.MappingNode && (mapField(c, "containerPort") != nil || mapField(c, "port") != nil) && mapField(c, "protocol") == nil {
				c.Content = append(c.Content, yaml.NewScalarRNode("protocol").YNode(), yaml.NewScalarRNode("TCP").YNode())
			}
		})
	},
	"rename-first-container": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.MappingNode {
				if l := mapField(c, "containers"); l != nil && len(l.Content) > 0 {
					if v := mapField(l.Content[0], "name"); v != nil {
						v.Value = "renamed"
					}
				}
			}
		})
	},
	"list-to-scalar": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.MappingNode {
				if l := mapField(c, "args"); l != nil {
					l.Kind, l.Tag, l.Value, l.Content = yaml.ScalarNode, "!!str", "x", nil
				}
			}
		})
	},
	"map-to-scalar": func(n *yaml.Node) {
		if m := mapField(n, "metadata"); m != nil {
			m.Kind, m.Tag, m.Value, m.Content = yaml.ScalarNode, "!!str", "gone", nil
		}
	},
	"map-to-list": func(n *yaml.Node) {
		if m := mapField(n, "spec"); m != nil {
			m.Kind, m.Tag, m.Content = yaml.SequenceNode, "!!seq", []*yaml.Node{yaml.NewScalarRNode("x").YNode()}
		}
	},
	"item-to-scalar": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.SequenceNode && len(c.Content) > 0 && c.Content[0].Kind == yaml.MappingNode {
				c.Content[0] = yaml.NewScalarRNode("odd").YNode()
			}
		})
	},
	"item-field-kind": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.MappingNode {
				if v := mapField(c, "value"); v != nil && v.Kind == yaml.ScalarNode {
					v.Kind, v.Tag, v.Value, v.Content = yaml.MappingNode, "!!map", "", []*yaml.Node{yaml.NewScalarRNode("k").YNode(), yaml.NewScalarRNode("v").YNode()}
				}
			}
		})
	},
	"item-head-comment": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.SequenceNode && len(c.Content) > 0 && c.Content[0].Kind == yaml.MappingNode && len(c.Content[0].Content) > 0 {
				c.Content[0].Content[0].HeadComment = "# above the item"
			}
		})
	},
	"field-to-null": func(n *yaml.Node) {
		visitNodes(n, func(c *yaml.Node) {
			if c.Kind == yaml.MappingNode {
				if v := mapField(c, "image"); v != nil {
					v.Tag, v.Value = "!!null", "null"
				}
			}
		})
	},
}

// visitNodes calls fn on n and every node below it, parents first.
func visitNodes(n *yaml.Node, fn func(*yaml.Node)) {
	fn(n)
	for _, c := range n.Content {
		visitNodes(c, fn)
	}
}

// kyamlCopyBack is what kpt does: CopyComments, then SyncOrder.
func kyamlCopyBack(from, to *yaml.RNode) error {
	if err := comments.CopyComments(from, to); err != nil {
		return err
	}
	return order.SyncOrder(from, to)
}

// checkCopyBack holds copyBack, copyBackFast and copyBackCheck to kyaml
// for one pair: the same tree, the same error, the source untouched; a
// declined pair left as it was. It reports whether copyBackFast claimed it
// and whether kyaml succeeds.
func checkCopyBack(t *testing.T, name string, from, to *yaml.RNode) (claimed, ok bool) {
	t.Helper()
	fromA, toA := from.Copy(), to.Copy()
	errA := kyamlCopyBack(fromA, toA)
	fromB, toB := from.Copy(), to.Copy()
	errB := copyBack(fromB, toB)
	if fmt.Sprint(errA) != fmt.Sprint(errB) {
		t.Fatalf("%s: kyaml fails with %v, copyBack with %v", name, errA, errB)
	}
	if errA == nil && dump(toA) != dump(toB) {
		t.Fatalf("%s: differs from kyaml:\n--- from\n%s--- to\n%s--- kyaml\n%s--- copyBack\n%s", name, from.MustString(), to.MustString(), dump(toA), dump(toB))
	}
	if dump(fromB) != dump(from) {
		t.Fatalf("%s: changed its source", name)
	}
	if errA != nil && copyBackCheck(from.YNode(), to.YNode()) {
		t.Fatalf("%s: copyBackCheck claims a pair kyaml fails: %v", name, errA)
	}
	fromC, toC := from.Copy(), to.Copy()
	claimed = copyBackFast(fromC, toC)
	if !claimed && dump(toC) != dump(to) {
		t.Fatalf("%s: declined but changed the output", name)
	}
	if claimed && errA != nil {
		t.Fatalf("%s: claimed a pair kyaml fails: %v", name, errA)
	}
	return claimed, errA == nil
}

// Comments inside lists are copied back as kyaml copies them, by index,
// by merge key and by schema, and a field whose kind changes fails as
// kyaml fails it; copyBackFast takes the common shapes itself.
func TestCopyBackListsMatchKyaml(t *testing.T) {
	claimed, total := 0, 0
	for sname, src := range listShapes {
		from := yaml.MustParse(src)
		for ename, edit := range listEdits {
			to := roundTrip(t, from)
			edit(to.YNode())
			c, ok := checkCopyBack(t, sname+"/"+ename, from, to)
			if ok {
				total++
			}
			if c {
				claimed++
			} else if ok {
				t.Logf("declined %s/%s", sname, ename)
			}
		}
	}
	t.Logf("%d of %d pairs kyaml succeeds on claimed", claimed, total)
	if claimed < total/2 {
		t.Fatalf("too few pairs claimed: %d of %d", claimed, total)
	}
	// the setter shape itself is claimed: a changed image inside the
	// containers list, comments on list items and their fields
	from := yaml.MustParse(listShapes["deployment"])
	to := roundTrip(t, from)
	listEdits["strip"](to.YNode())
	listEdits["set-image"](to.YNode())
	listEdits["no-comments"](to.YNode())
	order := roundTrip(t, from)
	listEdits["set-image"](order.YNode())
	listEdits["no-comments"](order.YNode())
	if !copyBackFast(from.Copy(), order) {
		t.Fatal("declined the setter shape")
	}
	if s := order.MustString(); !strings.Contains(s, "image: nginx:1.25:2 # kpt-set: ${image}") || !strings.Contains(s, "- --port=80 # kpt-set: --port=${port}") ||
		!strings.Contains(s, "- containerPort: 80 # kpt-set: ${port}") {
		t.Fatalf("comments not copied:\n%s", s)
	}
}

// A field whose kind a function changes fails the function in kpt
// (kyaml's walker: wrong node kind) even when no comment is involved.
func TestCopyBackKindChangeFails(t *testing.T) {
	from := yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n")
	to := yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: [k, v]\n")
	errA := kyamlCopyBack(from.Copy(), to.Copy())
	if errA == nil {
		t.Fatal("kyaml accepts the kind change")
	}
	if err := copyBack(from.Copy(), to.Copy()); fmt.Sprint(err) != fmt.Sprint(errA) {
		t.Fatalf("copyBack: %v, kyaml: %v", err, errA)
	}
}

// FuzzCopyBack edits a list-shaped resource as the bytes say and holds
// copyBack to kyaml on the pair.
func FuzzCopyBack(f *testing.F) {
	names := sortedKeys(listShapes)
	edits := sortedKeys(listEdits)
	f.Add([]byte{0, 1, 2})
	f.Add([]byte{0, 3, 5, 7})
	f.Add([]byte{1, 4, 9})
	f.Add([]byte{2, 6, 11, 13})
	f.Add([]byte{3, 8, 10, 12, 14})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 || len(ops) > 8 {
			return
		}
		from := yaml.MustParse(listShapes[names[int(ops[0])%len(names)]])
		to := roundTrip(t, from)
		for _, op := range ops[1:] {
			if op >= 128 { // an edit on from: comments it gives
				visitNodes(from.YNode(), func(n *yaml.Node) {
					if n.Kind == yaml.ScalarNode && n.LineComment == "" && int(op)%7 == len(n.Value)%7 {
						n.LineComment = "# c" + n.Value
					}
				})
				continue
			}
			listEdits[edits[int(op)%len(edits)]](to.YNode())
		}
		checkCopyBack(t, fmt.Sprint(ops), from, to)
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] < keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	return keys
}
