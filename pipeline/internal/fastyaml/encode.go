package fastyaml

// The encoder below is a direct port of the parts of yaml.v3's encoder
// (encode.go: (*encoder).node) and emitter (emitterc.go: the document, block
// and flow collection states, yaml_emitter_analyze_scalar,
// yaml_emitter_select_scalar_style, the plain, single-quoted, double-quoted,
// literal and folded writers, the comment processing, write_indent and
// write_indicator) from go.yaml.in/yaml/v3 v3.0.5 (Apache-2.0 and MIT,
// Copyright (c) 2011-2019 Canonical Ltd, Copyright (c) 2006-2010 Kirill
// Simonov), walking the node tree instead of queueing events. The emitter
// state (indent, column, whitespace, indention, foot_indent, flow level and
// the pending comments) is kept exactly as yaml.v3 keeps it, so the bytes are
// the same. Comments travel as the event stream carries them (head and tail
// on start events, line and foot on end events, a key's foot comment as the
// next key's tail) and come out where yaml.v3 puts them. Tags that would be
// written and complex ("? ") keys are left out: a node that needs them makes
// the encoder report "not handled". Empty collections go
// through the flow states, as the emitter writes them as {} and []. best_width
// is -1 in v3.0.5 (yaml_emitter_t is initialised with it and the encoder
// never sets it), so the emitter never folds lines and the writers below
// have no folding branches.

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

const bestIndent = 2

// Scalar styles, as yaml.v3's emitter names them.
const (
	stylePlain = iota
	styleSingle
	styleDouble
	styleLiteral
	styleFolded
)

type emitter struct {
	buf        []byte
	indent     int
	column     int
	whitespace bool
	indention  bool
	compact    bool
	flow       int // flow_level: nesting depth of flow collections
	footIndent int // foot_indent

	// Comments waiting to be written, as yaml_emitter_analyze_event leaves
	// them: set from each event that carries one, cleared when written.
	headComment, lineComment, footComment, tailComment, keyLineComment string
}

func newEmitter(buf []byte, style SeqStyle) emitter {
	return emitter{
		buf:        buf,
		indent:     -1,
		whitespace: true,
		indention:  true,
		compact:    style == Compact,
		footIndent: -1,
	}
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
// the handled subset.
//
// Documents written one after another by a single yaml.v3 encoder (as
// kio.ByteWriter does) are the AppendDocument outputs joined by "---\n":
// AppendDocument declines documents that would leave a comment pending for
// the next one.
func AppendDocument(buf []byte, n *yaml.Node, style SeqStyle) (out []byte, ok bool) {
	if n == nil {
		return buf, false
	}
	e := newEmitter(buf, style)
	root := n
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) != 1 || !validComment(n.HeadComment) || !validComment(n.FootComment) {
			return buf, false
		}
		root = n.Content[0]
		// yaml_emitter_emit_document_start (implicit, first document).
		if n.HeadComment != "" {
			e.headComment = n.HeadComment
			e.processHeadComment()
			e.putBreak()
		}
	}
	// yaml_emitter_emit_document_content.
	if !e.startEvent(root, "", false) {
		return buf, false
	}
	e.processHeadComment()
	coll, flow, ok := e.emitNode(root, false, false, false)
	if !ok {
		return buf, false
	}
	e.processLineComment()
	e.processFootComment()
	if coll && !e.body(root, false, flow, false) {
		return buf, false
	}
	// yaml_emitter_emit_document_end (implicit).
	if n.Kind == yaml.DocumentNode && n.FootComment != "" {
		e.footComment = n.FootComment
	}
	e.footIndent = 0
	e.processFootComment()
	e.footIndent = -1
	e.writeIndent()
	if e.pending() || e.headComment != "" || e.keyLineComment != "" {
		return buf, false
	}
	return e.buf, true
}

// AppendSeqItem appends the bytes n contributes as one item of a top-level
// block sequence: what encoding a document whose root is a SequenceNode
// holding just n produces ("- apiVersion: v1\n  kind: X\n..."), such that
// appending items one by one gives exactly the bytes of encoding the whole
// sequence at once. ok is false, and buf is returned unchanged, when n is
// not handled (a DocumentNode is not an item: pass its root).
//
// That composes because the emitter state after each item's closing line
// break (column 0, at a line start, after whitespace, no comment pending) is
// the state it has before the first item; items that would leave a comment
// pending or a foot comment's blank line owed fall back.
func AppendSeqItem(buf []byte, n *yaml.Node, style SeqStyle) (out []byte, ok bool) {
	if n == nil {
		return buf, false
	}
	e := newEmitter(buf, style)
	e.indent = 0 // the root sequence's indentation
	// yaml_emitter_emit_block_sequence_item.
	if !e.startEvent(n, "", false) {
		return buf, false
	}
	e.processHeadComment()
	e.writeIndent()
	e.indicator("-", true, false, true)
	coll, flow, ok := e.emitNode(n, true, false, false)
	if !ok {
		return buf, false
	}
	e.processLineComment()
	e.processFootComment()
	if coll && !e.body(n, true, flow, false) {
		return buf, false
	}
	if e.pending() || e.headComment != "" || e.keyLineComment != "" || e.footIndent != -1 {
		return buf, false
	}
	e.indent = -1
	e.writeIndent()
	return e.buf, true
}

// validComment: yaml.v3 writes comments character by character and panics
// on invalid UTF-8.
func validComment(c string) bool {
	return c == "" || utf8.ValidString(c)
}

// startEvent is yaml_emitter_analyze_event's comment handling for the
// event that starts n (what (*encoder).node attaches to it): tail is the
// previous key's foot comment, stripFoot drops n's foot comment (a key's,
// which the encoder moves to the next key's tail). It reports false for
// invalid UTF-8 in a comment.
func (e *emitter) startEvent(n *yaml.Node, tail string, stripFoot bool) bool {
	if n.HeadComment == "" && n.LineComment == "" && n.FootComment == "" && tail == "" {
		return true
	}
	if !validComment(n.HeadComment) || !validComment(n.LineComment) || !validComment(n.FootComment) || !validComment(tail) {
		return false
	}
	if n.HeadComment != "" {
		e.headComment = n.HeadComment
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.LineComment != "" {
			e.lineComment = n.LineComment
		}
		if n.FootComment != "" && !stripFoot {
			e.footComment = n.FootComment
		}
		if tail != "" {
			e.tailComment = tail
		}
	case yaml.MappingNode:
		if tail != "" {
			e.tailComment = tail
		}
	case yaml.AliasNode:
		// The encoder gives an alias event no tail comment.
		if n.LineComment != "" {
			e.lineComment = n.LineComment
		}
		if n.FootComment != "" && !stripFoot {
			e.footComment = n.FootComment
		}
	}
	return true
}

// endEvent is the analysis of a collection's end event: a mapping's end
// carries the last key's foot comment as its tail, and both carry the
// collection's line and foot comments.
func (e *emitter) endEvent(n *yaml.Node, tail string) {
	if tail != "" {
		e.tailComment = tail
	}
	if n.LineComment != "" {
		e.lineComment = n.LineComment
	}
	if n.FootComment != "" {
		e.footComment = n.FootComment
	}
}

// pending reports a line, foot or tail comment waiting (what the flow
// states check to pick their TRAIL variants).
func (e *emitter) pending() bool {
	return e.lineComment != "" || e.footComment != "" || e.tailComment != ""
}

// putBreak is put_break.
func (e *emitter) putBreak() {
	e.buf = append(e.buf, '\n')
	e.column = 0
	e.indention = true
}

// writeIndent is yaml_emitter_write_indent.
func (e *emitter) writeIndent() {
	indent := e.indent
	if indent < 0 {
		indent = 0
	}
	if !e.indention || e.column > indent || (e.column == indent && !e.whitespace) {
		e.putBreak()
	}
	if e.footIndent == indent {
		e.putBreak()
	}
	for e.column < indent {
		e.buf = append(e.buf, ' ')
		e.column++
	}
	e.whitespace = true
	e.footIndent = -1
}

// indicator is yaml_emitter_write_indicator for an ASCII indicator.
func (e *emitter) indicator(ind string, needWhitespace, isWhitespace, isIndention bool) {
	if needWhitespace && !e.whitespace {
		e.buf = append(e.buf, ' ')
		e.column++
	}
	e.buf = append(e.buf, ind...)
	e.column += len(ind)
	e.whitespace = isWhitespace
	e.indention = e.indention && isIndention
}

// processHeadComment is yaml_emitter_process_head_comment.
func (e *emitter) processHeadComment() {
	if e.tailComment != "" {
		e.writeIndent()
		e.writeComment(e.tailComment)
		e.tailComment = ""
		e.footIndent = max(e.indent, 0)
	}
	if e.headComment == "" {
		return
	}
	e.writeIndent()
	e.writeComment(e.headComment)
	e.headComment = ""
}

// processLineComment is yaml_emitter_process_line_comment.
func (e *emitter) processLineComment() {
	if e.lineComment == "" {
		return
	}
	if !e.whitespace {
		e.buf = append(e.buf, ' ')
		e.column++
	}
	e.writeComment(e.lineComment)
	e.lineComment = ""
}

// lineCommentLinebreak is yaml_emitter_process_line_comment_linebreak(true),
// which block scalars call after their header.
func (e *emitter) lineCommentLinebreak() {
	if e.lineComment == "" {
		e.putBreak()
		return
	}
	e.processLineComment()
}

// processFootComment is yaml_emitter_process_foot_comment.
func (e *emitter) processFootComment() {
	if e.footComment == "" {
		return
	}
	e.writeIndent()
	e.writeComment(e.footComment)
	e.footComment = ""
	e.footIndent = max(e.indent, 0)
}

// writeComment is yaml_emitter_write_comment.
func (e *emitter) writeComment(comment string) {
	breaks := false
	pound := false
	for i := 0; i < len(comment); {
		if isBreak(comment, i) {
			i = e.writeBreak(comment, i)
			breaks = true
			pound = false
		} else {
			if breaks {
				e.writeIndent()
			}
			if !pound {
				if comment[i] != '#' {
					e.buf = append(e.buf, '#', ' ')
					e.column += 2
				}
				pound = true
			}
			i = e.write(comment, i)
			e.indention = false
			breaks = false
		}
	}
	if !breaks {
		e.putBreak()
	}
	e.whitespace = true
}

// increaseIndent is yaml_emitter_increase_indent_compact; inSeq says the
// state on top of the stack is BLOCK_SEQUENCE_ITEM (the node is an item of
// a block sequence). It returns the indentation to restore.
func (e *emitter) increaseIndent(flow, inSeq, compactSeq bool) int {
	saved := e.indent
	if e.indent < 0 {
		if flow {
			e.indent = bestIndent
		} else {
			e.indent = 0
		}
	} else if inSeq {
		e.indent += 2
	} else {
		e.indent = bestIndent * ((e.indent + bestIndent) / bestIndent)
		if compactSeq {
			e.indent -= 2
		}
	}
	return saved
}

// emitNode is yaml_emitter_emit_node for the event that starts n, in the
// context it is given: inSeq (item of a block sequence: the state on top of
// the stack is BLOCK_SEQUENCE_ITEM), mapping (key or value of a mapping),
// simpleKey (a mapping key). A scalar is written; for a collection it
// reports coll, and flow when the flow states take it (flow_level > 0, flow
// style or empty), and the caller runs body once its own state function has
// finished with the start event. ok is false for anything outside the
// handled subset.
func (e *emitter) emitNode(n *yaml.Node, inSeq, mapping, simpleKey bool) (coll, flow, ok bool) {
	if n.Style&yaml.TaggedStyle != 0 {
		return false, false, false
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Anchor != "" && !validAnchor(n.Anchor) {
			return false, false, false
		}
		return false, false, e.scalar(n, inSeq, simpleKey)
	case yaml.AliasNode:
		// yaml_emitter_emit_alias; the encoder sends node.Value as the
		// alias name and ignores everything else but the comments.
		if !validAnchor(n.Value) || simpleKey && len(n.Value) > 128 {
			return false, false, false
		}
		e.processAnchor("*", n.Value)
		return false, false, true
	case yaml.MappingNode:
		if simpleKey || (n.Tag != "" && shortTag(n.Tag) != mapTag) || len(n.Content)%2 != 0 {
			return false, false, false
		}
	case yaml.SequenceNode:
		if simpleKey || (n.Tag != "" && shortTag(n.Tag) != seqTag) {
			return false, false, false
		}
	default:
		return false, false, false // documents inside nodes, zero nodes
	}
	if n.Anchor != "" {
		if !validAnchor(n.Anchor) {
			return false, false, false
		}
		e.processAnchor("&", n.Anchor)
	}
	// check_empty_mapping / check_empty_sequence: an empty collection is
	// written in flow style.
	return true, e.flow > 0 || n.Style&yaml.FlowStyle != 0 || len(n.Content) == 0, true
}

// validAnchor is yaml_emitter_analyze_anchor's check: a non-empty name of
// ASCII letters, digits, '_' and '-' (yaml.v3 fails on anything else).
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

// processAnchor is yaml_emitter_process_anchor with
// yaml_emitter_write_anchor: "&name" or "*name".
func (e *emitter) processAnchor(indicator, name string) {
	e.indicator(indicator, true, false, false)
	e.buf = append(e.buf, name...)
	e.column += len(name)
	e.whitespace = false
	e.indention = false
}

// body emits the children and the end event of collection n, which
// emitNode started: inSeq and mapping are the context emitNode was given.
func (e *emitter) body(n *yaml.Node, inSeq, flow, mapping bool) bool {
	switch {
	case n.Kind == yaml.SequenceNode && !flow:
		return e.blockSequence(n, inSeq, mapping)
	case n.Kind == yaml.MappingNode && !flow:
		return e.blockMapping(n, inSeq)
	case n.Kind == yaml.SequenceNode:
		return e.flowSequence(n, inSeq)
	default:
		return e.flowMapping(n, inSeq)
	}
}

// blockSequence is yaml_emitter_emit_block_sequence_item.
func (e *emitter) blockSequence(n *yaml.Node, inSeq, mapping bool) bool {
	compactSeq := mapping && (e.column == 0 || !e.indention) && e.compact
	saved := e.increaseIndent(false, inSeq, compactSeq)
	for _, item := range n.Content {
		if !e.startEvent(item, "", false) {
			return false
		}
		e.processHeadComment()
		e.writeIndent()
		e.indicator("-", true, false, true)
		coll, flow, ok := e.emitNode(item, true, false, false)
		if !ok {
			return false
		}
		e.processLineComment()
		e.processFootComment()
		if coll && !e.body(item, true, flow, false) {
			return false
		}
	}
	e.endEvent(n, "")
	e.indent = saved
	return true
}

// blockMapping is yaml_emitter_emit_block_mapping_key and
// yaml_emitter_emit_block_mapping_value for simple keys.
func (e *emitter) blockMapping(n *yaml.Node, inSeq bool) bool {
	saved := e.increaseIndent(false, inSeq, false)
	tail := ""
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode && k.Kind != yaml.AliasNode {
			return false // complex key
		}
		if !e.startEvent(k, tail, true) {
			return false
		}
		tail = k.FootComment
		e.processHeadComment()
		e.writeIndent()
		if e.lineComment != "" {
			e.keyLineComment = e.lineComment
			e.lineComment = ""
		}
		if _, _, ok := e.emitNode(k, false, true, true); !ok {
			return false
		}

		if !e.startEvent(v, "", false) {
			return false
		}
		e.indicator(":", false, false, false)
		if e.keyLineComment != "" {
			switch {
			case v.Kind == yaml.ScalarNode:
				if e.lineComment == "" {
					e.lineComment = e.keyLineComment
					e.keyLineComment = ""
				}
			case (v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode) && v.Style&yaml.FlowStyle == 0:
				// An indented block follows: the key's line comment now.
				e.lineComment, e.keyLineComment = e.keyLineComment, e.lineComment
				e.processLineComment()
				e.lineComment, e.keyLineComment = e.keyLineComment, e.lineComment
			}
		}
		coll, flow, ok := e.emitNode(v, false, true, false)
		if !ok {
			return false
		}
		e.processLineComment()
		e.processFootComment()
		if coll && !e.body(v, false, flow, true) {
			return false
		}
	}
	e.endEvent(n, tail)
	e.processHeadComment()
	e.indent = saved
	return true
}

// flowSequence is yaml_emitter_emit_flow_sequence_item (not canonical, no
// folding).
func (e *emitter) flowSequence(n *yaml.Node, inSeq bool) bool {
	e.indicator("[", true, true, false)
	saved := e.increaseIndent(true, inSeq, false)
	e.flow++
	trail := false
	for i, item := range n.Content {
		if !e.startEvent(item, "", false) {
			return false
		}
		if i > 0 && !trail {
			e.indicator(",", false, false, false)
		}
		e.processHeadComment()
		if e.column == 0 {
			e.writeIndent()
		}
		trail = e.pending()
		coll, flow, ok := e.emitNode(item, false, false, false)
		if !ok {
			return false
		}
		if e.pending() {
			e.indicator(",", false, false, false)
		}
		e.processLineComment()
		e.processFootComment()
		if coll && !e.body(item, false, flow, false) {
			return false
		}
	}
	e.endEvent(n, "")
	e.flow--
	e.indent = saved
	if e.column == 0 {
		e.writeIndent()
	}
	e.indicator("]", false, false, false)
	e.processLineComment()
	e.processFootComment()
	return true
}

// flowMapping is yaml_emitter_emit_flow_mapping_key and _value for simple
// keys (not canonical, no folding).
func (e *emitter) flowMapping(n *yaml.Node, inSeq bool) bool {
	e.indicator("{", true, true, false)
	saved := e.increaseIndent(true, inSeq, false)
	e.flow++
	trail := false
	tail := ""
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode && k.Kind != yaml.AliasNode {
			return false // complex key
		}
		if !e.startEvent(k, tail, true) {
			return false
		}
		tail = k.FootComment
		if i > 0 && !trail {
			e.indicator(",", false, false, false)
		}
		e.processHeadComment()
		if e.column == 0 {
			e.writeIndent()
		}
		if _, _, ok := e.emitNode(k, false, true, true); !ok {
			return false
		}

		if !e.startEvent(v, "", false) {
			return false
		}
		e.indicator(":", false, false, false)
		trail = e.pending()
		coll, flow, ok := e.emitNode(v, false, true, false)
		if !ok {
			return false
		}
		if e.pending() {
			e.indicator(",", false, false, false)
		}
		e.processLineComment()
		e.processFootComment()
		if coll && !e.body(v, false, flow, true) {
			return false
		}
	}
	e.endEvent(n, tail)
	if e.headComment != "" || e.footComment != "" || e.tailComment != "" {
		if len(n.Content) > 0 && !trail {
			e.indicator(",", false, false, false)
		}
	}
	e.processHeadComment()
	e.flow--
	e.indent = saved
	e.indicator("}", false, false, false)
	e.processLineComment()
	e.processFootComment()
	return true
}

// scalar emits a scalar node: the style choice of (*encoder).node, then
// yaml_emitter_emit_scalar.
func (e *emitter) scalar(n *yaml.Node, inSeq, simpleKey bool) bool {
	value := n.Value
	forceQuoting := false
	if n.Tag != "" {
		stag := shortTag(n.Tag)
		if !(stag == strTag && n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0) {
			rtag := ResolveTag(value)
			if rtag != stag {
				if stag != strTag {
					return false // the tag would be written
				}
				forceQuoting = true
			}
		}
	}

	var style int
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		style = styleDouble
	case n.Style&yaml.SingleQuotedStyle != 0:
		style = styleSingle
	case n.Style&yaml.LiteralStyle != 0:
		style = styleLiteral
	case n.Style&yaml.FoldedStyle != 0:
		style = styleFolded
	case containsNewline(value):
		style = styleLiteral
	case forceQuoting:
		style = styleDouble
	default:
		style = stylePlain
	}

	a, ok := analyzeScalar(value)
	if !ok {
		return false // invalid UTF-8: yaml.v3 writes !!binary
	}
	if simpleKey && (a.multiline || len(n.Anchor)+len(value) > 128) {
		return false // yaml_emitter_check_simple_key fails: "? " key
	}

	// yaml_emitter_select_scalar_style (the event is implicit, so no tag
	// is ever written).
	if style == stylePlain {
		if e.flow > 0 && !a.flowPlainAllowed || e.flow == 0 && !a.blockPlainAllowed {
			style = styleSingle
		}
		if len(value) == 0 && (e.flow > 0 || simpleKey) {
			style = styleSingle
		}
	}
	if style == styleSingle && !a.singleQuotedAllowed {
		style = styleDouble
	}
	if (style == styleLiteral || style == styleFolded) && (!a.blockAllowed || e.flow > 0 || simpleKey) {
		style = styleDouble
	}

	if n.Anchor != "" {
		e.processAnchor("&", n.Anchor)
	}
	saved := e.increaseIndent(true, inSeq, false)
	switch style {
	case stylePlain:
		e.writePlain(value, a.runes)
	case styleSingle:
		e.writeSingleQuoted(value)
	case styleDouble:
		e.writeDoubleQuoted(value)
	case styleLiteral:
		e.writeLiteral(value)
	case styleFolded:
		e.writeFolded(value)
	}
	e.indent = saved
	return true
}

func containsNewline(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return true
		}
	}
	return false
}

type scalarAnalysis struct {
	multiline           bool
	flowPlainAllowed    bool
	blockPlainAllowed   bool
	singleQuotedAllowed bool
	blockAllowed        bool
	runes               int // characters, for the column
}

// asciiClass classifies ASCII bytes for the scalar analysis fast path.
const (
	clsPlain   = 0 // letters, digits and the like: no effect
	clsSpecial = 1 // needs the general rules
)

var asciiClass = func() (t [256]byte) {
	for c := 0; c < 256; c++ {
		if c < 0x20 || c >= 0x7F {
			t[c] = clsSpecial
		}
	}
	for _, c := range "#,[]{}&*!|>'\"%@`?:- " {
		t[c] = clsSpecial
	}
	return
}()

// analyzeScalar is yaml_emitter_analyze_scalar (with unicode output on).
// ok is false for invalid UTF-8.
func analyzeScalar(value string) (a scalarAnalysis, ok bool) {
	if len(value) == 0 {
		return scalarAnalysis{blockPlainAllowed: true, singleQuotedAllowed: true}, true
	}
	// Fast path: nothing but letters, digits and harmless punctuation.
	simple := true
	for i := 0; i < len(value); i++ {
		if asciiClass[value[i]] != clsPlain {
			simple = false
			break
		}
	}
	if simple && !(len(value) >= 3 && value[:3] == "...") {
		return scalarAnalysis{flowPlainAllowed: true, blockPlainAllowed: true, singleQuotedAllowed: true, blockAllowed: true, runes: len(value)}, true
	}
	if !utf8.ValidString(value) {
		return a, false
	}

	var (
		blockIndicators   bool
		flowIndicators    bool
		lineBreaks        bool
		specialCharacters bool
		tabCharacters     bool

		leadingSpace  bool
		leadingBreak  bool
		trailingSpace bool
		trailingBreak bool
		breakSpace    bool
		spaceBreak    bool

		precededByWhitespace bool
		followedByWhitespace bool
		previousSpace        bool
		previousBreak        bool
	)
	if len(value) >= 3 && (value[:3] == "---" || value[:3] == "...") {
		blockIndicators = true
		flowIndicators = true
	}
	precededByWhitespace = true
	runes := 0
	for i, w := 0, 0; i < len(value); i += w {
		runes++
		w = width(value[i])
		followedByWhitespace = i+w >= len(value) || isBlank(value, i+w)
		if i == 0 {
			switch value[i] {
			case '#', ',', '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
				flowIndicators = true
				blockIndicators = true
			case '?', ':':
				flowIndicators = true
				if followedByWhitespace {
					blockIndicators = true
				}
			case '-':
				if followedByWhitespace {
					flowIndicators = true
					blockIndicators = true
				}
			}
		} else {
			switch value[i] {
			case ',', '?', '[', ']', '{', '}':
				flowIndicators = true
			case ':':
				flowIndicators = true
				if followedByWhitespace {
					blockIndicators = true
				}
			case '#':
				if precededByWhitespace {
					flowIndicators = true
					blockIndicators = true
				}
			}
		}

		if value[i] == '\t' {
			tabCharacters = true
		} else if !isPrintable(value, i) {
			specialCharacters = true
		}
		if value[i] == ' ' {
			if i == 0 {
				leadingSpace = true
			}
			if i+w == len(value) {
				trailingSpace = true
			}
			if previousBreak {
				breakSpace = true
			}
			previousSpace = true
			previousBreak = false
		} else if isBreak(value, i) {
			lineBreaks = true
			if i == 0 {
				leadingBreak = true
			}
			if i+w == len(value) {
				trailingBreak = true
			}
			if previousSpace {
				spaceBreak = true
			}
			previousSpace = false
			previousBreak = true
		} else {
			previousSpace = false
			previousBreak = false
		}
		precededByWhitespace = isBlankz(value, i)
	}
	a = scalarAnalysis{
		multiline:           lineBreaks,
		flowPlainAllowed:    true,
		blockPlainAllowed:   true,
		singleQuotedAllowed: true,
		blockAllowed:        true,
		runes:               runes,
	}
	if leadingSpace || leadingBreak || trailingSpace || trailingBreak {
		a.flowPlainAllowed = false
		a.blockPlainAllowed = false
	}
	if trailingSpace {
		a.blockAllowed = false
	}
	if breakSpace {
		a.flowPlainAllowed = false
		a.blockPlainAllowed = false
		a.singleQuotedAllowed = false
	}
	if spaceBreak || tabCharacters || specialCharacters {
		a.flowPlainAllowed = false
		a.blockPlainAllowed = false
		a.singleQuotedAllowed = false
	}
	if spaceBreak || specialCharacters {
		a.blockAllowed = false
	}
	if lineBreaks {
		a.flowPlainAllowed = false
		a.blockPlainAllowed = false
	}
	if flowIndicators {
		a.flowPlainAllowed = false
	}
	if blockIndicators {
		a.blockPlainAllowed = false
	}
	return a, true
}

// width, isPrintable, isBreak, isBlank and isBlankz are yamlprivateh.go's
// width, is_printable, is_break, is_blank and is_blankz on a valid UTF-8
// string (so the continuation bytes they read exist).
func width(b byte) int {
	if b&0x80 == 0x00 {
		return 1
	}
	if b&0xE0 == 0xC0 {
		return 2
	}
	if b&0xF0 == 0xE0 {
		return 3
	}
	if b&0xF8 == 0xF0 {
		return 4
	}
	return 0
}

func isPrintable(b string, i int) bool {
	return ((b[i] == 0x0A) || // . == #x0A
		(b[i] >= 0x20 && b[i] <= 0x7E) || // #x20 <= . <= #x7E
		(b[i] == 0xC2 && b[i+1] >= 0xA0) || // #0xA0 <= . <= #xD7FF
		(b[i] > 0xC2 && b[i] < 0xED) ||
		(b[i] == 0xED && b[i+1] < 0xA0) ||
		(b[i] == 0xEE) ||
		(b[i] == 0xEF && // #xE000 <= . <= #xFFFD
			!(b[i+1] == 0xBB && b[i+2] == 0xBF) && // && . != #xFEFF
			!(b[i+1] == 0xBF && (b[i+2] == 0xBE || b[i+2] == 0xBF))))
}

func isBreak(b string, i int) bool {
	return (b[i] == '\r' || // CR (#xD)
		b[i] == '\n' || // LF (#xA)
		b[i] == 0xC2 && b[i+1] == 0x85 || // NEL (#x85)
		b[i] == 0xE2 && b[i+1] == 0x80 && b[i+2] == 0xA8 || // LS (#x2028)
		b[i] == 0xE2 && b[i+1] == 0x80 && b[i+2] == 0xA9) // PS (#x2029)
}

func isBlank(b string, i int) bool {
	return b[i] == ' ' || b[i] == '\t'
}

func isBlankz(b string, i int) bool {
	return b[i] == ' ' || b[i] == '\t' || b[i] == 0 || isBreak(b, i)
}

// write is write: copy one character.
func (e *emitter) write(value string, i int) int {
	w := width(value[i])
	e.buf = append(e.buf, value[i:i+w]...)
	e.column++
	return i + w
}

// writeBreak is write_break.
func (e *emitter) writeBreak(value string, i int) int {
	if value[i] == '\n' {
		e.putBreak()
		return i + 1
	}
	i = e.write(value, i)
	e.column = 0
	e.indention = true
	return i
}

// writePlain is yaml_emitter_write_plain_scalar for a value the analysis
// allowed as plain (so without line breaks) and no folding.
func (e *emitter) writePlain(value string, runes int) {
	if len(value) > 0 && !e.whitespace {
		e.buf = append(e.buf, ' ')
		e.column++
	}
	e.buf = append(e.buf, value...)
	e.column += runes
	if len(value) > 0 {
		e.whitespace = false
	}
	e.indention = false
}

// writeSingleQuoted is yaml_emitter_write_single_quoted_scalar without
// folding.
func (e *emitter) writeSingleQuoted(value string) {
	e.indicator("'", true, false, false)
	breaks := false
	for i := 0; i < len(value); {
		if value[i] == ' ' {
			i = e.write(value, i)
		} else if isBreak(value, i) {
			if !breaks && value[i] == '\n' {
				e.putBreak()
			}
			i = e.writeBreak(value, i)
			breaks = true
		} else {
			if breaks {
				e.writeIndent()
			}
			if value[i] == '\'' {
				e.buf = append(e.buf, '\'')
				e.column++
			}
			i = e.write(value, i)
			e.indention = false
			breaks = false
		}
	}
	e.indicator("'", false, false, false)
	e.whitespace = false
	e.indention = false
}

const hexDigits = "0123456789ABCDEF"

// writeDoubleQuoted is yaml_emitter_write_double_quoted_scalar without
// folding.
func (e *emitter) writeDoubleQuoted(value string) {
	e.indicator("\"", true, false, false)
	// is_bom(value, i) looks at the start of the value, whatever i is.
	bom := len(value) >= 3 && value[0] == 0xEF && value[1] == 0xBB && value[2] == 0xBF
	for i := 0; i < len(value); {
		c := value[i]
		if !isPrintable(value, i) || bom || isBreak(value, i) || c == '"' || c == '\\' {
			v, w := utf8.DecodeRuneInString(value[i:])
			i += w
			e.buf = append(e.buf, '\\')
			e.column++
			var esc byte
			switch v {
			case 0x00:
				esc = '0'
			case 0x07:
				esc = 'a'
			case 0x08:
				esc = 'b'
			case 0x09:
				esc = 't'
			case 0x0A:
				esc = 'n'
			case 0x0b:
				esc = 'v'
			case 0x0c:
				esc = 'f'
			case 0x0d:
				esc = 'r'
			case 0x1b:
				esc = 'e'
			case 0x22:
				esc = '"'
			case 0x5c:
				esc = '\\'
			case 0x85:
				esc = 'N'
			case 0xA0:
				esc = '_'
			case 0x2028:
				esc = 'L'
			case 0x2029:
				esc = 'P'
			}
			if esc != 0 {
				e.buf = append(e.buf, esc)
				e.column++
				continue
			}
			var digits int
			if v <= 0xFF {
				e.buf = append(e.buf, 'x')
				digits = 2
			} else if v <= 0xFFFF {
				e.buf = append(e.buf, 'u')
				digits = 4
			} else {
				e.buf = append(e.buf, 'U')
				digits = 8
			}
			for k := (digits - 1) * 4; k >= 0; k -= 4 {
				e.buf = append(e.buf, hexDigits[(v>>uint(k))&0x0F])
			}
			e.column += 1 + digits
		} else if c >= 0x20 && c < 0x7F && !bom {
			// A run of printable ASCII other than the escaped '"' and '\\'.
			j := i + 1
			for j < len(value) && value[j] >= 0x20 && value[j] < 0x7F && value[j] != '"' && value[j] != '\\' {
				j++
			}
			e.buf = append(e.buf, value[i:j]...)
			e.column += j - i
			i = j
		} else {
			i = e.write(value, i)
		}
	}
	e.indicator("\"", false, false, false)
	e.whitespace = false
	e.indention = false
}

// writeLiteral is yaml_emitter_write_literal_scalar (no line comment).
func (e *emitter) writeLiteral(value string) {
	e.indicator("|", true, false, false)
	e.blockScalarHints(value)
	e.lineCommentLinebreak()
	e.whitespace = true
	breaks := true
	for i := 0; i < len(value); {
		if isBreak(value, i) {
			i = e.writeBreak(value, i)
			breaks = true
			continue
		}
		if breaks {
			e.writeIndent()
		}
		// Copy the run of characters up to the next line break at once.
		j, runes := i, 0
		for j < len(value) {
			c := value[j]
			if c == '\n' || c == '\r' || (c == 0xC2 || c == 0xE2) && isBreak(value, j) {
				break
			}
			if c&0xC0 != 0x80 {
				runes++
			}
			j++
		}
		e.buf = append(e.buf, value[i:j]...)
		e.column += runes
		e.indention = false
		breaks = false
		i = j
	}
}

// writeFolded is yaml_emitter_write_folded_scalar (no line comment, no
// folding of long lines: best_width is infinite).
func (e *emitter) writeFolded(value string) {
	e.indicator(">", true, false, false)
	e.blockScalarHints(value)
	e.lineCommentLinebreak()
	e.whitespace = true
	breaks := true
	leadingSpaces := true
	for i := 0; i < len(value); {
		if isBreak(value, i) {
			if !breaks && !leadingSpaces && value[i] == '\n' {
				// yaml.v3 scans from the start of the value, not from i.
				k := 0
				for k < len(value) && isBreak(value, k) {
					k += width(value[k])
				}
				if k < len(value) && !isBlankz(value, k) {
					e.putBreak()
				}
			}
			i = e.writeBreak(value, i)
			breaks = true
		} else {
			if breaks {
				e.writeIndent()
				leadingSpaces = isBlank(value, i)
			}
			i = e.write(value, i)
			e.indention = false
			breaks = false
		}
	}
}

// blockScalarHints is yaml_emitter_write_block_scalar_hints.
func (e *emitter) blockScalarHints(value string) {
	if value[0] == ' ' || isBreak(value, 0) {
		e.indicator("2", false, false, false) // '0' + best_indent
	}
	// value is never empty here: the analysis forbids block style for "".
	chomp := ""
	i := len(value) - 1
	for value[i]&0xC0 == 0x80 {
		i--
	}
	if !isBreak(value, i) {
		chomp = "-"
	} else if i == 0 {
		chomp = "+"
	} else {
		i--
		for value[i]&0xC0 == 0x80 {
			i--
		}
		if isBreak(value, i) {
			chomp = "+"
		}
	}
	if chomp != "" {
		e.indicator(chomp, false, false, false)
	}
}
