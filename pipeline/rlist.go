package pipeline

import (
	"bytes"
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// The ResourceList a function reads and the one it prints.
//
// Most functions leave most resources as they got them (validators all of
// them), and a function that parses its input with kyaml prints an
// unchanged resource as exactly the bytes it was given. So kptr keeps where
// each item's bytes sit in the list it wrote, cuts the function's output
// into items at the lines that start them, and for an item whose bytes are
// those of an input item takes the input's nodes instead of parsing it
// again (only for input items without comments or folded scalars, where
// the round trip plus kyaml's comment copy-back gives the same tree). The
// other items are parsed one by one, in parallel. Any output that is not
// plainly a block ResourceList is read whole by kyaml's ByteReader, as
// before. rlist_test.go checks both ways agree.

// encodedList is an encoded ResourceList with each item's place in it.
type encodedList struct {
	data  []byte
	spans [][2]int // item i is data[spans[i][0]:spans[i][1]]
	seed  maphash.Seed
	// byHash finds input items by the hash of their bytes; only items
	// that may be reused are in it
	byHash map[uint64]int
}

const rlHeader = "apiVersion: " + kio.ResourceListAPIVersion + "\nkind: " + kio.ResourceListKind + "\nitems:\n"

// encodeResourceList writes what kio.ByteWriter{KeepReaderAnnotations: true,
// WrappingKind: ResourceList, FunctionConfig: fnConfig} writes, item by
// item (fastyaml where it can, yaml.v3 otherwise: the same bytes).
func encodeResourceList(nodes []*yaml.RNode, fnConfig *yaml.RNode) (*encodedList, error) {
	if len(nodes) == 0 {
		var b bytes.Buffer
		err := kio.ByteWriter{Writer: &b, KeepReaderAnnotations: true, FunctionConfig: fnConfig,
			WrappingAPIVersion: kio.ResourceListAPIVersion, WrappingKind: kio.ResourceListKind}.Write(nodes)
		return &encodedList{data: b.Bytes()}, err
	}
	l := &encodedList{seed: maphash.MakeSeed(), spans: make([][2]int, len(nodes)), byHash: make(map[uint64]int, len(nodes))}
	// the items are encoded in parallel, each worker's run of items into
	// a buffer of its own, then joined in order (kptr's own time between
	// two functions is otherwise spent on one core while the other is idle)
	type part struct {
		buf    []byte
		hashes []uint64 // per item; 0 for one that may not be reused
		err    error
	}
	workers := min(runtime.GOMAXPROCS(0), len(nodes)/64+1)
	per := (len(nodes) + workers - 1) / workers
	parts := make([]part, (len(nodes)+per-1)/per)
	eachPart(len(parts), func(w int) {
		lo, hi := w*per, min((w+1)*per, len(nodes))
		p := &parts[w]
		p.hashes = make([]uint64, hi-lo)
		buf := make([]byte, 0, 64<<10)
		for i := lo; i < hi; i++ {
			n := nodes[i]
			if p.err = clearEmptyAnnotations(n); p.err != nil {
				return
			}
			if cap(buf)-len(buf) < 16<<10 {
				buf = slices.Grow(buf, len(buf)) // double, not append's quarter
			}
			start := len(buf)
			if buf, p.err = appendSeqItem(buf, n.YNode()); p.err != nil {
				return
			}
			l.spans[i] = [2]int{start, len(buf)}
			if noDocComments(n) && noComments(n.YNode()) && noFolded(n.YNode()) {
				// 0 marks "not reusable": a hash of 0 is left out too
				p.hashes[i-lo] = maphash.Bytes(l.seed, buf[start:])
			}
		}
		p.buf = buf
	})
	size := len(rlHeader)
	for _, p := range parts {
		if p.err != nil {
			return nil, p.err
		}
		size += len(p.buf)
	}
	buf := append(make([]byte, 0, size+size/8+4<<10), rlHeader...)
	for w, p := range parts {
		off := len(buf)
		buf = append(buf, p.buf...)
		for k, h := range p.hashes {
			i := w*per + k
			l.spans[i][0] += off
			l.spans[i][1] += off
			if h == 0 {
				continue
			}
			if _, dup := l.byHash[h]; !dup {
				l.byHash[h] = i
			}
		}
	}
	if fnConfig != nil {
		m := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: "functionConfig"}, fnConfig.YNode()}}
		var err error
		if buf, err = appendDocument(buf, m); err != nil {
			return nil, err
		}
	}
	l.data = buf
	return l, nil
}

// appendSeqItem appends n as an item of a compact top-level sequence.
func appendSeqItem(buf []byte, n *yaml.Node) ([]byte, error) {
	if out, ok := fastyaml.AppendSeqItem(buf, n, fastyaml.Compact); ok {
		return out, nil
	}
	w := bytes.NewBuffer(buf)
	err := encodeDoc(w, &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{n}})
	return w.Bytes(), err
}

// appendDocument appends n as kyaml's encoder writes it as a document.
func appendDocument(buf []byte, n *yaml.Node) ([]byte, error) {
	if out, ok := fastyaml.AppendDocument(buf, n, fastyaml.Compact); ok {
		return out, nil
	}
	w := bytes.NewBuffer(buf)
	err := encodeDoc(w, n)
	return w.Bytes(), err
}

// readResourceList reads a function's output as kio.ByteReader does
// (items, and results), reusing the nodes of input items printed
// unchanged; reused[i] says output[i] is input's node itself. The output is
// measured against lim before anything is decoded and its trees after
// (budget.go): an output over a limit is an *OutputLimitError.
func readResourceList(out []byte, in *encodedList, input []*yaml.RNode, lim OutputLimits) (output []*yaml.RNode, results *yaml.RNode, reused []bool, err error) {
	lim = lim.withDefaults()
	cut, err := cutResourceList(out, in, lim)
	if err != nil {
		return nil, nil, nil, err
	}
	if countNodes(out, lim.MaxNodes) > lim.MaxNodes {
		return nil, nil, nil, lim.tooManyNodes()
	}
	var ok bool
	if cut != nil {
		output, results, reused, ok = cut.decode(out, in, input)
	}
	if !ok {
		r := &kio.ByteReader{Reader: bytes.NewReader(out)}
		if output, err = r.Read(); err != nil {
			return nil, nil, nil, err
		}
		results, reused = r.Results, make([]bool, len(output))
	}
	if len(output) > lim.MaxItems {
		return nil, nil, nil, lim.tooManyItems()
	}
	if countResults(results) > lim.MaxResults {
		return nil, nil, nil, lim.tooManyResults()
	}
	fresh := make([]*yaml.Node, 0, len(output)+1)
	for i, n := range output {
		if !reused[i] {
			fresh = append(fresh, n.YNode())
		}
	}
	if results != nil {
		fresh = append(fresh, results.YNode())
	}
	if err := lim.checkTrees(fresh...); err != nil {
		return nil, nil, nil, err
	}
	return output, results, reused, nil
}

// countResults is the number of entries of a ResourceList's results: a
// list, or kpt's legacy {items: [...]} wrapper.
func countResults(n *yaml.RNode) int {
	if n.IsNil() {
		return 0
	}
	y := n.YNode()
	if y.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(y.Content); i += 2 {
			if y.Content[i].Value == "items" {
				y = y.Content[i+1]
			}
		}
	}
	if y.Kind != yaml.SequenceNode {
		return 0
	}
	return len(y.Content)
}

// cutList is a block ResourceList cut into its header (every top-level
// line outside `items:`) and its items, nothing decoded yet. indent is the
// items' indentation: 0 for a compact list, the spaces before each entry's
// "- " for a wide one (kyaml's encoder before v0.13 writes `items:` so, as
// the catalog's apply-setters does).
type cutList struct {
	header []byte
	items  []chunk
	indent int
}

type chunk struct{ start, end, line int }

// cutResourceList cuts out into a header and items at line starts,
// counting the entries of top-level `items:` and `results:` lists as it
// goes, also in output it does not cut: more than lim allows is an error
// before a single node is built. A nil cutList (and nil error) means the
// output is not a block ResourceList with an `items:` list (compact, or wide:
// every entry at one indentation, every other line of the list indented at
// least as far or blank), and nothing was decided.
func cutResourceList(out []byte, in *encodedList, lim OutputLimits) (*cutList, error) {
	// cut the output into top-level lines outside `items:` (the header) and items
	var header []byte
	var items []chunk
	indent := 0 // the entries' indentation in a wide items list
	inItems, seenItems := false, false
	inResults, results, resultsIndent := false, 0, -1
	// not ours to cut: only counting goes on
	declined := in == nil || in.byHash == nil || bytes.IndexByte(out, '\r') >= 0
	line := 0
	for pos := 0; pos < len(out); line++ {
		end := bytes.IndexByte(out[pos:], '\n')
		if end < 0 {
			end = len(out)
		} else {
			end += pos + 1
		}
		l := out[pos:end]
		switch c := l[0]; {
		case c == ' ' || c == '\n':
			// continuation of the item or header key above, or an entry
			// of a wide items list
			if inItems {
				t := bytes.TrimLeft(l, " ")
				sp := len(l) - len(t)
				blank := len(t) == 0 || t[0] == '\n'
				switch {
				case blank:
				case len(items) == 0 && isEntry(t):
					indent = sp
					items = append(items, chunk{start: pos, line: line})
				case len(items) == 0 || indent > 0 && (sp < indent || sp == indent && !isEntry(t)):
					// not an item of the list, a line outside it, or one
					// between entries (a comment there: whose it is, only a
					// whole parse says, as at column 0 of a compact list)
					declined = true
				case indent > 0 && sp == indent && isEntry(t):
					items[len(items)-1].end = pos
					if len(items) == lim.MaxItems {
						return nil, lim.tooManyItems()
					}
					items = append(items, chunk{start: pos, line: line})
				}
			} else {
				header = append(header, l...)
				if inResults {
					// a wide `results:` list: its entries at the first one's indentation
					t := bytes.TrimLeft(l, " ")
					if isEntry(t) && (resultsIndent < 0 || len(l)-len(t) == resultsIndent) {
						resultsIndent = len(l) - len(t)
						if results++; results > lim.MaxResults {
							return nil, lim.tooManyResults()
						}
					}
				}
			}
		case c == '-' && (len(l) == 1 || l[1] == ' ' || l[1] == '\n'):
			if !inItems {
				// an item of a compact list under a header key (results:)
				header = append(header, l...)
				if inResults && resultsIndent <= 0 {
					resultsIndent = 0
					if results++; results > lim.MaxResults {
						return nil, lim.tooManyResults()
					}
				}
				break
			}
			if indent > 0 {
				declined = true // a compact entry after wide ones
			}
			if len(items) > 0 {
				items[len(items)-1].end = pos
			}
			if len(items) == lim.MaxItems {
				return nil, lim.tooManyItems()
			}
			items = append(items, chunk{start: pos, line: line})
		case string(l) == "items:\n" || string(l) == "items:":
			declined = declined || seenItems
			inItems, seenItems, inResults = true, true, false
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			if bytes.HasPrefix(l, []byte("items")) {
				declined = true
			}
			if inItems && len(items) > 0 {
				items[len(items)-1].end = pos
			}
			inItems = false
			inResults = bytes.HasPrefix(l, []byte("results:"))
			header = append(header, l...)
		default:
			// comments, document markers, directives, flow or quoted keys, tabs
			declined = true
		}
		pos = end
	}
	if declined || !seenItems || len(items) == 0 {
		return nil, nil
	}
	if items[len(items)-1].end == 0 {
		items[len(items)-1].end = len(out)
	}
	return &cutList{header: header, items: items, indent: indent}, nil
}

// isEntry: t starts a block sequence entry.
func isEntry(t []byte) bool {
	return len(t) > 0 && t[0] == '-' && (len(t) == 1 || t[1] == ' ' || t[1] == '\n')
}

// decode is readResourceList's fast path: the header decides, as
// ByteReader does, whether this is a list at all; items printed unchanged
// take their input's nodes, the others are parsed alone, in parallel. ok is
// false when any of that fails, and then nothing was decided.
func (cut *cutList) decode(out []byte, in *encodedList, input []*yaml.RNode) (output []*yaml.RNode, results *yaml.RNode, reused []bool, ok bool) {
	items := cut.items
	header := append(cut.header, "items: []\n"...)
	results, isList := decodeHeader(header)
	if !isList {
		r := &kio.ByteReader{Reader: bytes.NewReader(header)}
		if ns, err := r.Read(); err != nil || len(ns) != 0 || r.WrappingKind == "" {
			return nil, nil, nil, false
		}
		results = r.Results
	}
	output = make([]*yaml.RNode, len(items))
	reused = make([]bool, len(items))
	used := make([]bool, len(input))
	var todo []int
	item := func(c chunk) []byte { return out[c.start:c.end] }
	if cut.indent > 0 {
		// each wide entry as a compact one: its lines outdented as far as
		// the entries are (cutResourceList saw every non-blank line
		// indented at least so far), its nodes' columns moved back after
		item = func(c chunk) []byte { return outdent(out[c.start:c.end], cut.indent) }
	}
	for i, c := range items {
		b := item(c)
		if j, hit := in.byHash[maphash.Bytes(in.seed, b)]; hit && !used[j] {
			s := in.spans[j]
			if bytes.Equal(in.data[s[0]:s[1]], b) {
				used[j], reused[i] = true, true
				output[i] = yaml.NewRNode(input[j].YNode())
				continue
			}
		}
		todo = append(todo, i)
	}
	// parse the rest, in parallel
	var failed atomic.Bool
	parallel(len(todo), func(k int) {
		i := todo[k]
		c := items[i]
		n, ok := decodeSeqItem(item(c), c.line)
		if !ok {
			failed.Store(true)
			return
		}
		if cut.indent > 0 {
			shiftColumns(n, cut.indent)
		}
		output[i] = yaml.NewRNode(n)
	})
	if failed.Load() {
		return nil, nil, nil, false
	}
	return output, results, reused, true
}

// decodeHeader is what kio.ByteReader reads from a cut list's header
// (`items: []` appended): its results node, and whether it is a list
// ByteReader unwraps (kind ResourceList or List). The header is one
// document of top-level keys (cutResourceList declines comments, document
// markers and CR), so ByteReader would decode it whole with yaml.v3, read
// kind as GetMeta does (the first kind key; null reads as "") and take the
// first results key's value; fastyaml gives yaml.v3's node tree, line
// numbers included, for what it accepts. isList is false when fastyaml
// declines the header or it is not such a list; ByteReader then decides.
// With catalog functions the header is mostly results (11,000 at 5,000
// resources), which yaml.v3 parsed at several times fastyaml's cost.
func decodeHeader(header []byte) (results *yaml.RNode, isList bool) {
	doc, ok := fastyaml.Decode(header)
	if !ok || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false
	}
	root := doc.Content[0]
	if k := mapField(root, "kind"); k == nil || k.Tag == yaml.NodeTagNull || (k.Value != kio.ResourceListKind && k.Value != "List") {
		return nil, false
	}
	if mapField(root, "items") == nil {
		return nil, false
	}
	if res := mapField(root, "results"); res != nil {
		results = yaml.NewRNode(res)
	}
	return results, true
}

// decodeSeqItem parses one item cut out of a compact list (fastyaml where
// it can, yaml.v3 otherwise), numbering lines as in the whole output.
func decodeSeqItem(b []byte, line int) (*yaml.Node, bool) {
	n, ok := fastyaml.DecodeSeqItem(b)
	if !ok {
		var doc yaml.Node
		if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
			return nil, false
		}
		if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode || len(doc.Content[0].Content) != 1 {
			return nil, false
		}
		n = doc.Content[0].Content[0]
	}
	if line > 0 {
		shiftLines(n, line)
	}
	return n, true
}

func shiftLines(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftLines(c, by)
	}
}

func shiftColumns(n *yaml.Node, by int) {
	n.Column += by
	for _, c := range n.Content {
		shiftColumns(c, by)
	}
}

// outdent removes n leading spaces from every line of b; a blank line
// (spaces only) loses those it has, as a shorter blank line reads the same
// in YAML.
func outdent(b []byte, n int) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		end := bytes.IndexByte(b, '\n') + 1
		if end == 0 {
			end = len(b)
		}
		l := b[:end]
		k := 0
		for k < n && k < len(l) && l[k] == ' ' {
			k++
		}
		out = append(out, l[k:]...)
		b = b[end:]
	}
	return out
}

// parallel runs f(0..n-1) on up to GOMAXPROCS goroutines.
// eachPart runs f(0) … f(n-1) each on a goroutine of its own (the last on
// the caller's) and waits for them: n is a handful of parts, one per core.
func eachPart(n int, f func(int)) {
	var wg sync.WaitGroup
	for w := 0; w < n-1; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w)
		}()
	}
	if n > 0 {
		f(n - 1)
	}
	wg.Wait()
}

func parallel(n int, f func(int)) {
	workers := min(runtime.GOMAXPROCS(0), n/64+1)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				f(i)
			}
		}()
	}
	wg.Wait()
}
