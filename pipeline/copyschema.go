package pipeline

import (
	"cmp"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// schemaNode is what copyWalk asks of kyaml's OpenAPI schema for one node
// of a resource type (openapi.ResourceSchema): the schema of a field, of a
// map's values and of a list's items, and whether a list merges by keys.
// The nodes are the generated table in typeschemas.go, static data: kyaml
// decodes its whole built-in schema (~40 ms, once per process, the largest
// fixed cost of a render's own work) at the first question asked of it,
// and the copy-back of every changed resource of a built-in type asked.
// TestTypeSchemaTable keeps the table equal to kyaml's schema and
// TestTypeSchemaTableAgreesWithKyaml checks it answers as kyaml does.
// Read-only: safe for concurrent use.
type schemaNode struct {
	props []typeProp // sorted by name
	addl  int32      // the schema of a key not in props (a map's values); 0: none
	elems int32      // the schema of a list's items; 0: none
	merge bool       // the list has a merge strategy (kyaml's schema.IsAssociative)
	keys  []string   // its merge keys (PatchStrategyAndKeyList)
}

// typeProp is a field of a schemaNode: its name and node (0: no schema).
type typeProp struct {
	name string
	node int32
}

// typeRoot is the node of a resource type.
type typeRoot struct {
	apiVersion, kind string
	node             int32
}

// nodeAt is the node at index i of the table, nil for 0.
func nodeAt(i int32) *schemaNode {
	if i == 0 {
		return nil
	}
	return &typeNodes[i]
}

// typeSchema is the schema kyaml's walker takes from its sources when it
// has none: that of the apiVersion and kind d names, else o's.
func typeSchema(d, o *yaml.Node) *schemaNode {
	for _, n := range [...]*yaml.Node{d, o} {
		if n == nil || n.Kind != yaml.MappingNode {
			continue
		}
		v, k := scalarField(n, yaml.APIVersionField), scalarField(n, yaml.KindField)
		if v == "" || k == "" {
			continue
		}
		i, ok := slices.BinarySearchFunc(typeRoots[:], typeRoot{apiVersion: v, kind: k}, func(a, b typeRoot) int {
			return cmp.Or(cmp.Compare(a.apiVersion, b.apiVersion), cmp.Compare(a.kind, b.kind))
		})
		if ok {
			return nodeAt(typeRoots[i].node)
		}
	}
	return nil
}

// scalarField is the value GetMeta reads for a field: "" when missing,
// null or not a scalar.
func scalarField(m *yaml.Node, key string) string {
	if v := mapField(m, key); v != nil && v.Kind == yaml.ScalarNode && !isNullNode(v) {
		return v.Value
	}
	return ""
}

// field is ResourceSchema.Field(key), nil where kyaml finds none.
func (s *schemaNode) field(key string) *schemaNode {
	if i, ok := slices.BinarySearchFunc(s.props, key, func(p typeProp, k string) int { return cmp.Compare(p.name, k) }); ok {
		return nodeAt(s.props[i].node)
	}
	return nodeAt(s.addl)
}

// elements is ResourceSchema.Elements(), the schema of a list's items.
func (s *schemaNode) elements() *schemaNode { return nodeAt(s.elems) }
