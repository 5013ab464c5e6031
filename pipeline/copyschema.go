package pipeline

import (
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// schemaNode is kyaml's OpenAPI schema for one node of a resource type
// (openapi.ResourceSchema), with what copyWalk asks of it looked up once:
// kyaml's walker resolves references and compares schemas by reflection
// at every node of every resource. The tree of schemaNodes grows with the
// schema, never with the data (every key of a map type shares one node).
// Safe for concurrent use.
type schemaNode struct {
	rs    *openapi.ResourceSchema
	merge bool     // the list has a merge strategy (kyaml's schema.IsAssociative)
	keys  []string // its merge keys (PatchStrategyAndKeyList)

	mu        sync.Mutex
	props     map[string]*schemaNode // nil values: no schema for the field
	addl      *schemaNode
	addlDone  bool
	elems     *schemaNode
	elemsDone bool
}

// typeSchemas holds a schemaNode per resource type (yaml.TypeMeta; nil
// for a type kyaml has no schema for).
var typeSchemas sync.Map

func newSchemaNode(rs *openapi.ResourceSchema) *schemaNode {
	if rs == nil || rs.Schema == nil {
		return nil
	}
	s := &schemaNode{rs: rs}
	if ps, _ := rs.PatchStrategyAndKey(); ps != "" {
		for _, p := range strings.Split(ps, ",") {
			s.merge = s.merge || p == "merge"
		}
		_, s.keys = rs.PatchStrategyAndKeyList()
	}
	return s
}

// typeSchema is the schema kyaml's walker takes from its sources when it
// has none: that of the apiVersion and kind d names, else o's.
func typeSchema(d, o *yaml.Node) *schemaNode {
	for _, n := range [...]*yaml.Node{d, o} {
		if n == nil || n.Kind != yaml.MappingNode {
			continue
		}
		tm := yaml.TypeMeta{APIVersion: scalarField(n, yaml.APIVersionField), Kind: scalarField(n, yaml.KindField)}
		if tm.APIVersion == "" || tm.Kind == "" {
			continue
		}
		v, ok := typeSchemas.Load(tm)
		if !ok {
			v, _ = typeSchemas.LoadOrStore(tm, newSchemaNode(openapi.SchemaForResourceType(tm)))
		}
		if s := v.(*schemaNode); s != nil {
			return s
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.props[key]; ok {
		return c
	}
	if _, ok := s.rs.Schema.Properties[key]; ok {
		if s.props == nil {
			s.props = map[string]*schemaNode{}
		}
		c := newSchemaNode(s.rs.Field(key))
		s.props[key] = c
		return c
	}
	if !s.addlDone {
		s.addlDone = true
		if ap := s.rs.Schema.AdditionalProperties; ap != nil && ap.Schema != nil {
			s.addl = newSchemaNode(s.rs.Field(key)) // the same for every key
		}
	}
	return s.addl
}

// elements is ResourceSchema.Elements(), the schema of a list's items.
func (s *schemaNode) elements() *schemaNode {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.elemsDone {
		s.elemsDone = true
		s.elems = newSchemaNode(s.rs.Elements())
	}
	return s.elems
}
