package pipeline

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"go/format"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// typeschemas.go is generated from kyaml's built-in Kubernetes schema by
// this test:
//
//	go test ./pipeline -run TestTypeSchemaTable -update-typeschemas
//
// Without the flag the test fails when the file differs from what kyaml's
// schema gives today (kyaml was upgraded, or the file was edited).
var updateTypeSchemas = flag.Bool("update-typeschemas", false, "rewrite typeschemas.go from kyaml's built-in schema")

// schemaTable is the table typeschemas.go holds, as the generator builds it.
type schemaTable struct {
	nodes []schemaNode // nodes[0] unused: index 0 means "no schema"
	roots []typeRoot
	ids   map[string]int32 // node identity → index
}

// kyamlTypes lists the resource types kyaml indexes its built-in schema
// by (openapi.SchemaForResourceType), with the definition each names, as
// kyaml's parser reads them from x-kubernetes-group-version-kind.
func kyamlTypes(t testing.TB) map[yaml.TypeMeta]string {
	root := openapi.Schema()
	out := map[yaml.TypeMeta]string{}
	for name, d := range root.Definitions {
		gvks, ok := d.Extensions["x-kubernetes-group-version-kind"].([]any)
		if !ok {
			continue
		}
		for _, g := range gvks {
			m, ok := g.(map[string]any)
			if !ok {
				continue
			}
			v, _ := m["version"].(string)
			k, _ := m["kind"].(string)
			if grp, _ := m["group"].(string); grp != "" {
				v = grp + "/" + v
			}
			tm := yaml.TypeMeta{APIVersion: v, Kind: k}
			if prev, dup := out[tm]; dup && prev != name {
				// kyaml's index would then depend on map order
				t.Fatalf("type %s %s is named by two definitions, %s and %s", v, k, prev, name)
			}
			out[tm] = name
		}
	}
	return out
}

// buildSchemaTable walks kyaml's schema of every type, through the same
// calls the copy-back used to make (Field, Elements, PatchStrategyAndKey).
// A node reached through a $ref is the referenced definition (kyaml's
// Field and Elements replace the schema by it, extensions included), so it
// is shared; any other node is its parent's field, map values or items.
func buildSchemaTable(t testing.TB) *schemaTable {
	tb := &schemaTable{nodes: []schemaNode{{}}, ids: map[string]int32{}}
	var add func(id string, rs *openapi.ResourceSchema) int32
	// child is the node of a field, map value or item schema s of parent
	// (its identity: the last $ref kyaml follows, else the path).
	child := func(parent, step, ref string, rs *openapi.ResourceSchema) int32 {
		if ref != "" {
			return add(ref, rs)
		}
		return add(parent+step, rs)
	}
	add = func(id string, rs *openapi.ResourceSchema) int32 {
		if rs == nil || rs.Schema == nil {
			return 0
		}
		if i, ok := tb.ids[id]; ok {
			return i
		}
		i := int32(len(tb.nodes))
		tb.ids[id] = i
		tb.nodes = append(tb.nodes, schemaNode{})
		var n schemaNode
		if ps, _ := rs.PatchStrategyAndKey(); ps != "" {
			for _, p := range strings.Split(ps, ",") {
				n.merge = n.merge || p == "merge"
			}
			_, n.keys = rs.PatchStrategyAndKeyList()
		}
		names := make([]string, 0, len(rs.Schema.Properties))
		for k := range rs.Schema.Properties {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			p := rs.Schema.Properties[k]
			n.props = append(n.props, typeProp{k, child(id, "."+k, lastRef(p.Ref.String()), rs.Field(k))})
		}
		if ap := rs.Schema.AdditionalProperties; ap != nil && ap.Schema != nil {
			// Field of a key not among the properties: the same schema for every key
			n.addl = child(id, ".{}", lastRef(ap.Schema.Ref.String()), rs.Field("\x00not-a-property"))
		}
		if it := rs.Schema.Items; it != nil && it.Schema != nil {
			n.elems = child(id, ".[]", lastRef(it.Schema.Ref.String()), rs.Elements())
		}
		if len(n.props) == 0 && n.addl == 0 && n.elems == 0 {
			// a leaf (a scalar's schema, an empty object's): one node
			// per merge strategy and keys is enough; none was added after it
			leaf := fmt.Sprintf("leaf %v %q", n.merge, n.keys)
			if j, ok := tb.ids[leaf]; ok {
				tb.nodes = tb.nodes[:i]
				tb.ids[id] = j
				return j
			}
			tb.ids[leaf] = i
		}
		tb.nodes[i] = n
		return i
	}
	types := kyamlTypes(t)
	for tm := range types {
		tb.roots = append(tb.roots, typeRoot{tm.APIVersion, tm.Kind, 0})
	}
	// numbered in the order of the sorted types: the same file every time
	slices.SortFunc(tb.roots, func(a, b typeRoot) int {
		return cmp.Or(cmp.Compare(a.apiVersion, b.apiVersion), cmp.Compare(a.kind, b.kind))
	})
	for i, r := range tb.roots {
		tm := yaml.TypeMeta{APIVersion: r.apiVersion, Kind: r.kind}
		tb.roots[i].node = add("#/definitions/"+types[tm], openapi.SchemaForResourceType(tm))
	}
	tb.roots = slices.DeleteFunc(tb.roots, func(r typeRoot) bool { return r.node == 0 })
	return tb
}

// lastRef is the last $ref of the chain kyaml follows from ref ("" for
// none): the definition a field's node is.
func lastRef(ref string) string {
	for ref != "" {
		name, ok := strings.CutPrefix(ref, "#/definitions/")
		if !ok {
			return ref
		}
		d := openapi.Schema().Definitions[name]
		next := d.Ref.String()
		if next == "" {
			return ref
		}
		ref = next
	}
	return ""
}

// source renders the table as typeschemas.go.
func (tb *schemaTable) source() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by TestTypeSchemaTable (go test ./pipeline -run TestTypeSchemaTable -update-typeschemas); DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "// What the copy-back needs of the Kubernetes OpenAPI schema (version %s) built into sigs.k8s.io/kustomize/kyaml:\n", openapi.GetSchemaVersion())
	fmt.Fprintf(&b, "// for each resource type, its fields, map values and list items, and each list's merge strategy and keys.\n\n")
	fmt.Fprintf(&b, "package pipeline\n\n")
	fmt.Fprintf(&b, "var typeNodes = [...]schemaNode{\n\t{},\n")
	for _, n := range tb.nodes[1:] {
		b.WriteString("\t{")
		var parts []string
		if len(n.props) > 0 {
			var ps []string
			for _, p := range n.props {
				ps = append(ps, fmt.Sprintf("{%q, %d}", p.name, p.node))
			}
			parts = append(parts, "props: []typeProp{"+strings.Join(ps, ", ")+"}")
		}
		if n.addl != 0 {
			parts = append(parts, fmt.Sprintf("addl: %d", n.addl))
		}
		if n.elems != 0 {
			parts = append(parts, fmt.Sprintf("elems: %d", n.elems))
		}
		if n.merge {
			parts = append(parts, "merge: true")
		}
		if len(n.keys) > 0 {
			parts = append(parts, fmt.Sprintf("keys: %#v", n.keys))
		}
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString("},\n")
	}
	b.WriteString("}\n\nvar typeRoots = [...]typeRoot{\n")
	for _, r := range tb.roots {
		fmt.Fprintf(&b, "\t{%q, %q, %d},\n", r.apiVersion, r.kind, r.node)
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		panic(err)
	}
	return src
}

// TestTypeSchemaTable holds typeschemas.go to kyaml's schema.
func TestTypeSchemaTable(t *testing.T) {
	want := buildSchemaTable(t).source()
	if *updateTypeSchemas {
		if err := os.WriteFile("typeschemas.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("typeschemas.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("typeschemas.go is not what kyaml's built-in schema gives: run go test ./pipeline -run TestTypeSchemaTable -update-typeschemas")
	}
}

// TestTypeSchemaTableAgreesWithKyaml walks kyaml's schema of every type
// path by path, without the generator's sharing of nodes, and checks that
// the table's schemaNode says the same at every step: which fields have a
// schema, whether map values and list items have one, and each node's
// merge strategy and keys.
func TestTypeSchemaTableAgreesWithKyaml(t *testing.T) {
	const depth = 9 // a CronJob's containers' ports and their fields
	steps := 0
	var check func(path string, rs *openapi.ResourceSchema, s *schemaNode, d int)
	check = func(path string, rs *openapi.ResourceSchema, s *schemaNode, d int) {
		steps++
		if (rs == nil || rs.Schema == nil) != (s == nil) {
			t.Fatalf("%s: kyaml has a schema: %v, the table: %v", path, rs != nil && rs.Schema != nil, s != nil)
		}
		if s == nil || d == depth {
			return
		}
		merge, keys := false, []string(nil)
		if ps, _ := rs.PatchStrategyAndKey(); ps != "" {
			merge = slices.Contains(strings.Split(ps, ","), "merge")
			_, keys = rs.PatchStrategyAndKeyList()
		}
		if merge != s.merge || !slices.Equal(keys, s.keys) {
			t.Fatalf("%s: kyaml merge %v keys %q, the table merge %v keys %q", path, merge, keys, s.merge, s.keys)
		}
		for k := range rs.Schema.Properties {
			check(path+"."+k, rs.Field(k), s.field(k), d+1)
		}
		check(path+".{not-a-field}", rs.Field("not-a-field"), s.field("not-a-field"), d+1)
		check(path+"[]", rs.Elements(), s.elements(), d+1)
	}
	for tm := range kyamlTypes(t) {
		s := typeSchema(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: "apiVersion"}, {Kind: yaml.ScalarNode, Value: tm.APIVersion},
			{Kind: yaml.ScalarNode, Value: "kind"}, {Kind: yaml.ScalarNode, Value: tm.Kind},
		}}, nil)
		check(tm.APIVersion+" "+tm.Kind, openapi.SchemaForResourceType(tm), s, 0)
	}
	// an unknown type has no schema
	if s := typeSchema(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: "apiVersion"}, {Kind: yaml.ScalarNode, Value: "example.com/v1"},
		{Kind: yaml.ScalarNode, Value: "kind"}, {Kind: yaml.ScalarNode, Value: "Widget"},
	}}, nil); s != nil {
		t.Fatal("example.com/v1 Widget has a schema in the table")
	}
	t.Logf("%d steps compared", steps)
}
