package pipeline

import (
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// copyBackFast does what kyaml's comments.CopyComments(from, to) followed
// by order.SyncOrder(from, to) do (what kpt runs on every resource a
// function returns), without kyaml's walker, and reports false, having
// changed nothing, for the shapes it is not sure of, which kyaml then
// handles (and fails where it fails). kyaml's walker reflects over every
// field's metadata and looks up OpenAPI schemas for every node; a render
// of a package whose resources carry setter comments spent most of its
// time there.
//
// What kyaml does, and so this (copyWalk mirrors it step by step): at the
// root, the comments of from's document fill the empty comments of to's;
// then, pairing mapping fields by key, each key's and each value's empty
// comments are filled from from's counterpart, recursively; a null and a
// value of the same field, or two values of different kinds, fail. A list
// first fills its own comments, then pairs items by index, and each pair
// whose values are equal (all mappings, equal scalars) is copied as a
// resource of its own (no schema, unless the item names a known apiVersion
// and kind); then, where the OpenAPI schema gives the list a merge
// strategy (containers by name, ports by containerPort and protocol),
// items are paired again by their merge keys, with the items' schema.
// SyncOrder then reorders nothing (to must already follow from's order)
// and moves the head comment of a list item's first key onto the item.
// Declined: a folded scalar in to (kyaml rewrites it double-quoted),
// comments that parse as a field schema (kyaml would read them as one),
// repeated or non-scalar keys, a null paired with a value, and merge-keyed
// lists whose keys are not all set and distinct in every item.
// copyback_test.go and FuzzCopyBack hold it to kyaml byte for byte.
func copyBackFast(from, to *yaml.RNode) bool {
	f, t := from.YNode(), to.YNode()
	if f == nil || t == nil || !noFolded(t) || !inOrder(f, t) {
		return false
	}
	w, ok := walkCopyBack(f, t)
	if !ok {
		return false
	}
	fillComments(from.Document(), to.Document())
	for _, p := range w.fills {
		fillComments(p[0], p[1])
	}
	moveSeqItemHeadComments(t)
	return true
}

// copyBackCheck reports whether kyaml's CopyComments and SyncOrder
// certainly succeed on (from, to), changing nothing (false when unsure):
// for an output that is discarded.
func copyBackCheck(f, t *yaml.Node) bool {
	if copyBackCannotFail(f, t) {
		return true
	}
	_, ok := walkCopyBack(f, t)
	return ok
}

// walkCopyBack runs copyWalk over a resource pair: first without schemas,
// which suffices unless a list needs one (a list with comments to give, or
// whose items could pair differently by merge key), then with them. It
// returns the fills to make, in kyaml's order, and whether kyaml would
// take the same steps and succeed.
func walkCopyBack(f, t *yaml.Node) (*copyWalk, bool) {
	if f.Kind != yaml.MappingNode || t.Kind != yaml.MappingNode || schemaComments(f) || schemaComments(t) {
		return nil, false
	}
	w := &copyWalk{}
	if w.fields(f, t, nil) {
		return w, true
	}
	if !w.needSchema {
		return nil, false
	}
	w = &copyWalk{schemas: true}
	if !w.fields(f, t, typeSchema(f, t)) {
		return nil, false
	}
	return w, true
}

// copyWalk mirrors kyaml's walk.Walker with comments' copier as visitor
// over the sources (d, o): d is from's node (kyaml's dest, a copy of from
// it never writes back), o is to's; either may be missing (nil). Nothing
// is written during the walk: fills records each (from, to) comment fill
// for after it succeeds.
type copyWalk struct {
	schemas    bool // schemas looked up; without, a list that needs one stops the walk
	needSchema bool // the walk stopped for want of a schema
	fills      [][2]*yaml.Node
}

func (w *copyWalk) fill(d, o *yaml.Node) {
	if d != nil && o != nil && (d.HeadComment != "" || d.LineComment != "" || d.FootComment != "") {
		w.fills = append(w.fills, [2]*yaml.Node{d, o})
	}
}

// walk is Walker.Walk: the schema is s, else (kyaml's GetSchema) the type
// d names, else o's; the kind is the first non-null source's.
func (w *copyWalk) walk(d, o *yaml.Node, s *schemaNode) bool {
	if d == nil {
		return true // nothing of from reaches o, whatever its kind
	}
	if s == nil && w.schemas {
		s = typeSchema(d, o)
	}
	if o != nil && isNullNode(d) != isNullNode(o) {
		return false // kyaml pairs a null with a value in ways not mirrored here
	}
	if o != nil && !isNullNode(d) && d.Kind != o.Kind {
		return false // kyaml: wrong node kind
	}
	if isNullNode(d) {
		w.fill(d, o) // walked as an empty mapping
		return true
	}
	switch d.Kind {
	case yaml.MappingNode:
		w.fill(d, o)
		return w.fields(d, o, s)
	case yaml.SequenceNode:
		return w.list(d, o, s)
	case yaml.ScalarNode:
		w.fill(d, o)
		return true
	}
	return false // documents inside, aliases
}

// fields is walkMap's loop over the fields of d and o: keys as scalars,
// then values with the field's schema. kyaml visits the union of the
// field names sorted; fills to different fields never meet, so d's order
// then o's gives the same result.
func (w *copyWalk) fields(d, o *yaml.Node, s *schemaNode) bool {
	if !scalarKeys(d) || hasDupKeys(d) || (o != nil && (o.Kind != yaml.MappingNode || !scalarKeys(o) || hasDupKeys(o))) {
		return false
	}
	for i := 0; i+1 < len(d.Content); i += 2 {
		k := d.Content[i]
		var ok, ov *yaml.Node
		if o != nil {
			if j := fieldIndex(o, k.Value); j >= 0 {
				ok, ov = o.Content[j], o.Content[j+1]
			}
		}
		if ok != nil && !isNullNode(k) && !isNullNode(ok) {
			w.fill(k, ok)
		}
		var fs *schemaNode
		if s != nil {
			fs = s.field(k.Value)
		}
		if !w.walk(d.Content[i+1], ov, fs) {
			return false
		}
	}
	return true
}

// list is VisitList then, for a merge-keyed list, walkAssociativeSequence.
func (w *copyWalk) list(d, o *yaml.Node, s *schemaNode) bool {
	if o != nil && noComments(d) && plainList(d) && plainList(o) && sameContent(d, o) {
		return true // nothing to give, and no pairing can fail (copyBackCannotFail)
	}
	if !w.schemas {
		w.needSchema = true
		return false
	}
	if o != nil {
		w.fill(d, o)
		for i := 0; i < len(d.Content) && i < len(o.Content); i++ {
			if di, oi := d.Content[i], o.Content[i]; di.Value == oi.Value {
				w.fill(di, oi) // copied as a resource of its own
				if !w.walk(di, oi, nil) {
					return false
				}
			}
		}
	}
	if s == nil || !s.merge {
		return true
	}
	return w.byMergeKey(d, o, s)
}

// byMergeKey pairs the items of d and o by their merge-key values, as
// kyaml's setAssociativeSequenceElements does where every item is a
// mapping, every key is either set (a non-empty scalar) in every item or
// in none, and no two items of a list share their values: then each item
// of o is walked with the one item of d that has its values.
func (w *copyWalk) byMergeKey(d, o *yaml.Node, s *schemaNode) bool {
	items := d.Content
	if o != nil {
		items = append(items[:len(items):len(items)], o.Content...)
	}
	if len(items) == 0 {
		return true
	}
	if len(s.keys) == 0 {
		return w.byValue(d, o, s)
	}
	var valid []string
	for _, k := range s.keys {
		set := 0
		for _, it := range items {
			v, ok := mergeKeyValue(it, k)
			if !ok {
				return false
			}
			if v != "" {
				set++
			}
		}
		switch set {
		case len(items):
			valid = append(valid, k)
		case 0:
		default:
			return false
		}
	}
	if len(valid) == 0 {
		return false
	}
	tuple := func(it *yaml.Node) string {
		var b []byte
		for _, k := range valid {
			v, _ := mergeKeyValue(it, k)
			b = append(b, v...)
			b = append(b, 0)
		}
		return string(b)
	}
	dIdx := make(map[string]*yaml.Node, len(d.Content))
	for _, it := range d.Content {
		key := tuple(it)
		if dIdx[key] != nil {
			return false
		}
		dIdx[key] = it
	}
	paired := make(map[*yaml.Node]bool, len(d.Content))
	if o != nil {
		seen := make(map[string]bool, len(o.Content))
		for _, it := range o.Content {
			key := tuple(it)
			if seen[key] {
				return false
			}
			seen[key] = true
			if di := dIdx[key]; di != nil {
				paired[di] = true
				if !w.walk(di, it, s.elements()) {
					return false
				}
			}
		}
	}
	for _, di := range d.Content {
		if !paired[di] && !w.walk(di, nil, s.elements()) {
			return false
		}
	}
	return true
}

// byValue pairs the items of a list of scalars merged by value
// (finalizers): for each value, the first item of d and the first of o
// that have it, as kyaml's primitive associative lists do.
func (w *copyWalk) byValue(d, o *yaml.Node, s *schemaNode) bool {
	first := make(map[string]*yaml.Node, len(d.Content))
	for _, it := range d.Content {
		if it.Kind != yaml.ScalarNode || isNullNode(it) {
			return false
		}
		if first[it.Value] == nil {
			first[it.Value] = it
		}
	}
	if o == nil {
		return true
	}
	seen := make(map[string]bool, len(o.Content))
	for _, it := range o.Content {
		if it.Kind != yaml.ScalarNode || isNullNode(it) {
			return false
		}
		if di := first[it.Value]; di != nil && !seen[it.Value] {
			w.fill(di, it)
		}
		seen[it.Value] = true
	}
	return true
}

// mergeKeyValue is the value kyaml's ElementValuesList reads for key k of
// item it: "" when the field is missing or null; false for a value it is
// not sure of (an item that is not a plain mapping, a non-scalar value).
func mergeKeyValue(it *yaml.Node, k string) (string, bool) {
	if it.Kind != yaml.MappingNode || !scalarKeys(it) {
		return "", false
	}
	j := fieldIndex(it, k)
	if j < 0 {
		return "", true
	}
	v := it.Content[j+1]
	switch {
	case isNullNode(v):
		return "", true
	case v.Kind == yaml.ScalarNode:
		return v.Value, true
	}
	return "", false
}

// moveSeqItemHeadComments is what SyncOrder does after syncing the order
// (kyaml's rearrangeHeadCommentOfSeqNode): a list item that is a mapping
// takes the head comment of its first key (copied when it has none of its
// own, moved onto the end of its own otherwise). Items are not descended.
func moveSeqItemHeadComments(n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.MappingNode:
		for _, c := range n.Content {
			moveSeqItemHeadComments(c)
		}
	case yaml.SequenceNode:
		for _, it := range n.Content {
			if len(it.Content) == 0 || it.Content[0].Kind != yaml.ScalarNode {
				continue
			}
			if it.HeadComment == "" {
				it.HeadComment = it.Content[0].HeadComment
			} else if it.Content[0].HeadComment != "" {
				it.HeadComment += "\n" + it.Content[0].HeadComment
				it.Content[0].HeadComment = ""
			}
		}
	}
}

// schemaComments reports whether a line or head comment in n could be read
// by kyaml's fieldmeta as a field schema (JSON after the '#'s), which
// would change the schema kyaml's walker uses.
func schemaComments(n *yaml.Node) bool {
	if schemaComment(n.LineComment) || schemaComment(n.HeadComment) {
		return true
	}
	for _, c := range n.Content {
		if schemaComments(c) {
			return true
		}
	}
	return false
}

func schemaComment(c string) bool {
	if c == "" {
		return false
	}
	c = strings.TrimLeft(strings.TrimLeft(c, "#"), " \t\r\n")
	return strings.HasPrefix(c, "{")
}

// fillComments is kyaml's copyFieldComments: to's empty comments from from.
func fillComments(from, to *yaml.Node) {
	if to.LineComment == "" {
		to.LineComment = from.LineComment
	}
	if to.HeadComment == "" {
		to.HeadComment = from.HeadComment
	}
	if to.FootComment == "" {
		to.FootComment = from.FootComment
	}
}

func isNullNode(n *yaml.Node) bool { return n.Tag == "!!null" }

func hasDupKeys(m *yaml.Node) bool {
	if len(m.Content) <= 16 {
		for i := 0; i+1 < len(m.Content); i += 2 {
			for j := i + 2; j+1 < len(m.Content); j += 2 {
				if m.Content[i].Value == m.Content[j].Value {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]bool, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		if seen[m.Content[i].Value] {
			return true
		}
		seen[m.Content[i].Value] = true
	}
	return false
}

// equalIgnoringComments compares kinds, tags, values, styles and content.
func equalIgnoringComments(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || a.Style != b.Style ||
		a.Anchor != b.Anchor || len(a.Content) != len(b.Content) {
		return false
	}
	for i := range a.Content {
		if !equalIgnoringComments(a.Content[i], b.Content[i]) {
			return false
		}
	}
	return true
}

// copyBackCannotFail reports whether kyaml's CopyComments and SyncOrder
// certainly succeed on the pair (from, to) (false when unsure). They fail
// where paired values differ in kind, and, inside lists, where kyaml's
// walker pairs items by merge key and meets an item that is not a mapping
// (a scalar, a list or a null among a Deployment's containers fails even a
// resource paired with itself; TestCopyBackCannotFailHoldsForKyaml). So: mapping fields are paired by key (the
// first field of from with the key, as kyaml's Field finds it) and must
// agree in kind, recursively; a list must be plain (plainList) and have
// the same content in both, whatever the comments, styles and field order,
// so that every pairing, by index or by merge key, pairs equal items.
// copyback_test.go checks kyaml against it over the corpora.
func copyBackCannotFail(f, t *yaml.Node) bool {
	if f.Kind != t.Kind {
		return false
	}
	switch f.Kind {
	case yaml.ScalarNode:
		return true
	case yaml.MappingNode:
		if !scalarKeys(f) || !scalarKeys(t) {
			return false
		}
		for i := 0; i+1 < len(t.Content); i += 2 {
			if j := fieldIndex(f, t.Content[i].Value); j >= 0 && !copyBackCannotFail(f.Content[j+1], t.Content[i+1]) {
				return false
			}
		}
		return true
	case yaml.SequenceNode:
		return plainList(f) && plainList(t) && sameContent(f, t)
	}
	return false // documents inside, aliases
}

// scalarKeys: m is a complete mapping whose keys are all scalars.
func scalarKeys(m *yaml.Node) bool {
	if len(m.Content)%2 != 0 {
		return false
	}
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

// plainList: every list in n (n included) holds only mappings, and every
// mapping has scalar keys. A list of scalars is not plain: where kyaml's
// schema gives the list a merge key (containers, ports, env), any scalar
// item fails its walker, and the schema is what copyBackCannotFail avoids.
func plainList(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return true
	case yaml.MappingNode:
		if !scalarKeys(n) {
			return false
		}
		for i := 1; i < len(n.Content); i += 2 {
			if !plainList(n.Content[i]) {
				return false
			}
		}
		return true
	case yaml.SequenceNode:
		for _, c := range n.Content {
			if c.Kind != yaml.MappingNode || !plainList(c) {
				return false
			}
		}
		return true
	}
	return false
}

// sameContent compares kinds and scalar values, mappings by key (no key
// repeated), lists item by item; comments, styles and tags do not count.
func sameContent(a, b *yaml.Node) bool {
	if a.Kind != b.Kind || len(a.Content) != len(b.Content) {
		return false
	}
	switch a.Kind {
	case yaml.ScalarNode:
		return a.Value == b.Value
	case yaml.MappingNode:
		if hasDupKeys(a) || hasDupKeys(b) {
			return false
		}
		for i := 0; i+1 < len(b.Content); i += 2 {
			j := fieldIndex(a, b.Content[i].Value)
			if j < 0 || !sameContent(a.Content[j+1], b.Content[i+1]) {
				return false
			}
		}
		return true
	case yaml.SequenceNode:
		for i := range a.Content {
			if !sameContent(a.Content[i], b.Content[i]) {
				return false
			}
		}
		return true
	}
	return false
}
