package fastyaml

import (
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Decode parses data, which must hold exactly one YAML document, into what
// `var n yaml.Node; yaml.NewDecoder(bytes.NewReader(data)).Decode(&n)` gives
// (a DocumentNode). ok=false when data is outside the handled subset (or is
// not valid YAML, or holds zero or several documents); the caller then uses
// yaml.v3.
//
// The handled subset: block mappings and sequences (compact or indented),
// empty flow collections `{}` and `[]`, single-line flow sequences of plain
// and quoted scalars, single-line plain, single-quoted and double-quoted
// scalars, literal block scalars (`|` with any chomping and indentation
// indicator), an optional leading `---` line, and these comments, placed
// as yaml.v3 places them:
//   - "key: value # c", "- value # c" (value: a single-line scalar or flow
//     sequence, `{}`, `[]`; at least one space before '#'): the value's
//     LineComment, "# c" from the '#' to the line end;
//   - "key: # c" with the value on the next lines (or null): the key's
//     LineComment;
//   - comment lines at a key's exact indentation, right below the previous
//     entry of its mapping when that entry's value ended on its key's line,
//     or right below the parent "key:" line, with no blank line before or
//     after them: the key's HeadComment, the lines joined by "\n";
//   - "- # c", optional comment lines below at the column of that '#', then
//     a block mapping at that column: the HeadComment of its first key;
//   - comment lines at column 0 starting an implicit document whose root is
//     a block mapping at column 0, in groups separated by blank lines: the
//     groups before the last blank line, joined by "\n\n", are the
//     document's HeadComment, a group right above the first key is that
//     key's HeadComment.
//
// Everything else (other comments: after "---", at the end of the
// document, after or before blank lines elsewhere, foot comments, on block scalar headers or
// in flow collections; anchors, aliases, tags, folded or multi-line
// scalars, other flow collections, complex keys, merge keys, directives,
// tabs outside quoted or literal text, CR, BOM, control characters,
// nesting deeper than 1000, several documents) is not handled.
func Decode(data []byte) (doc *yaml.Node, ok bool) {
	d := decoder{}
	if !d.init(data) {
		return nil, false
	}
	return d.document()
}

// DecodeSeqItem parses data that is one item of a top-level block sequence
// ("- apiVersion: v1\n  kind: X\n...": an item cut out of a compact `items:`
// list) and returns the item node exactly as yaml.v3 decodes that text
// (Line/Column as in that text). ok=false when not handled (including when
// data holds anything but a one-item top-level sequence).
func DecodeSeqItem(data []byte) (item *yaml.Node, ok bool) {
	if len(data) < 1 || data[0] != '-' {
		return nil, false
	}
	d := decoder{}
	if !d.init(data) {
		return nil, false
	}
	doc, ok := d.document()
	if !ok {
		return nil, false
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode || seq.Style != 0 || len(seq.Content) != 1 {
		return nil, false
	}
	return seq.Content[0], true
}

const (
	strTagS   = "!!str"
	nullTagS  = "!!null"
	mapTagS   = "!!map"
	seqTagS   = "!!seq"
	maxKeyLen = 1000 // yaml.v3 drops simple keys longer than 1024 characters
	maxDepth  = 1000 // yaml.v3 fails beyond 10000 levels
)

// rejectPanic unwinds the parser when the input is outside the subset.
type rejectPanic struct{}

// strictPanics makes a panic other than rejectPanic (a bug) propagate; the
// tests set it. Otherwise a bug means falling back to yaml.v3, not a crash.
var strictPanics = false

type decoder struct {
	src       string // the input, as one string Values are sliced from
	n         int
	ascii     bool // the input is all ASCII: columns are byte offsets
	line      int  // 1-based number of the line starting at lineStart
	lineStart int
	pos       int // current position: start of a line between entries
	depth     int // collections being parsed

	colLine, colPos, colVal int // the last col() answer

	slab  []yaml.Node
	stack []*yaml.Node // children of the collections being parsed
	ptrs  []*yaml.Node // slab the Content slices are cut from
	buf   []byte
}

func reject() { panic(rejectPanic{}) }

// init validates the characters (what yaml.v3's reader accepts, minus CR,
// tabs aside, NEL, LS, PS, BOM and the C1 controls) and sizes the slabs.
func (d *decoder) init(data []byte) bool {
	// marks estimates the nodes there will be, outside comments: two per
	// ':' that is a mapping indicator (key and value), one per '-' that is
	// a sequence entry, two per '[' or '{' (the collection, a first flow
	// item) and one per ','. The slabs are sized from it and kept as long as
	// any node in them is: counting every ':' and '-' (in "nginx:1.25",
	// "app-1", "# kpt-set: ...") sized them 60% too large.
	marks := 0
	ascii := true
	comment := false
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20:
				if c != '\n' && c != '\t' {
					return false
				}
				if c == '\n' {
					comment = false
				}
			case c == 0x7f:
				return false
			case comment:
			case c == '#':
				comment = i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n'
			case c == ':' || c == '-':
				if i+1 == len(data) || data[i+1] == ' ' || data[i+1] == '\n' || data[i+1] == '\t' {
					marks++
					if c == ':' {
						marks++
					}
				}
			case c == '[' || c == '{':
				marks += 2
			case c == ',':
				marks++
			}
			i++
			continue
		}
		ascii = false
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError || r < 0xA0 || r == 0x2028 || r == 0x2029 || r == 0xFEFF ||
			(r >= 0xD800 && r <= 0xDFFF) || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += size
	}
	d.src = string(data)
	d.n = len(data)
	d.ascii = ascii
	d.line = 1
	est := marks + 3 // the document, the root collection, one spare
	if est > 4096 {
		est = 4096
	}
	d.slab = make([]yaml.Node, 0, est)
	d.ptrs = make([]*yaml.Node, 0, est)
	d.stack = make([]*yaml.Node, 0, 32)
	return true
}

// enter counts a collection level; leave is done by finish.
func (d *decoder) enter() {
	d.depth++
	if d.depth > maxDepth {
		reject()
	}
}

func (d *decoder) newNode(kind yaml.Kind, tag, value string, line, col int) *yaml.Node {
	if len(d.slab) == cap(d.slab) {
		// past the estimate: smaller slabs, so that little of them is left
		// unused (a slab lives as long as any of its nodes)
		c := min(max(cap(d.slab)/2, 16), 4096)
		d.slab = make([]yaml.Node, 0, c)
	}
	d.slab = d.slab[:len(d.slab)+1]
	nd := &d.slab[len(d.slab)-1]
	nd.Kind = kind
	nd.Tag = tag
	nd.Value = value
	nd.Line = line
	nd.Column = col
	return nd
}

// finish gives the collection the children pushed since mark.
func (d *decoder) finish(nd *yaml.Node, mark int) {
	kids := d.stack[mark:]
	k := len(kids)
	if k > 0 {
		if cap(d.ptrs)-len(d.ptrs) < k {
			c := 2 * cap(d.ptrs)
			if c > 4096 {
				c = 4096
			}
			if c < k {
				c = k
			}
			d.ptrs = make([]*yaml.Node, 0, c)
		}
		start := len(d.ptrs)
		d.ptrs = append(d.ptrs, kids...)
		nd.Content = d.ptrs[start : start+k : start+k]
	}
	for i := range kids {
		kids[i] = nil
	}
	d.stack = d.stack[:mark]
	d.depth--
}

// col is the 1-based column (in characters, as yaml.v3 counts) of byte p
// on the current line.
func (d *decoder) col(p int) int {
	if d.ascii {
		return p - d.lineStart + 1
	}
	// Count from the last position asked on this line (positions are
	// asked in increasing order on a line, so a line costs O(length)).
	i, c := d.lineStart, 1
	if d.colLine == d.lineStart && d.colPos <= p && d.colPos > 0 {
		i, c = d.colPos, d.colVal
	}
	for ; i < p; i++ {
		if d.src[i]&0xC0 != 0x80 {
			c++
		}
	}
	d.colLine, d.colPos, d.colVal = d.lineStart, p, c
	return c
}

// nextLine moves pos past the end of the current line (at p or later).
func (d *decoder) nextLine(p int) {
	for p < d.n && d.src[p] != '\n' {
		p++
	}
	if p < d.n {
		p++
		d.line++
	}
	d.pos = p
	d.lineStart = p
}

// peek skips blank lines from pos (a line start) and returns the
// indentation of the next content line (pos is then its start), or -1 at
// the end of the input.
func (d *decoder) peek() int {
	for {
		p := d.pos
		for p < d.n && d.src[p] == ' ' {
			p++
		}
		if p == d.n {
			d.pos = p
			return -1
		}
		if d.src[p] == '\n' {
			d.pos = p + 1
			d.lineStart = d.pos
			d.line++
			continue
		}
		ind := p - d.pos
		if ind == 0 && p+2 < d.n && (d.src[p:p+3] == "---" || d.src[p:p+3] == "...") && d.blankz(p+3) {
			reject() // another document, or a document end
		}
		return ind
	}
}

// blankz: is p at a space, a line break or the end (a tab is rejected).
func (d *decoder) blankz(p int) bool {
	if p >= d.n {
		return true
	}
	switch d.src[p] {
	case ' ', '\n':
		return true
	case '\t':
		reject()
	}
	return false
}

// restBlank checks that only spaces follow p on its line, then moves to the
// next line.
func (d *decoder) restBlank(p int) {
	for p < d.n && d.src[p] == ' ' {
		p++
	}
	if p < d.n && d.src[p] != '\n' {
		reject()
	}
	d.nextLine(p)
}

func (d *decoder) document() (doc *yaml.Node, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, is := r.(rejectPanic); !is && strictPanics {
				panic(r)
			}
			doc, ok = nil, false
		}
	}()
	explicit := false
	if d.n >= 4 && d.src[:4] == "---\n" {
		explicit = true
		d.nextLine(0)
	}
	docHead, keyHead := "", ""
	if !explicit && d.n > 0 && d.src[0] == '#' {
		docHead, keyHead = d.docComments()
	}
	ind := d.peek()
	if ind < 0 {
		return nil, false
	}
	p := d.pos + ind
	var dn *yaml.Node
	if explicit {
		dn = d.newNode(yaml.DocumentNode, "", "", 1, 1)
	} else {
		dn = d.newNode(yaml.DocumentNode, "", "", d.line, ind+1)
	}
	root := d.inline(p, -1, true, false)
	if d.peek() >= 0 {
		reject()
	}
	if d.src[0] == '#' {
		if root.Kind != yaml.MappingNode || root.Style != 0 {
			reject()
		}
		dn.HeadComment = docHead
		root.Content[0].HeadComment = keyHead
	}
	dn.Content = []*yaml.Node{root}
	return dn, true
}

// docComments reads the comment lines that open an implicit document, all
// at column 0, in groups separated by empty lines, up to the root block
// mapping's first key at column 0 (pos is then that line's start). yaml.v3
// divides them at the last empty line: the groups before it, joined by
// "\n\n" however many empty lines separate them, become the document's
// HeadComment; the group directly above the key (no empty line between)
// becomes the key's HeadComment.
func (d *decoder) docComments() (docHead, keyHead string) {
	var groups []string
	for {
		gs, ge := d.pos, d.pos
		for d.pos < d.n && d.src[d.pos] == '#' {
			e := d.pos
			for e < d.n && d.src[e] != '\n' {
				e++
			}
			ge = e
			d.nextLine(e)
		}
		groups = append(groups, d.src[gs:ge])
		line := d.line
		ind := d.peek()
		if ind != 0 {
			reject() // an indented comment or root, or the end
		}
		if d.src[d.pos] == '#' {
			continue // after blank lines
		}
		if d.line == line { // no blank line before the key
			keyHead = groups[len(groups)-1]
			groups = groups[:len(groups)-1]
		}
		return strings.Join(groups, "\n\n"), keyHead
	}
}

// inline parses the node starting at p on the current line. ind is the
// indentation of the innermost enclosing block collection (-1 at the top).
// collections: whether a block sequence or mapping may start here (at the
// start of a line or after "- "), not after "key: ".
// lc: whether a line comment may follow a scalar or flow collection node
// on its line (a mapping value or a sequence item; yaml.v3 gives the node
// that comment as LineComment).
// It returns with pos at the start of the line following the node.
func (d *decoder) inline(p, ind int, collections, lc bool) *yaml.Node {
	c := d.src[p]
	if c == '-' && d.blankz(p+1) {
		if !collections {
			reject()
		}
		return d.sequence(p, d.col(p)-1, false)
	}
	switch c {
	case '|':
		return d.literal(p, ind)
	case '[':
		if p+1 >= d.n || d.src[p+1] != ']' {
			nd := d.flowSeq(p)
			nd.LineComment = d.restComment(d.pos, lc)
			return nd
		}
		fallthrough
	case '{':
		if p+1 >= d.n || d.src[p+1] != c+2 {
			reject()
		}
		kind, tag := yaml.MappingNode, mapTagS
		if c == '[' {
			kind, tag = yaml.SequenceNode, seqTagS
		}
		nd := d.newNode(kind, tag, "", d.line, d.col(p))
		nd.Style = yaml.FlowStyle
		nd.LineComment = d.restComment(p+2, lc)
		return nd
	}
	sc, end := d.scalar(p)
	q := end
	for q < d.n && d.src[q] == ' ' {
		q++
	}
	if q < d.n && d.src[q] == ':' && d.blankz(q+1) {
		if !collections {
			reject()
		}
		return d.mapping(p, sc, q)
	}
	if sc.Style == 0 && sc.Value == "<<" {
		reject()
	}
	sc.LineComment = d.restComment(end, lc)
	return sc
}

// restComment is restBlank that also takes a comment ending the line
// (" # text": YAML 1.2 §6.6 wants white space before the '#') when lc is
// set, and returns its text from the '#' to the end of the line, which is
// the node's LineComment in yaml.v3.
func (d *decoder) restComment(p int, lc bool) string {
	q := p
	for q < d.n && d.src[q] == ' ' {
		q++
	}
	if !lc || q == p || q >= d.n || d.src[q] != '#' {
		d.restBlank(q)
		return ""
	}
	e := q
	for e < d.n && d.src[e] != '\n' {
		e++
	}
	d.nextLine(e)
	return d.src[q:e]
}

// scalar scans a single-line plain or quoted scalar at p and returns it
// with the offset just after it.
func (d *decoder) scalar(p int) (*yaml.Node, int) {
	line, col := d.line, d.col(p)
	switch d.src[p] {
	case '"':
		v, end := d.doubleQuoted(p)
		nd := d.newNode(yaml.ScalarNode, strTagS, v, line, col)
		nd.Style = yaml.DoubleQuotedStyle
		return nd, end
	case '\'':
		v, end := d.singleQuoted(p)
		nd := d.newNode(yaml.ScalarNode, strTagS, v, line, col)
		nd.Style = yaml.SingleQuotedStyle
		return nd, end
	case '-', '?', ':':
		// plain only when followed by a non-blank character
		if d.blankz(p + 1) {
			reject()
		}
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '%', '@', '`', ' ', '\t', '\n':
		reject()
	}
	// A single-line plain scalar: ends at ": ", ":" at the end of the line,
	// " #" (a comment, left to the caller) or the end of the line.
	i, end := p, p
	for {
		s := i
		for i < d.n {
			c := d.src[i]
			if c == ' ' || c == '\n' {
				break
			}
			if c == '\t' {
				reject()
			}
			if c == ':' && (i+1 >= d.n || d.src[i+1] == ' ' || d.src[i+1] == '\n' || d.src[i+1] == '\t') {
				break
			}
			i++
		}
		if i > s {
			end = i
		}
		if i < d.n && d.src[i] == ':' {
			break
		}
		for i < d.n && d.src[i] == ' ' {
			i++
		}
		if i >= d.n || d.src[i] == '\n' {
			break
		}
		switch d.src[i] {
		case '#':
			v := d.src[p:end]
			return d.newNode(yaml.ScalarNode, ResolveTag(v), v, line, col), end
		case '\t':
			reject()
		}
	}
	v := d.src[p:end]
	return d.newNode(yaml.ScalarNode, ResolveTag(v), v, line, col), end
}

func (d *decoder) singleQuoted(p int) (string, int) {
	i := p + 1
	start := i
	simple := true
	for {
		if i >= d.n || d.src[i] == '\n' {
			reject() // multi-line or unterminated
		}
		if d.src[i] == '\'' {
			if i+1 < d.n && d.src[i+1] == '\'' {
				simple = false
				i += 2
				continue
			}
			break
		}
		i++
	}
	if simple {
		return d.src[start:i], i + 1
	}
	b := d.buf[:0]
	for j := start; j < i; j++ {
		b = append(b, d.src[j])
		if d.src[j] == '\'' {
			j++
		}
	}
	d.buf = b
	return string(b), i + 1
}

func (d *decoder) doubleQuoted(p int) (string, int) {
	i := p + 1
	start := i
	for i < d.n && d.src[i] != '"' && d.src[i] != '\\' && d.src[i] != '\n' {
		i++
	}
	if i < d.n && d.src[i] == '"' {
		return d.src[start:i], i + 1
	}
	b := append(d.buf[:0], d.src[start:i]...)
	for {
		if i >= d.n || d.src[i] == '\n' {
			reject()
		}
		c := d.src[i]
		if c == '"' {
			break
		}
		if c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= d.n {
			reject()
		}
		codeLen := 0
		switch d.src[i+1] {
		case '0':
			b = append(b, 0)
		case 'a':
			b = append(b, '\x07')
		case 'b':
			b = append(b, '\x08')
		case 't', '\t':
			b = append(b, '\x09')
		case 'n':
			b = append(b, '\x0A')
		case 'v':
			b = append(b, '\x0B')
		case 'f':
			b = append(b, '\x0C')
		case 'r':
			b = append(b, '\x0D')
		case 'e':
			b = append(b, '\x1B')
		case ' ':
			b = append(b, '\x20')
		case '"':
			b = append(b, '"')
		case '\'':
			b = append(b, '\'')
		case '\\':
			b = append(b, '\\')
		case 'N':
			b = append(b, "\u0085"...)
		case '_':
			b = append(b, "\u00a0"...)
		case 'L':
			b = append(b, "\u2028"...)
		case 'P':
			b = append(b, "\u2029"...)
		case 'x':
			codeLen = 2
		case 'u':
			codeLen = 4
		case 'U':
			codeLen = 8
		default:
			reject() // unknown escape, or an escaped line break
		}
		i += 2
		if codeLen > 0 {
			if i+codeLen > d.n {
				reject()
			}
			v := 0
			for k := 0; k < codeLen; k++ {
				h := d.src[i+k]
				switch {
				case h >= '0' && h <= '9':
					v = v<<4 + int(h-'0')
				case h >= 'a' && h <= 'f':
					v = v<<4 + int(h-'a') + 10
				case h >= 'A' && h <= 'F':
					v = v<<4 + int(h-'A') + 10
				default:
					reject()
				}
			}
			if (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF {
				reject()
			}
			switch {
			case v <= 0x7F:
				b = append(b, byte(v))
			case v <= 0x7FF:
				b = append(b, byte(0xC0+(v>>6)), byte(0x80+(v&0x3F)))
			case v <= 0xFFFF:
				b = append(b, byte(0xE0+(v>>12)), byte(0x80+((v>>6)&0x3F)), byte(0x80+(v&0x3F)))
			default:
				b = append(b, byte(0xF0+(v>>18)), byte(0x80+((v>>12)&0x3F)), byte(0x80+((v>>6)&0x3F)), byte(0x80+(v&0x3F)))
			}
			i += codeLen
		}
	}
	d.buf = b
	return string(b), i + 1
}

// mapping parses a block mapping whose first key (already scanned, starting
// at p) is followed by the ':' at colon.
func (d *decoder) mapping(p int, key *yaml.Node, colon int) *yaml.Node {
	c := d.col(p) - 1
	nd := d.newNode(yaml.MappingNode, mapTagS, "", d.line, c+1)
	mark := len(d.stack)
	d.enter()
	for {
		if colon-p > maxKeyLen {
			reject()
		}
		if key.Style == 0 && key.Value == "<<" {
			reject()
		}
		keyLine := key.Line
		d.stack = append(d.stack, key)
		v := d.value(key, colon, c)
		d.stack = append(d.stack, v)
		ind := d.peek()
		if ind < c {
			break
		}
		if ind > c {
			reject()
		}
		p = d.pos + ind
		head := ""
		if d.src[p] == '#' {
			// Comment lines at the key's indentation right below an entry
			// whose value ended on its key's line (no blank line): yaml.v3
			// makes them the next key's HeadComment.
			if d.line != keyLine+1 || v.Line != keyLine || v.Style == yaml.LiteralStyle {
				reject()
			}
			head = d.comments(p, c)
			p = d.pos + c
		}
		if d.src[p] == '-' && d.blankz(p+1) {
			reject()
		}
		var end int
		key, end = d.scalar(p)
		if key.Kind != yaml.ScalarNode {
			reject()
		}
		key.HeadComment = head
		colon = end
		for colon < d.n && d.src[colon] == ' ' {
			colon++
		}
		if colon >= d.n || d.src[colon] != ':' || !d.blankz(colon+1) {
			reject()
		}
	}
	d.finish(nd, mark)
	return nd
}

// value parses the value of key following the ':' at colon, in a mapping
// at indentation c. A comment after "key:" alone on its line is the key's
// LineComment in yaml.v3.
func (d *decoder) value(key *yaml.Node, colon, c int) *yaml.Node {
	q := colon + 1
	for q < d.n && d.src[q] == ' ' {
		q++
	}
	if q < d.n && d.src[q] != '\n' && d.src[q] != '#' {
		return d.inline(q, c, false, true)
	}
	line, col := d.line, d.col(colon)+1
	if q < d.n && d.src[q] == '#' {
		key.LineComment = d.restComment(colon+1, true)
	} else {
		d.nextLine(q)
	}
	ind := d.peek()
	if ind > c {
		return d.block(ind, c, line)
	}
	if ind == c {
		p := d.pos + ind
		if d.src[p] == '-' && d.blankz(p+1) {
			return d.sequence(p, c, true)
		}
	}
	return d.newNode(yaml.ScalarNode, nullTagS, "", line, col)
}

// block parses a block collection starting a line indented by ind.
// keyLine: the line of the key whose value this is (0 for a sequence
// item): comment lines at ind right below it, then a mapping key at ind,
// are that key's HeadComment in yaml.v3.
func (d *decoder) block(ind, parent, keyLine int) *yaml.Node {
	p := d.pos + ind
	c := d.src[p]
	head := ""
	if c == '#' {
		if keyLine == 0 || d.line != keyLine+1 {
			reject()
		}
		head = d.comments(p, ind)
		p = d.pos + ind
		c = d.src[p]
		if c == '-' && d.blankz(p+1) {
			reject() // a head comment of a sequence item: not handled
		}
	}
	if c == '-' && d.blankz(p+1) {
		return d.sequence(p, ind, false)
	}
	if c == '|' || c == '{' || c == '[' {
		reject() // scalars on the line after their key: not handled
	}
	nd := d.inline(p, parent, true, false)
	if nd.Kind != yaml.MappingNode {
		reject()
	}
	nd.Content[0].HeadComment = head
	return nd
}

// comments reads a head comment: the comment starting at first, on the
// current line, and the comment lines directly below it, each indented by
// exactly ind spaces. The node it belongs to must follow directly: the next
// line is content at that same indentation (an empty line or the end of the
// input there is not handled). Each comment's text runs from its '#' to the
// end of its line, trailing spaces and tabs included (yaml.v3 keeps them);
// the texts are joined by "\n". pos is then the start of the content line.
func (d *decoder) comments(first, ind int) string {
	end := first // the end of the last comment line read
	several := false
	for q := first; ; several = true {
		for end = q; end < d.n && d.src[end] != '\n'; end++ {
		}
		d.nextLine(end)
		line := d.line
		if i := d.peek(); d.line != line || i != ind {
			reject()
		}
		q = d.pos + ind
		if d.src[q] != '#' {
			break
		}
	}
	if !several || ind == 0 {
		return d.src[first:end] // the lines as they stand in src
	}
	// Leave out the indentation of the lines after the first.
	var b strings.Builder
	b.Grow(end - first)
	rest := d.src[first:end]
	for {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i+1])
		rest = rest[i+1+ind:]
	}
}

// sequence parses a block sequence whose first "-" is at p, column c
// (0-based); indentless: a compact sequence that is a mapping value at the
// mapping's own indentation.
func (d *decoder) sequence(p, c int, indentless bool) *yaml.Node {
	nd := d.newNode(yaml.SequenceNode, seqTagS, "", d.line, c+1)
	mark := len(d.stack)
	d.enter()
	for {
		q := p + 1
		for q < d.n && d.src[q] == ' ' {
			q++
		}
		var item *yaml.Node
		if q == p+2 && q < d.n && d.src[q] == '#' {
			// "- # comment", comment lines below at the same column, then
			// a mapping there: yaml.v3 makes the comments the HeadComment
			// of the mapping's first key (a lone "- " has no line comment).
			head := d.comments(q, c+2)
			r := d.pos + c + 2
			if k := d.src[r]; k == '|' || k == '{' || k == '[' || k == '-' && d.blankz(r+1) {
				reject()
			}
			item = d.inline(r, c, true, false)
			if item.Kind != yaml.MappingNode {
				reject()
			}
			item.Content[0].HeadComment = head
		} else if q < d.n && d.src[q] != '\n' {
			item = d.inline(q, c, true, true)
		} else {
			line, col := d.line, d.col(p)+1
			d.nextLine(q)
			ind := d.peek()
			if ind > c {
				item = d.block(ind, c, 0)
			} else {
				item = d.newNode(yaml.ScalarNode, nullTagS, "", line, col)
			}
		}
		d.stack = append(d.stack, item)
		ind := d.peek()
		if ind < c {
			break
		}
		if ind > c {
			reject()
		}
		p = d.pos + ind
		if d.src[p] != '-' || !d.blankz(p+1) {
			if indentless {
				break
			}
			reject()
		}
	}
	d.finish(nd, mark)
	return nd
}

// Block scalar chomping (YAML 1.2 §8.1.1.2): what becomes of the line break
// after the last content line and of the empty lines after it.
const (
	chompClip  = iota // no indicator: keep the final line break, drop trailing empty lines
	chompStrip        // '-': drop both
	chompKeep         // '+': keep both
)

// blockHeader reads the rest of a block scalar header from p (just after
// the '|'): an optional indentation indicator (a digit 1-9) and an optional
// chomping indicator, in either order (YAML 1.2 §8.1.1), then only spaces to
// the end of the line (a comment there is not handled). pos is then the
// start of the next line.
func (d *decoder) blockHeader(p int) (chomp, indicator int) {
	chomp = chompClip
	chomped := false
	for ; p < d.n; p++ {
		c := d.src[p]
		if c >= '1' && c <= '9' && indicator == 0 {
			indicator = int(c - '0')
		} else if (c == '-' || c == '+') && !chomped {
			chomped = true
			chomp = chompStrip
			if c == '+' {
				chomp = chompKeep
			}
		} else {
			break
		}
	}
	d.restBlank(p) // refuses anything else, '0' included (yaml.v3 fails on it)
	return chomp, indicator
}

// literal reads a literal block scalar (YAML 1.2 §8.1.2) whose '|' is at p.
// parent is the indentation of the innermost enclosing block collection (-1
// at the top); the content must be indented deeper.
//
// The content indentation is parent (0 at the top) plus the header's
// indentation indicator when there is one. Otherwise it is detected from the
// first non-empty line (§8.1.1.1); where the spec makes it an error for a
// leading empty line to hold more spaces than that line, yaml.v3 (which
// kpt's output is made of) instead takes that many spaces as the
// indentation, so the first non-empty line is less indented and the scalar
// has no content line; we do the same.
//
// Each line is then one of: an empty line (at most the content indentation
// in spaces, nothing else), a content line (the full indentation, then
// anything: further spaces and tabs are content), or less indented text,
// which ends the scalar, as does the end of the input. A tab where
// indentation is still expected is refused (yaml.v3 fails there). The value
// is the content lines with their indentation removed, each followed by its
// line break, with an empty line inside the content adding one line break,
// then chomped. literal returns with pos at the start of the line that ended
// the scalar (or at the end of the input).
func (d *decoder) literal(p, parent int) *yaml.Node {
	nd := d.newNode(yaml.ScalarNode, strTagS, "", d.line, d.col(p))
	nd.Style = yaml.LiteralStyle
	chomp, indicator := d.blockHeader(p + 1)
	indent := 0 // the content indentation; 0 while it is still to be detected
	if indicator > 0 {
		indent = max(parent, 0) + indicator
	}
	widest := 0 // while detecting: the most spaces on a leading empty line

	var (
		text           = d.buf[:0] // the value, once it is more than one slice of src
		built          bool        // text holds the value so far
		firstS, firstE int         // the first content line in src, while !built
		lines          int         // content lines read
		empties        int         // empty lines since the last content line (or the header)
		lastBreak      bool        // the last content line ended with a line break
		ls             = d.pos     // the start of the line being classified
		eol            int
	)
scan:
	for {
		e := ls
		for e < d.n && d.src[e] == ' ' {
			e++
		}
		spaces := e - ls
		if e >= d.n && (indent == 0 || spaces <= indent) {
			d.lineStart, d.pos = ls, d.n // the input ends in indentation
			break
		}
		content := true
		switch {
		case indent == 0:
			switch d.src[e] {
			case '\t':
				reject()
			case '\n':
				widest = max(widest, spaces)
				content = false
			default:
				indent = max(widest, spaces, parent+1, 1)
				if spaces < indent {
					d.pos = ls
					break scan
				}
			}
		case spaces < indent:
			switch d.src[e] {
			case '\t':
				reject()
			case '\n':
				content = false
			default:
				d.pos = ls // less indented text
				break scan
			}
		case spaces == indent && d.src[e] == '\n':
			content = false
		}
		eol = e
		if content {
			for eol < d.n && d.src[eol] != '\n' {
				eol++
			}
			start := ls + indent
			if lines == 0 && empties == 0 {
				firstS, firstE = start, eol
			} else {
				if !built {
					text = append(text, d.src[firstS:firstE]...)
					built = true
				}
				if lines > 0 {
					text = append(text, '\n')
				}
				for ; empties > 0; empties-- {
					text = append(text, '\n')
				}
				text = append(text, d.src[start:eol]...)
			}
			lines++
			lastBreak = eol < d.n
		} else {
			empties++
		}
		if eol >= d.n {
			d.lineStart, d.pos = ls, d.n
			break
		}
		ls = eol + 1
		d.line++
		d.lineStart = ls
	}

	// Chomping.
	if lines > 0 && lastBreak && chomp != chompStrip {
		if built {
			text = append(text, '\n')
		} else {
			firstE++ // the line break follows the line in src
		}
	}
	if chomp == chompKeep && empties > 0 {
		if !built {
			text = append(text, d.src[firstS:firstE]...)
			built = true
		}
		for ; empties > 0; empties-- {
			text = append(text, '\n')
		}
	}
	if built {
		nd.Value = string(text)
	} else {
		nd.Value = d.src[firstS:firstE] // at most one line, no empty line kept: no copy
	}
	d.buf = text
	return nd
}

// flowSeq parses a single-line flow sequence of plain and quoted scalars
// ("[a, 'b', "c"]") whose '[' is at p.
func (d *decoder) flowSeq(p int) *yaml.Node {
	nd := d.newNode(yaml.SequenceNode, seqTagS, "", d.line, d.col(p))
	nd.Style = yaml.FlowStyle
	i := p + 1
	for i < d.n && d.src[i] == ' ' {
		i++
	}
	if i < d.n && d.src[i] == ']' {
		d.pos = i + 1
		return nd
	}
	mark := len(d.stack)
	d.enter()
	for {
		if i >= d.n {
			reject()
		}
		var item *yaml.Node
		switch c := d.src[i]; c {
		case '"', '\'':
			item, i = d.scalar(i)
		case '-':
			if d.blankz(i + 1) {
				reject()
			}
			item, i = d.flowPlain(i)
		case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '%', '@', '`', ' ', '\t', '\n':
			reject()
		default:
			item, i = d.flowPlain(i)
		}
		d.stack = append(d.stack, item)
		for i < d.n && d.src[i] == ' ' {
			i++
		}
		if i >= d.n {
			reject()
		}
		if d.src[i] == ']' {
			break
		}
		if d.src[i] != ',' {
			reject()
		}
		i++
		for i < d.n && d.src[i] == ' ' {
			i++
		}
		if i < d.n && d.src[i] == ']' {
			reject() // a trailing comma: not handled
		}
	}
	d.finish(nd, mark)
	d.pos = i + 1
	return nd
}

// flowPlain scans a single-line plain scalar inside a flow sequence.
func (d *decoder) flowPlain(p int) (*yaml.Node, int) {
	line, col := d.line, d.col(p)
	i, end := p, p
	for {
		s := i
		for i < d.n {
			c := d.src[i]
			if c == ' ' || c == '\n' || c == ',' || c == ']' {
				break
			}
			switch c {
			case '\t', '?', '[', '{', '}':
				reject()
			case ':':
				if i+1 >= d.n || d.src[i+1] == ' ' || d.src[i+1] == '\n' || d.src[i+1] == '\t' {
					reject() // a key: value pair
				}
			}
			i++
		}
		if i > s {
			end = i
		}
		for i < d.n && d.src[i] == ' ' {
			i++
		}
		if i >= d.n {
			reject()
		}
		switch d.src[i] {
		case ',', ']':
			v := d.src[p:end]
			if v == "<<" {
				reject()
			}
			return d.newNode(yaml.ScalarNode, ResolveTag(v), v, line, col), end
		case '#', '\t', '\n':
			reject()
		}
	}
}
