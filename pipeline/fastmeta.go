package pipeline

import (
	"unicode/utf8"

	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// Cheap accessors for the few metadata fields the pipeline reads on every
// resource of every call. RNode.GetAnnotations and GetMeta build maps of all
// labels and annotations; on 10k-resource packages that showed in profiles.

func mapField(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	if i := fieldIndex(n, key); i >= 0 {
		return n.Content[i+1]
	}
	return nil
}

// fieldIndex is the index of the first key node named key in mapping m, -1
// when there is none.
func fieldIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// annotation returns metadata.annotations[key] ("" when absent).
func annotation(rn *yaml.RNode, key string) string {
	return annotationsOf(rn).get(key)
}

// annotations is a resource's metadata.annotations mapping, for several
// lookups.
type annotations struct{ m *yaml.Node }

func annotationsOf(rn *yaml.RNode) annotations {
	return annotations{mapField(mapField(rn.YNode(), "metadata"), "annotations")}
}

// get is the scalar value of the first key named key ("" when absent).
func (a annotations) get(key string) string {
	v := mapField(a.m, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

func pathAndIndex(rn *yaml.RNode) (string, string) {
	a := annotationsOf(rn)
	p := a.get(kioutil.PathAnnotation)
	if p == "" {
		p = a.get(kioutil.LegacyPathAnnotation) //nolint:staticcheck
	}
	i := a.get(kioutil.IndexAnnotation)
	if i == "" {
		i = a.get(kioutil.LegacyIndexAnnotation) //nolint:staticcheck
	}
	return p, i
}

// The annotation edits below are kyaml's yaml.SetAnnotation,
// yaml.ClearAnnotation and yaml.ClearEmptyAnnotations, with the same effect
// on the node tree, done in place for the shape every resource has
// (metadata and annotations plain mappings, no duplicate keys). Through
// RNode.Pipe each of them cost several allocations and reflective filter
// calls per resource, run a few times per resource per function. Any other
// shape goes through kyaml itself. fastmeta_test.go checks both agree.

// plainMap reports whether n is a mapping kyaml's filters accept as one.
func plainMap(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.MappingNode && n.Tag != "!!null" && len(n.Content)%2 == 0
}

// uniqueField returns the index of the key node named key in mapping m, -1
// when absent; ok is false when the key occurs more than once.
func uniqueField(m *yaml.Node, key string) (i int, ok bool) {
	i = -1
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key {
			if i >= 0 {
				return -1, false
			}
			i = j
		}
	}
	return i, true
}

// metaNodes finds metadata and metadata.annotations of rn (nil when absent);
// ok is false when they are not in the plain shape.
func metaNodes(rn *yaml.RNode) (root, md, ann *yaml.Node, mi, ai int, ok bool) {
	root = rn.YNode()
	if !plainMap(root) {
		return nil, nil, nil, -1, -1, false
	}
	mi, ok = uniqueField(root, "metadata")
	if !ok || mi < 0 {
		return root, nil, nil, mi, -1, ok
	}
	md = root.Content[mi+1]
	if !plainMap(md) {
		return nil, nil, nil, -1, -1, false
	}
	ai, ok = uniqueField(md, "annotations")
	if !ok || ai < 0 {
		return root, md, nil, mi, ai, ok
	}
	ann = md.Content[ai+1]
	if !plainMap(ann) {
		return nil, nil, nil, -1, -1, false
	}
	return root, md, ann, mi, ai, true
}

// setAnnotation is rn.PipeE(yaml.SetAnnotation(key, value)).
func setAnnotation(rn *yaml.RNode, key, value string) error {
	return setAnnotations(rn, key, value)
}

// setAnnotations is setAnnotation for each key, value pair in turn, with
// one look-up of the metadata for all of them.
func setAnnotations(rn *yaml.RNode, kv ...string) error {
	_, md, ann, _, _, ok := metaNodes(rn)
	for i := 0; i+1 < len(kv); i += 2 {
		if ok {
			var done bool
			if ann, done = setIn(md, ann, kv[i], kv[i+1]); done {
				continue
			}
		}
		if err := rn.PipeE(yaml.SetAnnotation(kv[i], kv[i+1])); err != nil {
			return err
		}
		_, md, ann, _, _, ok = metaNodes(rn)
	}
	return nil
}

// setIn is SetAnnotation on a plain resource's metadata md and annotations
// ann (nil when absent); done is false when only kyaml can do it.
func setIn(md, ann *yaml.Node, key, value string) (*yaml.Node, bool) {
	if md == nil || !utf8.ValidString(value) {
		return ann, false
	}
	if ann == nil {
		if len(md.Content) == 0 {
			return ann, false // ClearEmptyAnnotations drops the empty metadata first
		}
		// PathGetter creates the annotations mapping, FieldSetter the field
		ann = &yaml.Node{Kind: yaml.MappingNode}
		md.Content = append(md.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "annotations"}, ann)
	} else if len(ann.Content) == 0 {
		return ann, false
	}
	i, unique := uniqueField(ann, key)
	if !unique {
		return ann, false
	}
	if i >= 0 {
		// FieldSetter replaces the whole value node, keeping only its style
		v := ann.Content[i+1]
		*v = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Style: v.Style}
		return ann, true
	}
	ann.Content = append(ann.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value, Style: yaml.SingleQuotedStyle})
	return ann, true
}

// clearAnnotation is rn.PipeE(yaml.ClearAnnotation(key)).
func clearAnnotation(rn *yaml.RNode, key string) error {
	return clearAnnotations(rn, key)
}

// clearAnnotations is clearAnnotation for each key in turn.
func clearAnnotations(rn *yaml.RNode, keys ...string) error {
	_, _, ann, _, _, ok := metaNodes(rn)
	if !ok {
		for _, k := range keys {
			if err := rn.PipeE(yaml.ClearAnnotation(k)); err != nil {
				return err
			}
		}
		return nil
	}
	if ann == nil {
		return nil
	}
	for _, key := range keys {
		for j := 0; j+1 < len(ann.Content); j += 2 {
			if ann.Content[j].Value == key {
				ann.Content = append(ann.Content[:j], ann.Content[j+2:]...)
				break
			}
		}
	}
	return nil
}

// clearEmptyAnnotations is yaml.ClearEmptyAnnotations(rn): an empty
// annotations field goes, then an empty metadata field.
func clearEmptyAnnotations(rn *yaml.RNode) error {
	root, md, ann, mi, ai, ok := metaNodes(rn)
	if !ok {
		return yaml.ClearEmptyAnnotations(rn)
	}
	if md == nil {
		return nil
	}
	if ann != nil && len(ann.Content) == 0 {
		md.Content = append(md.Content[:ai], md.Content[ai+2:]...)
	}
	if len(md.Content) == 0 {
		root.Content = append(root.Content[:mi], root.Content[mi+2:]...)
	}
	return nil
}

// fileAnnotations is kioutil.GetFileAnnotations without building maps of
// the whole metadata: the path and index annotations, the legacy spelling
// when the current one is absent.
func fileAnnotations(rn *yaml.RNode) (path, index string, err error) {
	get := annotationOf(rn)
	path, found := get(kioutil.PathAnnotation)
	if !found {
		path, _ = get(kioutil.LegacyPathAnnotation) //nolint:staticcheck
	}
	index, found = get(kioutil.IndexAnnotation)
	if !found {
		index, _ = get(kioutil.LegacyIndexAnnotation) //nolint:staticcheck
	}
	return path, index, nil
}

// annotationOf is GetMeta().Annotations[key] (found: the key is present):
// the last of duplicate keys, values of null nodes read as "", as GetMeta
// reads them.
func annotationOf(rn *yaml.RNode) func(key string) (string, bool) {
	_, _, ann, _, _, ok := metaNodes(rn)
	if !ok {
		m, _ := rn.GetMeta()
		return func(key string) (string, bool) { v, found := m.Annotations[key]; return v, found }
	}
	return func(key string) (string, bool) {
		if ann == nil {
			return "", false
		}
		return lookupLast(ann, key)
	}
}

func lookupLast(m *yaml.Node, key string) (v string, found bool) {
	for j := 0; j+1 < len(m.Content); j += 2 {
		if m.Content[j].Value == key {
			v, found = m.Content[j+1].Value, true
			if m.Content[j+1].Tag == "!!null" {
				v = ""
			}
		}
	}
	return v, found
}
