package pipeline

import (
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// copyBackFast does what kyaml's comments.CopyComments(from, to) followed
// by order.SyncOrder(from, to) do (what kpt runs on every resource a
// function returns), for the shapes where that is plain, and reports
// false, having changed nothing, for any other, which kyaml then handles.
// kyaml walks both trees with its schema-aware walker, reflects over
// every field's metadata and looks up OpenAPI schemas; a render of a
// package whose resources carry comments spent most of its time there.
//
// What kyaml does, and so this: at the root, the comments of from's
// document fill the empty comments of to; then, pairing mapping fields by
// key, each key's and each value's empty comments are filled from from's
// counterpart, recursively. Folded scalars of to would become
// double-quoted, and lists are paired by schema-defined merge keys, so:
// plain only when to has no folded scalar, to's fields already follow
// from's order (SyncOrder has nothing to do), paired values have the same
// kind (kyaml errors otherwise), no mapping repeats a key, and every list
// present in both is free of comments in from and equal in both, apart
// from comments (then pairing cannot matter). copyback_test.go compares it
// with kyaml over the corpora.
func copyBackFast(from, to *yaml.RNode) bool {
	f, t := from.YNode(), to.YNode()
	if f == nil || t == nil || !noFolded(t) || !inOrder(f, t) || !plainPair(f, t) {
		return false
	}
	fillComments(from.Document(), to.Document())
	fillPair(f, t)
	return true
}

// plainPair checks the conditions of copyBackFast for a pair of nodes.
func plainPair(f, t *yaml.Node) bool {
	if f.Kind != t.Kind || isNullNode(f) != isNullNode(t) {
		return false
	}
	switch f.Kind {
	case yaml.MappingNode:
		if len(f.Content)%2 != 0 || len(t.Content)%2 != 0 || hasDupKeys(f) || hasDupKeys(t) {
			return false
		}
		for i := 0; i+1 < len(f.Content); i += 2 {
			if f.Content[i].Kind != yaml.ScalarNode {
				return false
			}
		}
		for i := 0; i+1 < len(t.Content); i += 2 {
			if t.Content[i].Kind != yaml.ScalarNode {
				return false
			}
			if j := fieldIndex(f, t.Content[i].Value); j >= 0 && !plainPair(f.Content[j+1], t.Content[i+1]) {
				return false
			}
		}
		return true
	case yaml.SequenceNode:
		return noComments(f) && equalIgnoringComments(f, t)
	case yaml.ScalarNode:
		return true
	}
	return false // documents inside, aliases
}

// fillPair copies comments along paired mapping fields (keys and values).
func fillPair(f, t *yaml.Node) {
	if f.Kind != yaml.MappingNode {
		return // scalars were filled by the caller; lists have nothing to give
	}
	for i := 0; i+1 < len(t.Content); i += 2 {
		j := fieldIndex(f, t.Content[i].Value)
		if j < 0 {
			continue
		}
		if !isNullNode(f.Content[j]) && !isNullNode(t.Content[i]) {
			fillComments(f.Content[j], t.Content[i])
		}
		fillComments(f.Content[j+1], t.Content[i+1])
		fillPair(f.Content[j+1], t.Content[i+1])
	}
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
