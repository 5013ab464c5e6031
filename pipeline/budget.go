package pipeline

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// What a function prints is never trusted, and its size in bytes
// (Options.MaxOutput) does not bound what reading it costs: a YAML node
// takes a few bytes to print and a few hundred to hold, an item or a result
// takes a few dozen bytes to print and kilobytes to carry through a render,
// and an alias costs nothing to print but as much as what it points to
// for whoever expands it. So the output is measured before it is decoded:
// the items and results of a block ResourceList are counted while it is
// cut, and every byte is scanned for an upper bound on the YAML nodes that
// decoding would build (countNodes); decoding starts only when those fit
// the limits. After decoding, the trees are checked exactly (checkTrees):
// items, results, nesting depth, and nodes with every alias expanded.

// OutputLimits bound what kptr accepts from one function's stdout beyond
// its size in bytes. A zero field means its default. An output over a
// limit fails the function with an error naming the limit and its setting;
// nothing it printed is used.
type OutputLimits struct {
	// MaxItems bounds the resources of the ResourceList (KPTR_FN_MAX_ITEMS).
	MaxItems int
	// MaxResults bounds its results (KPTR_FN_MAX_RESULTS).
	MaxResults int
	// MaxNodes bounds its YAML nodes (scalars, collections, empty values),
	// with each alias counted as the nodes it expands to (KPTR_FN_MAX_NODES).
	MaxNodes int
	// MaxDepth bounds the nesting of collections.
	MaxDepth int
}

// Defaults of OutputLimits: far above what real functions print (a catalog
// function on a 10,000-resource package prints 10,000 items and under a
// million nodes; Kubernetes schemas nest a few dozen levels), low enough
// that an output at any one limit costs kptr under 1 GiB (BENCHMARKS.md,
// "Memory per output byte": 50,000 small items about 600 MB, 50,000
// results about 420 MB, 4,000,000 nodes about 930 MB).
const (
	DefaultMaxItems   = 50_000
	DefaultMaxResults = 50_000
	DefaultMaxNodes   = 4_000_000
	DefaultMaxDepth   = 1000
)

func (l OutputLimits) withDefaults() OutputLimits {
	return OutputLimits{MaxItems: orDefault(l.MaxItems, DefaultMaxItems), MaxResults: orDefault(l.MaxResults, DefaultMaxResults),
		MaxNodes: orDefault(l.MaxNodes, DefaultMaxNodes), MaxDepth: orDefault(l.MaxDepth, DefaultMaxDepth)}
}

// ResultBudget bounds the results one render (or eval) holds over all its
// functions: each function's output is within OutputLimits, but a render
// keeps every function's results (for the transcript, the Kptfile's render
// status, results.yaml), and 40 functions of 45,000 results each took kptr
// to 3 GB (issue 30). A zero field means its default. The function whose
// results cross the budget fails as a function over its own limit does.
type ResultBudget struct {
	// MaxResults bounds the results of all the functions (KPTR_MAX_RESULTS).
	MaxResults int
	// MaxBytes bounds their text: every key and value, each alias counted
	// as what it expands to (KPTR_MAX_RESULT_BYTES).
	MaxBytes int64
}

// Defaults of ResultBudget: twice what one function may print
// (DefaultMaxResults), and room for that many results of a few hundred
// bytes each; a render holding both costs kptr well under 1 GiB, written
// into the Kptfile's render status or results.yaml (BENCHMARKS.md, issue 30).
const (
	DefaultMaxRenderResults = 100_000
	DefaultMaxResultBytes   = 64 << 20
)

func (b ResultBudget) withDefaults() ResultBudget {
	return ResultBudget{MaxResults: orDefault(b.MaxResults, DefaultMaxRenderResults), MaxBytes: orDefault(b.MaxBytes, DefaultMaxResultBytes)}
}

// orDefault is a limit's value, or def when it is zero (or negative).
func orDefault[T int | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// resultsHeld is what a render holds of its functions' results.
type resultsHeld struct {
	count int
	bytes int64
}

// charge adds a function's results (the results node of its output) to
// held, or returns the error of the budget they would cross.
func (h *resultsHeld) charge(b ResultBudget, results *yaml.RNode) error {
	b = b.withDefaults()
	n := countResults(results)
	if h.count+n > b.MaxResults {
		return &OutputLimitError{What: "results", Limit: b.MaxResults, Setting: "KPTR_MAX_RESULTS", Render: true}
	}
	var size int64
	if !results.IsNil() {
		size = textBytes(results.YNode(), b.MaxBytes-h.bytes, map[*yaml.Node]int64{})
	}
	if h.bytes+size > b.MaxBytes {
		return &OutputLimitError{What: "bytes of results", Limit: int(b.MaxBytes), Setting: "KPTR_MAX_RESULT_BYTES", Render: true}
	}
	h.count += n
	h.bytes += size
	return nil
}

// textBytes is the length of every scalar under n (keys and values), each
// alias counted as what it expands to (an anchor's size computed once),
// capped just above limit.
func textBytes(n *yaml.Node, limit int64, anchored map[*yaml.Node]int64) int64 {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if s, ok := anchored[n]; ok {
		return s
	}
	s := int64(len(n.Value))
	for _, c := range n.Content {
		if s += textBytes(c, limit, anchored); s > limit {
			s = limit + 1
			break
		}
	}
	if n.Anchor != "" {
		anchored[n] = s
	}
	return s
}

// OutputLimitError is a function output over one of OutputLimits, or one
// whose results take the render over its ResultBudget (Render).
type OutputLimitError struct {
	Function string // the function's image or exec command
	What     string // "items", "results", "YAML nodes", "levels of nesting", "bytes of results"
	Limit    int
	Setting  string // the KPTR_* variable that sets it, "" when none
	Render   bool   // the limit is the render's ResultBudget
}

// Error is "output has more than N <what> (<setting>)"; the render's error
// summary puts the package and the function before it, kpt's error line
// (Error.Message) the function.
func (e *OutputLimitError) Error() string {
	if e.Render {
		return fmt.Sprintf("output takes the render's functions over %d %s in all (%s)", e.Limit, e.What, e.Setting)
	}
	s := fmt.Sprintf("output has more than %d %s", e.Limit, e.What)
	if e.What == "YAML nodes" {
		s += " (aliases expanded)"
	}
	if e.Setting != "" {
		s += " (" + e.Setting + ")"
	}
	return s
}

func (l OutputLimits) tooManyItems() error {
	return &OutputLimitError{What: "items", Limit: l.MaxItems, Setting: "KPTR_FN_MAX_ITEMS"}
}

func (l OutputLimits) tooManyResults() error {
	return &OutputLimitError{What: "results", Limit: l.MaxResults, Setting: "KPTR_FN_MAX_RESULTS"}
}

func (l OutputLimits) tooManyNodes() error {
	return &OutputLimitError{What: "YAML nodes", Limit: l.MaxNodes, Setting: "KPTR_FN_MAX_NODES"}
}

func (l OutputLimits) tooDeep() error {
	return &OutputLimitError{What: "levels of nesting", Limit: l.MaxDepth}
}

// countNodes returns an upper bound on the nodes yaml.v3 builds when it
// decodes b (aliases counted once, as the nodes they are), or a number
// above max as soon as the bound exceeds it. One pass, no allocation.
//
// Every node is charged to a token of its own: a scalar (plain, quoted or
// block), an alias, an anchor or tag (which may stand for an empty value),
// a flow collection's opening bracket, in a flow mapping a ',' or '}' (the
// empty value a key may have), in a flow sequence a ':' (a single-pair
// mapping and its value), a block "- " whose value is not one scalar on its
// line (a nested collection or an empty value), a "key:" ending its line
// (the same), "? " (a complex key and its value), and each document and its
// root. Multi-line plain scalars are charged once per line. The bound is
// exact for block mappings and sequences of scalars and about 1.4 times
// the count for JSON; budget_test.go holds it above yaml.v3's count.
func countNodes(b []byte, limit int) int {
	n := 2 // the document and its root
	flow := 0
	var mapping uint64 // bit k: the flow collection at depth k+1 is a mapping
	blockParent := -1  // inside a block scalar: its content is indented more than this
	entryCol := 0      // column of the current line's innermost "- " or key
	lineStart, indent := 0, 0
	atLineStart := true
	for i := 0; i < len(b); {
		if n > limit {
			return n
		}
		c := b[i]
		if atLineStart {
			lineStart = i
			j := i
			for j < len(b) && b[j] == ' ' {
				j++
			}
			indent = j - i
			blank := j == len(b) || b[j] == '\n' || b[j] == '\r'
			if blockParent >= 0 {
				if blank || indent > blockParent {
					i = nextLine(b, j)
					continue
				}
				blockParent = -1
			}
			atLineStart = false
			entryCol = indent
			if flow == 0 && indent == 0 && j+3 <= len(b) && (string(b[j:j+3]) == "---" || string(b[j:j+3]) == "...") {
				n += 2
			}
			if flow == 0 && indent == 0 && c == '%' {
				i = nextLine(b, j)
				atLineStart = true
				continue
			}
			i = j
			continue
		}
		switch {
		case c == '\n':
			i++
			atLineStart = true
			continue
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		case c == '#' && (i == lineStart || isBlank(b[i-1])):
			i = nextLine(b, i)
			atLineStart = true
			continue
		case c == '"' || c == '\'':
			n++
			if flow == 0 {
				entryCol = i - lineStart
			}
			i = skipQuoted(b, i)
			continue
		case c == '[' || c == '{':
			n++
			if flow < 64 {
				mapping &^= 1 << flow
				if c == '{' {
					mapping |= 1 << flow
				}
			}
			flow++
		case c == ']' || c == '}':
			if flow > 0 {
				flow--
			}
			if c == '}' {
				n++ // the last key's empty value
			}
		case c == ',' && flow > 0:
			if inFlowMapping(mapping, flow) {
				n++ // the key's empty value
			}
		case c == ':' && flow > 0 && (i+1 == len(b) || isBlank(b[i+1]) || isFlowIndicator(b[i+1])):
			if !inFlowMapping(mapping, flow) {
				n += 2 // a single-pair mapping and its possibly empty value
			}
		case (c == '-' || c == '?' || c == ':') && flow == 0 && (i+1 == len(b) || isBlank(b[i+1])):
			switch c {
			case ':':
				// the key's value, when it is not on this line
				if restOfLineEmpty(b, i+1) {
					n++
				}
			case '-':
				// the entry's value, when it is not a scalar on this line
				if entryIsCollection(b, i+1) {
					n++
				}
				entryCol = i - lineStart
			case '?':
				n += 2
				entryCol = i - lineStart
			}
		case (c == '|' || c == '>') && flow == 0:
			n++
			// its content is indented beyond its key or "- " (the root's
			// may be at column 0: counted as tokens, which only overcounts)
			blockParent = entryCol
			i = nextLine(b, i)
			atLineStart = true
			continue
		case c == '*' || c == '&' || c == '!':
			n++
			if c == '*' && flow == 0 {
				entryCol = i - lineStart
			}
			i = skipToken(b, i, flow)
			continue
		default:
			// a plain scalar: up to ": ", " #", the line's end or, in a
			// flow collection, a flow indicator
			n++
			if flow == 0 {
				entryCol = i - lineStart
			}
			i = skipPlain(b, i, flow)
			continue
		}
		i++
	}
	return n
}

// inFlowMapping: the innermost open flow collection is a mapping (deeper
// than 64 levels, a sequence: which only overcounts).
func inFlowMapping(mapping uint64, flow int) bool {
	return flow <= 64 && mapping&(1<<(flow-1)) != 0
}

// entryIsCollection reports whether the value of a block "- " whose text
// follows b[i] may be something other than one scalar on this line: nothing
// (an empty value or a collection on the next lines), a nested "- " or "? ",
// or a "key: " (a mapping).
func entryIsCollection(b []byte, i int) bool {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	if restOfLineEmpty(b, i) {
		return true
	}
	if (b[i] == '-' || b[i] == '?') && (i+1 == len(b) || isBlank(b[i+1])) {
		return true
	}
	for start := i; i < len(b) && b[i] != '\n'; i++ {
		switch c := b[i]; {
		case (c == '"' || c == '\'') && (i == start || isBlank(b[i-1]) || isFlowIndicator(b[i-1])):
			j := skipQuoted(b, i)
			for k := i; k < j && k < len(b); k++ {
				if b[k] == '\n' {
					return true // a quoted scalar over lines: assume the worst
				}
			}
			i = j - 1
		case c == '#' && isBlank(b[i-1]):
			return false
		case c == ':' && (i+1 == len(b) || isBlank(b[i+1])):
			return true
		}
	}
	return false
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isFlowIndicator(c byte) bool { return c == ',' || c == '[' || c == ']' || c == '{' || c == '}' }

// nextLine is the start of the line after the one b[i] is on.
func nextLine(b []byte, i int) int {
	for i < len(b) && b[i] != '\n' {
		i++
	}
	return i + 1
}

func restOfLineEmpty(b []byte, i int) bool {
	for ; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\r':
		case '\n':
			return true
		case '#':
			return isBlank(b[i-1])
		default:
			return false
		}
	}
	return true
}

// skipQuoted skips a quoted scalar starting at b[i], over lines.
func skipQuoted(b []byte, i int) int {
	q := b[i]
	for i++; i < len(b); i++ {
		switch {
		case q == '"' && b[i] == '\\':
			i++
		case b[i] == q:
			if q == '\'' && i+1 < len(b) && b[i+1] == '\'' {
				i++
				continue
			}
			return i + 1
		}
	}
	return i
}

func skipToken(b []byte, i, flow int) int {
	for i++; i < len(b) && !isBlank(b[i]) && !(flow > 0 && isFlowIndicator(b[i])); i++ {
	}
	return i
}

func skipPlain(b []byte, i, flow int) int {
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\n':
			return i
		case c == ':' && (i+1 == len(b) || isBlank(b[i+1]) || flow > 0 && isFlowIndicator(b[i+1])):
			return i
		case c == '#' && isBlank(b[i-1]):
			return i
		case flow > 0 && isFlowIndicator(c):
			return i
		}
	}
	return i
}

// checkTrees measures decoded output against l exactly: nesting depth, and
// nodes with every alias counted as what it expands to (an anchor's size is
// computed once, so a billion laughs costs its printed size to measure).
func (l OutputLimits) checkTrees(roots ...*yaml.Node) error {
	m := treeMeasure{lim: l, anchored: map[*yaml.Node]int{}}
	for _, r := range roots {
		if r == nil {
			continue
		}
		m.total += m.size(r, 0)
		if m.err != nil {
			return m.err
		}
		if m.total > l.MaxNodes {
			return l.tooManyNodes()
		}
	}
	return nil
}

type treeMeasure struct {
	lim      OutputLimits
	anchored map[*yaml.Node]int
	total    int
	err      error
}

// size is the number of nodes n stands for with aliases expanded, capped
// just above the limit so the sums cannot overflow; depth is the number of
// collections around n.
func (m *treeMeasure) size(n *yaml.Node, depth int) int {
	if m.err != nil {
		return 0
	}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		if depth++; depth > m.lim.MaxDepth {
			m.err = m.lim.tooDeep()
			return 0
		}
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		if s, ok := m.anchored[n.Alias]; ok {
			return s
		}
		return m.size(n.Alias, depth)
	}
	if s, ok := m.anchored[n]; ok {
		return s
	}
	s := 1
	for _, c := range n.Content {
		s += m.size(c, depth)
		if s > m.lim.MaxNodes {
			s = m.lim.MaxNodes + 1
			m.err = m.lim.tooManyNodes()
			break
		}
	}
	if n.Anchor != "" {
		m.anchored[n] = s
	}
	return s
}
