package fastyaml

// The encoder writes a yaml.Node tree as YAML text, byte for byte as
// yaml.v3's encoder does with kyaml's settings (indent 2, compact or wide
// sequences in mappings, no line folding), for the shapes it takes; a tree
// outside them is reported as not handled and its caller uses yaml.v3.
//
// It is our own, written from YAML 1.2's presentation rules and yaml.v3's
// observable output (the differential tests, generated trees and fuzz
// targets in this package compare every handled case with yaml.v3): a
// recursive walk that knows at each node where the cursor stands (at a
// line start, after "key:", after "- ", inside a flow collection) and which
// indentation the enclosing block collection has, and writes whole lines.
//
// The layout, as yaml.v3 writes it:
//   - a block mapping's keys start at its indentation; a value that is a
//     block mapping is indented by 2 on the next line; a block sequence
//     under a key starts at the key's indentation (Compact) or 2 deeper
//     (Wide); scalars, aliases and flow or empty collections follow
//     "key: " on the same line;
//   - a block sequence item starts "- "; a mapping item's first key and a
//     sequence item's first item follow on the same line and the rest are
//     indented 2 past the "-"; an anchored collection item puts its anchor
//     after the "-" and starts on the next line;
//   - block scalars and multi-line single-quoted scalars indent their
//     lines 2 past the enclosing block collection; inside flow collections
//     each level of nesting adds 2;
//   - empty collections are written in flow style, {} and [].
//
// Comments, where yaml.v3 puts them:
//   - head comments above the key or item they belong to, at its
//     indentation (the first key or item after a "- " takes the rest of
//     that line); a document's head comment, then an empty line, above it;
//   - line comments after the scalar, alias or flow collection on the line,
//     on the header line of a block scalar, and after "key:" when a block
//     collection follows;
//   - foot comments of keys, scalars and aliases below their lines, at the
//     indentation of the enclosing collection, with an empty line before
//     the next line that starts at that indentation; a document's foot
//     comment after an empty line;
//   - a scalar value's head comment below its pair, above the next key
//     unless that key has its own.
//
// Any other comment (inside flow collections, foot comments of
// collections, a comment between an anchor and a collection) makes the
// tree not handled.

import (
	"sync"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// SeqStyle is the indentation of block sequences nested in mappings.
type SeqStyle int

const (
	// Compact writes "- " at the parent mapping's indentation (kyaml's
	// default, yaml.v3's CompactSeqIndent).
	Compact SeqStyle = iota
	// Wide indents a sequence in a mapping by 2 (yaml.v3's DefaultSeqIndent).
	Wide
)

// maxSimpleKey is the longest key (anchor and value) yaml.v3 writes as
// "key:"; a longer one it writes as a "? " complex key, which we leave to it.
const maxSimpleKey = 128

// encoder holds the output and the settings of one call.
type encoder struct {
	out   []byte
	start int // len(out) when the call began: a line start
	wide  bool
	ok    bool // false once something outside the handled shapes is met
	// blankAt is the indentation after which a foot comment was written:
	// the next line starting there is preceded by an empty line (-1: none).
	blankAt int
}

var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Encodable reports whether AppendDocument can encode n (a DocumentNode or
// any node) exactly as yaml.v3 would. It costs as much as encoding: callers
// that want the bytes should call AppendDocument and check ok instead.
func Encodable(n *yaml.Node) bool {
	bp := scratch.Get().(*[]byte)
	out, ok := AppendDocument((*bp)[:0], n, Compact)
	if cap(out) <= 1<<20 {
		*bp = out[:0]
		scratch.Put(bp)
	}
	return ok
}

// AppendDocument appends what
//
//	e := yaml.NewEncoder(w); e.SetIndent(2); e.CompactSeqIndent() // or DefaultSeqIndent() for Wide
//	e.Encode(n); e.Close()
//
// writes for n (a DocumentNode, or any other node, which yaml.v3 wraps in a
// document). ok is false, and buf is returned unchanged, when n is outside
// the handled shapes.
//
// Documents written one after another by a single yaml.v3 encoder (as
// kio.ByteWriter does) are the AppendDocument outputs joined by "---\n".
func AppendDocument(buf []byte, n *yaml.Node, style SeqStyle) (out []byte, ok bool) {
	if n == nil {
		return buf, false
	}
	e := encoder{out: buf, start: len(buf), wide: style == Wide, ok: true, blankAt: -1}
	root := n
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) != 1 || n.LineComment != "" {
			return buf, false
		}
		root = n.Content[0]
		if n.HeadComment != "" {
			if !e.comment(n.HeadComment, 0) {
				return buf, false
			}
			e.out = append(e.out, '\n')
		}
	}
	if root.HeadComment != "" {
		if !e.comment(root.HeadComment, 0) {
			return buf, false
		}
	}
	e.root(root)
	if n.Kind == yaml.DocumentNode && n.FootComment != "" {
		// after an empty line, whatever the document ended with
		e.blankAt = 0
		e.comment(n.FootComment, 0)
	}
	if !e.ok {
		return buf, false
	}
	return e.out, true
}

// AppendSeqItem appends the bytes n contributes as one item of a top-level
// block sequence: what encoding a document whose root is a SequenceNode
// holding just n produces ("- apiVersion: v1\n  kind: X\n..."), such that
// appending items one by one gives exactly the bytes of encoding the whole
// sequence at once. ok is false, and buf is returned unchanged, when n is
// not handled (a DocumentNode is not an item: pass its root).
func AppendSeqItem(buf []byte, n *yaml.Node, style SeqStyle) (out []byte, ok bool) {
	if n == nil {
		return buf, false
	}
	e := encoder{out: buf, start: len(buf), wide: style == Wide, ok: true, blankAt: -1}
	if n.HeadComment != "" {
		e.comment(n.HeadComment, 0)
	}
	e.item(n, 0)
	// An empty line owed to the next item would make the items depend on
	// each other: left to yaml.v3.
	if !e.ok || e.blankAt != -1 {
		return buf, false
	}
	return e.out, true
}

// Node shapes.

// isBlock reports a collection written in block style: non-empty and not
// flow-styled (inside a flow collection everything is flow).
func isBlock(n *yaml.Node) bool {
	return (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && len(n.Content) > 0 && n.Style&yaml.FlowStyle == 0
}

// supported checks what every node must satisfy: a kind we write, no tag
// that would have to be written, valid anchors, well-formed mappings.
func (e *encoder) supported(n *yaml.Node) bool {
	if n.Style&yaml.TaggedStyle != 0 {
		return e.fail()
	}
	switch n.Kind {
	case yaml.ScalarNode:
	case yaml.AliasNode:
		if !validAnchor(n.Value) {
			return e.fail()
		}
	case yaml.MappingNode:
		if n.Tag != "" && shortTag(n.Tag) != mapTag || len(n.Content)%2 != 0 {
			return e.fail()
		}
	case yaml.SequenceNode:
		if n.Tag != "" && shortTag(n.Tag) != seqTag {
			return e.fail()
		}
	default:
		return e.fail() // a document inside a node, a zero node
	}
	if n.Anchor != "" && n.Kind != yaml.AliasNode && !validAnchor(n.Anchor) {
		return e.fail()
	}
	return true
}

func (e *encoder) fail() bool {
	e.ok = false
	return false
}

// validAnchor: yaml.v3 writes anchor and alias names of ASCII letters,
// digits, '_' and '-' only, and fails on any other.
func validAnchor(a string) bool {
	if a == "" {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Output helpers.

// lineAt starts a line at indent: the empty line a foot comment owes
// there, then the indentation.
func (e *encoder) lineAt(indent int) {
	if e.blankAt == indent {
		e.out = append(e.out, '\n')
	}
	e.blankAt = -1
	e.pad(indent)
}

func (e *encoder) pad(n int) {
	for ; n > 0; n-- {
		e.out = append(e.out, ' ')
	}
}

func (e *encoder) str(s string) { e.out = append(e.out, s...) }

// anchorPrefix writes "&name " before a node on the same line.
func (e *encoder) anchorPrefix(n *yaml.Node) {
	if n.Anchor != "" && n.Kind != yaml.AliasNode {
		e.out = append(e.out, '&')
		e.str(n.Anchor)
		e.out = append(e.out, ' ')
	}
}

// Block context.

// root writes the document's root node at the start of a line.
func (e *encoder) root(n *yaml.Node) {
	if !e.supported(n) {
		return
	}
	if isBlock(n) {
		if n.LineComment != "" || n.FootComment != "" {
			e.fail()
			return
		}
		if n.Anchor != "" {
			e.out = append(e.out, '&')
			e.str(n.Anchor)
			e.out = append(e.out, '\n')
		}
		if n.Kind == yaml.MappingNode {
			e.mapping(n, 0, false)
		} else {
			e.sequence(n, 0, false)
		}
		return
	}
	if n.Anchor != "" && n.Kind != yaml.AliasNode {
		e.out = append(e.out, '&')
		e.str(n.Anchor)
		if !e.writesNothing(n) {
			e.out = append(e.out, ' ')
		}
	}
	e.leafLine(n, -1)
}

// afterIndicator writes a scalar, alias or flow collection that follows
// "key:" or "-" on its line, then ends the line: a space and the node
// (anchor first), or just the anchor for a value written as nothing.
func (e *encoder) afterIndicator(n *yaml.Node, indent int) {
	if n.Anchor != "" && n.Kind != yaml.AliasNode {
		e.str(" &")
		e.str(n.Anchor)
	}
	if !e.writesNothing(n) {
		e.out = append(e.out, ' ')
	}
	e.leafLine(n, indent)
}

// leafLine writes a scalar, alias or flow collection where the cursor
// stands in block context (indent is the enclosing block collection's, -1
// at the root), its line comment and the line's end.
func (e *encoder) leafLine(n *yaml.Node, indent int) {
	if n.Kind != yaml.ScalarNode && n.Kind != yaml.AliasNode && n.FootComment != "" {
		e.fail() // yaml.v3 writes it inside the brackets
		return
	}
	defer e.footComment(n.FootComment, indent)
	switch n.Kind {
	case yaml.AliasNode:
		e.out = append(e.out, '*')
		e.str(n.Value)
	case yaml.ScalarNode:
		if e.scalar(n, max(indent, 0)+2, false, false) {
			return // a block scalar: its comment is on its header, its lines ended
		}
	default:
		e.flowCollection(n, max(indent, 0)+2)
	}
	if n.LineComment != "" {
		e.lineComment(n.LineComment)
		return
	}
	e.out = append(e.out, '\n')
}

// writesNothing reports a node written as no characters at all: an empty
// value in plain style in block context.
func (e *encoder) writesNothing(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.Value != "" {
		return false
	}
	st, ok := scalarStyle(n, false, false)
	return ok && st == stylePlain
}

// key writes a block mapping key and its ':'.
func (e *encoder) key(k *yaml.Node) {
	if k.Kind == yaml.AliasNode {
		if len(k.Value) > maxSimpleKey {
			e.fail()
			return
		}
		e.out = append(e.out, '*')
		e.str(k.Value)
	} else {
		e.anchorPrefix(k)
		e.scalar(k, 0, false, true)
	}
	e.out = append(e.out, ':')
}

// mapping writes the pairs of block mapping n at indent; first says the
// cursor already stands where the first key goes (after "- ").
//
// A head comment on a scalar or alias value is written below the pair (and
// the key's foot comment), above the next key unless that key has a head
// comment of its own, which wins; after the last pair it ends the mapping.
func (e *encoder) mapping(n *yaml.Node, indent int, first bool) {
	valueHead := ""
	for i := 0; i < len(n.Content) && e.ok; i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !e.supported(k) || !e.supported(v) {
			return
		}
		if k.Kind != yaml.ScalarNode && k.Kind != yaml.AliasNode ||
			v.HeadComment != "" && v.Kind != yaml.ScalarNode && v.Kind != yaml.AliasNode {
			e.fail()
			return
		}
		head := k.HeadComment
		if head == "" {
			head = valueHead
		}
		if !e.lineStart(head, indent, first) {
			return
		}
		first = false
		e.key(k)
		e.value(k, v, indent)
		e.footComment(k.FootComment, indent)
		valueHead = v.HeadComment
	}
	if valueHead != "" && e.ok {
		e.comment(valueHead, indent)
	}
}

// value writes v after "key:" in a block mapping at indent.
func (e *encoder) value(k, v *yaml.Node, indent int) {
	if isBlock(v) {
		if v.LineComment != "" || v.FootComment != "" {
			e.fail()
			return
		}
		if v.Anchor != "" {
			e.str(" &")
			e.str(v.Anchor)
		}
		if k.LineComment != "" {
			if !e.lineComment(k.LineComment) {
				return
			}
		} else {
			e.out = append(e.out, '\n')
		}
		if v.Kind == yaml.MappingNode {
			e.mapping(v, indent+2, false)
		} else if e.wide {
			e.sequence(v, indent+2, false)
		} else {
			e.sequence(v, indent, false)
		}
		return
	}
	if k.LineComment != "" {
		if v.LineComment != "" || v.Kind != yaml.ScalarNode {
			e.fail() // two line comments for one line; yaml.v3 drops one
			return
		}
		// The key's comment goes where the value's would.
		c := *v
		c.LineComment = k.LineComment
		v = &c
	}
	e.afterIndicator(v, indent)
}

// sequence writes the items of block sequence n at indent; first says the
// cursor already stands after a "- " of the enclosing sequence.
func (e *encoder) sequence(n *yaml.Node, indent int, first bool) {
	for _, it := range n.Content {
		if !e.ok {
			return
		}
		if !e.lineStart(it.HeadComment, indent, first) {
			return
		}
		first = false
		e.item(it, indent)
	}
}

// item writes one item of a block sequence at indent, starting with its
// "-" (the cursor stands at the item's column).
func (e *encoder) item(n *yaml.Node, indent int) {
	if !e.supported(n) {
		return
	}
	if !isBlock(n) {
		e.out = append(e.out, '-')
		e.afterIndicator(n, indent)
		return
	}
	if n.LineComment != "" || n.FootComment != "" {
		e.fail()
		return
	}
	if n.Anchor != "" {
		if n.Content[0].HeadComment != "" {
			e.fail() // a comment between the anchor and the first key or item
			return
		}
		e.str("- &")
		e.str(n.Anchor)
		e.out = append(e.out, '\n')
		e.lineAt(indent + 2)
	} else {
		e.str("- ")
	}
	if n.Kind == yaml.MappingNode {
		e.mapping(n, indent+2, true)
	} else {
		e.sequence(n, indent+2, true)
	}
}

// Comments.

// lineStart goes to where the next key or item of a block collection at
// indent starts, writing its head comment c above it. first says the
// cursor stands after the "- " of the enclosing item, where the first key
// or item goes; a head comment there takes the rest of that line and the
// key or item starts on the next one.
func (e *encoder) lineStart(c string, indent int, first bool) bool {
	switch {
	case c == "" && first:
	case c == "":
		e.lineAt(indent)
	case first:
		if !e.commentHere(c, indent) {
			return false
		}
		e.lineAt(indent)
	default:
		if !e.comment(c, indent) {
			return false
		}
		e.lineAt(indent)
	}
	return true
}

// commentHere writes comment c from the cursor on, its further lines at
// indent.
func (e *encoder) commentHere(c string, indent int) bool {
	line, rest, more := cutLine(c)
	if !commentWritable(c) {
		return e.fail()
	}
	if line != "" {
		if line[0] != '#' {
			e.str("# ")
		}
		e.str(line)
	}
	e.out = append(e.out, '\n')
	if more && rest != "" {
		return e.commentLines(rest, indent, false)
	}
	return true
}

func cutLine(c string) (line, rest string, more bool) {
	if i := indexByte(c, '\n'); i >= 0 {
		return c[:i], c[i+1:], true
	}
	return c, "", false
}

// comment writes a head comment above a line at indent: each line of c
// gets "# " unless it starts with '#', an empty line stays empty. Comments
// with other line breaks than "\n", at either end, or not UTF-8 are left to
// yaml.v3.
func (e *encoder) comment(c string, indent int) bool {
	if !commentWritable(c) {
		return e.fail()
	}
	return e.commentLines(c, indent, true)
}

// commentLines writes the lines of comment c at indent; an empty line gets
// no indentation unless it is the first and padFirst is set.
func (e *encoder) commentLines(c string, indent int, padFirst bool) bool {
	for first := true; len(c) > 0; first = false {
		line := c
		rest := ""
		if i := indexByte(c, '\n'); i >= 0 {
			line, rest = c[:i], c[i+1:]
		}
		if line != "" || first && padFirst {
			e.lineAt(indent)
		}
		if line != "" {
			if line[0] != '#' {
				e.str("# ")
			}
			e.str(line)
		}
		e.out = append(e.out, '\n')
		c = rest
	}
	return true
}

// footComment writes a foot comment below the lines of a node of the block
// collection at indent, at that indentation, and owes an empty line to the
// next line starting there.
func (e *encoder) footComment(c string, indent int) {
	if c == "" || !e.ok {
		return
	}
	indent = max(indent, 0)
	if e.comment(c, indent) {
		e.blankAt = indent
	}
}

// lineComment writes " # comment" and the line break; a line comment must
// be one line.
func (e *encoder) lineComment(c string) bool {
	if !commentWritable(c) || indexByte(c, '\n') >= 0 {
		return e.fail()
	}
	if n := len(e.out); n > e.start && e.out[n-1] != ' ' && e.out[n-1] != '\n' {
		e.out = append(e.out, ' ') // not at a line start, nor after "- "
	}
	if c[0] != '#' {
		e.str("# ")
	}
	e.str(c)
	e.out = append(e.out, '\n')
	return true
}

func commentWritable(c string) bool {
	if c == "" || !utf8.ValidString(c) {
		return false
	}
	for i := 0; i < len(c); i++ {
		switch c[i] {
		case '\r':
			return false
		case 0xC2, 0xE2:
			if isBreak(c, i) {
				return false
			}
		}
	}
	return true
}

func indexByte(s string, b byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return i
		}
	}
	return -1
}

// Flow context.

// flowCollection writes n ([] or {} when empty) in flow style; inner is
// the indentation of its scalars' continuation lines.
func (e *encoder) flowCollection(n *yaml.Node, inner int) {
	if n.Kind == yaml.SequenceNode {
		e.out = append(e.out, '[')
		for i, it := range n.Content {
			if !e.ok || !e.supported(it) || !e.noComments(it) {
				return
			}
			if i > 0 {
				e.str(", ")
			}
			e.flowNode(it, inner, false)
		}
		e.out = append(e.out, ']')
		return
	}
	e.out = append(e.out, '{')
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !e.ok || !e.supported(k) || !e.supported(v) || !e.noComments(k) || !e.noComments(v) {
			return
		}
		if k.Kind != yaml.ScalarNode && k.Kind != yaml.AliasNode {
			e.fail()
			return
		}
		if i > 0 {
			e.str(", ")
		}
		e.flowNode(k, inner, true)
		e.str(": ")
		e.flowNode(v, inner, false)
	}
	e.out = append(e.out, '}')
}

func (e *encoder) noComments(n *yaml.Node) bool {
	if n.HeadComment != "" || n.LineComment != "" || n.FootComment != "" {
		return e.fail()
	}
	return true
}

// flowNode writes a node inside a flow collection whose scalars continue
// at indent inner.
func (e *encoder) flowNode(n *yaml.Node, inner int, key bool) {
	switch n.Kind {
	case yaml.AliasNode:
		if key && len(n.Value) > maxSimpleKey {
			e.fail()
			return
		}
		e.out = append(e.out, '*')
		e.str(n.Value)
	case yaml.ScalarNode:
		e.anchorPrefix(n)
		e.scalar(n, inner+2, true, key)
	default:
		if key {
			e.fail()
			return
		}
		e.anchorPrefix(n)
		e.flowCollection(n, inner+2)
	}
}

// Scalars.

// Scalar styles.
const (
	stylePlain = iota
	styleSingle
	styleDouble
	styleLiteral
	styleFolded
)

// scalarStyle picks the style yaml.v3 writes scalar n in: the style the
// node asks for, else literal for a value with a line break, else double
// quotes when the value, written plain, would read back with another tag
// than n's !!str, else plain; then the first the value allows of the
// asked style, single quotes and double quotes. ok is false when yaml.v3
// would write a tag (the value does not resolve to n's tag) or a "? " key,
// or cannot write the value (invalid UTF-8: it writes !!binary).
func scalarStyle(n *yaml.Node, flow, key bool) (style int, ok bool) {
	v := n.Value
	quoteForTag := false
	if n.Tag != "" {
		tag := shortTag(n.Tag)
		explicitString := tag == strTag && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0
		if !explicitString && ResolveTag(v) != tag {
			if tag != strTag {
				return 0, false
			}
			quoteForTag = true
		}
	}
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		style = styleDouble
	case n.Style&yaml.SingleQuotedStyle != 0:
		style = styleSingle
	case n.Style&yaml.LiteralStyle != 0:
		style = styleLiteral
	case n.Style&yaml.FoldedStyle != 0:
		style = styleFolded
	case indexByte(v, '\n') >= 0:
		style = styleLiteral
	case quoteForTag:
		style = styleDouble
	}
	f, ok := scalarFeatures(v)
	if !ok {
		return 0, false
	}
	if key && (f&featLineBreak != 0 || len(n.Anchor)+len(v) > maxSimpleKey) {
		return 0, false
	}
	if style == stylePlain {
		plainOK := f&featNoPlainBlock == 0
		if flow {
			plainOK = f&featNoPlainFlow == 0
		}
		if !plainOK || v == "" && (flow || key) {
			style = styleSingle
		}
	}
	if style == styleSingle && f&featNoSingle != 0 {
		style = styleDouble
	}
	if (style == styleLiteral || style == styleFolded) && (f&featNoBlock != 0 || flow || key) {
		style = styleDouble
	}
	return style, true
}

// Features of a scalar value that rule styles out.
const (
	featNoPlainBlock = 1 << iota // cannot be plain in block context
	featNoPlainFlow              // cannot be plain in flow context
	featNoSingle                 // cannot be single-quoted
	featNoBlock                  // cannot be a literal or folded block scalar
	featLineBreak                // holds a line break
)

// plainSafe marks the ASCII bytes that never restrict a style anywhere in
// a value: letters, digits and punctuation without a meaning in YAML.
var plainSafe = func() (t [256]bool) {
	for c := 0x21; c < 0x7F; c++ {
		t[c] = true
	}
	for _, c := range "#,[]{}&*!|>'\"%@`?:" {
		t[c] = false
	}
	return t
}()

// scalarFeatures works out which styles value rules out, from YAML's rules
// for each (as yaml.v3 applies them):
//   - plain: not empty in flow or as a key (handled by the caller); no
//     leading or trailing space, no line break, no tab, no character
//     outside YAML's printable set (for yaml.v3: no C0/C1 control but
//     '\n', no DEL, no surrogate, no BOM, U+FFFE or U+FFFF, nothing beyond
//     the BMP); not starting with an indicator (one of #,[]{}&*!|>'"%@`,
//     or "-", "?", ":" followed by a space or the end; "?" and ":" at all in
//     flow) nor with "---" or "..."; no ": " or " #" inside; in flow, no
//     ",[]{}?:" anywhere;
//   - single quotes: no tab, no unprintable character, no space next to a
//     line break on either side;
//   - block scalars: no unprintable character, no trailing space, no space
//     right before a line break.
//
// ok is false for invalid UTF-8.
func scalarFeatures(v string) (f int, ok bool) {
	if v == "" {
		return featNoPlainFlow | featNoBlock, true
	}
	simple := v[0] != '-' // "-" is safe inside, not first
	for i := 0; i < len(v) && simple; i++ {
		simple = plainSafe[v[i]]
	}
	if simple && !(len(v) >= 3 && v[:3] == "...") {
		return 0, true
	}
	if !utf8.ValidString(v) {
		return 0, false
	}
	if len(v) >= 3 && (v[:3] == "---" || v[:3] == "...") {
		f |= featNoPlainBlock | featNoPlainFlow
	}
	switch v[0] {
	case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		f |= featNoPlainBlock | featNoPlainFlow
	case '?', ':':
		f |= featNoPlainFlow
		if len(v) == 1 || isBlank(v, 1) {
			f |= featNoPlainBlock
		}
	case '-':
		if len(v) == 1 || isBlank(v, 1) {
			f |= featNoPlainBlock | featNoPlainFlow
		}
	}
	prevSpace, prevBreak, prevBlankz := false, false, true
	for i, w := 0, 0; i < len(v); i += w {
		c := v[i]
		w = utf8RuneLen(c)
		if i > 0 {
			switch c {
			case ',', '?', '[', ']', '{', '}':
				f |= featNoPlainFlow
			case ':':
				f |= featNoPlainFlow
				if i+1 == len(v) || isBlank(v, i+1) {
					f |= featNoPlainBlock
				}
			case '#':
				if prevBlankz {
					f |= featNoPlainBlock | featNoPlainFlow
				}
			}
		}
		brk := isBreak(v, i)
		switch {
		case c == '\t':
			f |= featNoPlainBlock | featNoPlainFlow | featNoSingle
		case !isPrintable(v, i):
			f |= featNoPlainBlock | featNoPlainFlow | featNoSingle | featNoBlock
		}
		switch {
		case c == ' ':
			if i == 0 {
				f |= featNoPlainBlock | featNoPlainFlow
			}
			if i+w == len(v) {
				f |= featNoPlainBlock | featNoPlainFlow | featNoBlock
			}
			if prevBreak {
				f |= featNoPlainBlock | featNoPlainFlow | featNoSingle
			}
			prevSpace, prevBreak = true, false
		case brk:
			f |= featLineBreak | featNoPlainBlock | featNoPlainFlow
			if prevSpace {
				f |= featNoSingle | featNoBlock
			}
			prevSpace, prevBreak = false, true
		default:
			prevSpace, prevBreak = false, false
		}
		prevBlankz = c == ' ' || c == '\t' || c == 0 || brk
	}
	return f, true
}

// utf8RuneLen is the length of the UTF-8 sequence that starts with lead
// byte c.
func utf8RuneLen(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c < 0xE0:
		return 2
	case c < 0xF0:
		return 3
	}
	return 4
}

// isPrintable is YAML's printable set as yaml.v3's writer draws it, for
// the character at v[i] of valid UTF-8: '\n', ASCII 0x20-0x7E, and from
// U+00A0 to U+FFFD but the surrogates, U+FEFF (the BOM), U+FFFE, U+FFFF.
// yaml.v3 counts no character beyond U+FFFF as printable.
func isPrintable(v string, i int) bool {
	c := v[i]
	switch {
	case c == '\n' || c >= 0x20 && c <= 0x7E:
		return true
	case c < 0x80:
		return false
	}
	r, _ := utf8.DecodeRuneInString(v[i:])
	switch {
	case r < 0xA0 || r > 0xFFFD:
		return false
	case r >= 0xD800 && r <= 0xDFFF, r == 0xFEFF:
		return false
	}
	return true
}

// isBreak reports a line break at v[i]: LF, CR, NEL, LS or PS.
func isBreak(v string, i int) bool {
	switch v[i] {
	case '\n', '\r':
		return true
	case 0xC2:
		return i+1 < len(v) && v[i+1] == 0x85
	case 0xE2:
		return i+2 < len(v) && v[i+1] == 0x80 && (v[i+2] == 0xA8 || v[i+2] == 0xA9)
	}
	return false
}

func isBlank(v string, i int) bool { return v[i] == ' ' || v[i] == '\t' }

// scalar writes scalar n in its style; indent is where continuation lines
// of multi-line scalars start. It reports a block scalar, which has written
// n's line comment and ended its last line.
func (e *encoder) scalar(n *yaml.Node, indent int, flow, key bool) (block bool) {
	style, ok := scalarStyle(n, flow, key)
	if !ok {
		e.fail()
		return false
	}
	switch style {
	case stylePlain:
		e.str(n.Value)
	case styleSingle:
		e.singleQuoted(n.Value, indent)
	case styleDouble:
		e.doubleQuoted(n.Value)
	case styleLiteral, styleFolded:
		e.blockScalar(n.Value, n.LineComment, indent, style == styleFolded)
		return true
	}
	return false
}

// singleQuoted writes 'value': a quote doubled, a lone line feed written as
// an empty line (a single one would fold into a space), continuation lines
// indented to indent.
func (e *encoder) singleQuoted(v string, indent int) {
	e.out = append(e.out, '\'')
	afterBreak := false
	for i := 0; i < len(v); {
		w := utf8RuneLen(v[i])
		switch {
		case isBreak(v, i):
			if !afterBreak && v[i] == '\n' {
				e.out = append(e.out, '\n')
			}
			e.out = append(e.out, v[i:i+w]...)
			afterBreak = true
		default:
			if afterBreak && v[i] != ' ' {
				e.lineAt(indent)
			}
			if v[i] == '\'' {
				e.out = append(e.out, '\'')
			}
			e.out = append(e.out, v[i:i+w]...)
			if v[i] != ' ' {
				afterBreak = false
			}
		}
		i += w
	}
	e.out = append(e.out, '\'')
}

const hexDigits = "0123456789ABCDEF"

// doubleQuoted writes "value" with YAML's escapes for what cannot stand
// as it is: '"', '\', line breaks, and characters outside the printable
// set (\0 \a \b \t \n \v \f \r \e \N \_ \L \P where YAML has a short
// escape, else \xXX, \uXXXX or \UXXXXXXXX). yaml.v3 escapes every
// character of a value that starts with a BOM.
func (e *encoder) doubleQuoted(v string) {
	e.out = append(e.out, '"')
	escapeAll := len(v) >= 3 && v[:3] == "\ufeff"
	for i := 0; i < len(v); {
		c := v[i]
		if !escapeAll && c >= 0x20 && c < 0x7F && c != '"' && c != '\\' {
			j := i + 1
			for j < len(v) && v[j] >= 0x20 && v[j] < 0x7F && v[j] != '"' && v[j] != '\\' {
				j++
			}
			e.out = append(e.out, v[i:j]...)
			i = j
			continue
		}
		r, w := utf8.DecodeRuneInString(v[i:])
		if !escapeAll && c != '"' && c != '\\' && isPrintable(v, i) && !isBreak(v, i) {
			e.out = append(e.out, v[i:i+w]...)
			i += w
			continue
		}
		i += w
		e.out = append(e.out, '\\')
		if esc := shortEscape(r); esc != 0 {
			e.out = append(e.out, esc)
			continue
		}
		digits := 8
		switch {
		case r <= 0xFF:
			e.out, digits = append(e.out, 'x'), 2
		case r <= 0xFFFF:
			e.out, digits = append(e.out, 'u'), 4
		default:
			e.out = append(e.out, 'U')
		}
		for shift := 4 * (digits - 1); shift >= 0; shift -= 4 {
			e.out = append(e.out, hexDigits[(r>>shift)&0xF])
		}
	}
	e.out = append(e.out, '"')
}

// shortEscape is the letter of YAML's one-letter escape for r, or 0.
func shortEscape(r rune) byte {
	switch r {
	case 0:
		return '0'
	case '\a':
		return 'a'
	case '\b':
		return 'b'
	case '\t':
		return 't'
	case '\n':
		return 'n'
	case '\v':
		return 'v'
	case '\f':
		return 'f'
	case '\r':
		return 'r'
	case 0x1B:
		return 'e'
	case '"':
		return '"'
	case '\\':
		return '\\'
	case 0x85:
		return 'N'
	case 0xA0:
		return '_'
	case 0x2028:
		return 'L'
	case 0x2029:
		return 'P'
	}
	return 0
}

// blockScalar writes a literal ("|") or folded (">") scalar: the header
// with an indentation indicator when the value starts with a space or a
// break, the chomping indicator ("-" without a final break, "+" for more
// than one), the line comment or a break, then the lines indented to
// indent (empty lines stay empty). Folded style doubles a line feed that
// ends a line of text so that it does not fold into a space (yaml.v3 does
// so only when the value's first text character is not a space).
func (e *encoder) blockScalar(v, comment string, indent int, folded bool) {
	if folded {
		e.out = append(e.out, '>')
	} else {
		e.out = append(e.out, '|')
	}
	if v[0] == ' ' || isBreak(v, 0) {
		e.out = append(e.out, '2')
	}
	last := len(v) - 1
	for v[last]&0xC0 == 0x80 {
		last--
	}
	switch {
	case !isBreak(v, last):
		e.out = append(e.out, '-')
	case last == 0:
		e.out = append(e.out, '+')
	default:
		prev := last - 1
		for v[prev]&0xC0 == 0x80 {
			prev--
		}
		if isBreak(v, prev) {
			e.out = append(e.out, '+')
		}
	}
	if comment != "" {
		if !e.lineComment(comment) {
			return
		}
	} else {
		e.out = append(e.out, '\n')
	}
	doubleFolds := false
	if folded {
		k := 0
		for k < len(v) && isBreak(v, k) {
			k += utf8RuneLen(v[k])
		}
		doubleFolds = k < len(v) && !(v[k] == ' ' || v[k] == '\t' || v[k] == 0)
	}
	afterBreak, leadingBlank := true, true
	for i := 0; i < len(v); {
		w := utf8RuneLen(v[i])
		if isBreak(v, i) {
			if folded && !afterBreak && !leadingBlank && v[i] == '\n' && doubleFolds {
				e.out = append(e.out, '\n')
			}
			e.out = append(e.out, v[i:i+w]...)
			afterBreak = true
			i += w
			continue
		}
		if afterBreak {
			e.lineAt(indent)
			leadingBlank = v[i] == ' ' || v[i] == '\t'
		}
		j := i + w
		if !folded {
			for j < len(v) && !isBreak(v, j) {
				j++
			}
		}
		e.out = append(e.out, v[i:j]...)
		afterBreak = false
		i = j
	}
	if !afterBreak {
		e.out = append(e.out, '\n')
	}
}
