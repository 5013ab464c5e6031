package fastyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// checkSeqItem compares AppendSeqItem for n with yaml.v3's encoding of a
// sequence holding n.
func checkSeqItem(t *testing.T, n *yaml.Node) {
	t.Helper()
	for _, st := range styles {
		got, ok := AppendSeqItem(nil, n, st)
		if !ok {
			continue
		}
		want, err := refEncode(seq(n), st)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendSeqItem style %d:\n%s\ngot  %q\nwant %q (%v)", st, dump(n), got, want, err)
		}
	}
}

// FuzzEncode decodes the input with yaml.v3 and, for every document it
// holds (as decoded and with comments stripped), requires AppendDocument and
// AppendSeqItem to either fall back or write yaml.v3's bytes.
func FuzzEncode(f *testing.F) {
	for _, d := range loadCorpus(f) {
		f.Add(d.raw)
	}
	f.Add([]byte("a: |\n  x\n\n  y\n\n\nb: '  '\nc: \"\\t\"\n"))
	f.Add([]byte("# head\n\nbase: &b # line\n  k: v # kl\n  # foot\nuse: *b\nlist: &l [1, *b]\n*b : x\nseq:\n- &s one\n- *s\n# end\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 1<<16 {
			return
		}
		dec := yaml.NewDecoder(bytes.NewReader(in))
		for i := 0; i < 16; i++ {
			var n yaml.Node
			if err := dec.Decode(&n); err != nil {
				if !errors.Is(err, io.EOF) {
					return
				}
				return
			}
			for _, d := range []*yaml.Node{&n, stripComments(&n)} {
				check(t, d)
				if len(d.Content) == 1 {
					checkSeqItem(t, d.Content[0])
				}
			}
		}
	})
}

// FuzzEncodeTree builds node trees straight from the fuzz input (see
// treeBuilder): values, styles and tags decoding never produces.
func FuzzEncodeTree(f *testing.F) {
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 32; i++ {
		b := make([]byte, 64+i*8)
		r.Read(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tb := &treeBuilder{b: in}
		n := tb.document()
		check(t, n)
		if n.Kind != yaml.DocumentNode {
			checkSeqItem(t, n)
		}
	})
}

// randomYAML writes a random block-style YAML text with comments (own-line,
// trailing, indented at random depths) and blank lines in many places, so
// decoding gives the comment placements yaml.v3's parser really produces.
func randomYAML(r *rand.Rand) []byte {
	var b bytes.Buffer
	comment := func(indent int) {
		switch r.Intn(8) {
		case 0:
			b.WriteString(strings.Repeat(" ", indent) + "# own line\n")
		case 1:
			b.WriteString("\n")
		case 2:
			b.WriteString(strings.Repeat(" ", r.Intn(6)) + "# wild\n")
		case 3:
			b.WriteString("\n# after blank\n\n")
		}
	}
	scalars := []string{"v", "'q'", "\"d\\t\"", "8080", "\"8080\"", "true", "~", "", "a b", "[x, y]", "{k: v}", "[]", "{}", "&a anchored", "*a", "&b [1, *a]", "|\n%s  line1\n%s  line2\n", ">-\n%s  folded\n%s  text\n"}
	var node func(indent, depth int)
	node = func(indent, depth int) {
		pad := strings.Repeat(" ", indent)
		kind := r.Intn(3)
		if depth > 3 {
			kind = 2
		}
		n := 1 + r.Intn(3)
		for i := 0; i < n; i++ {
			comment(indent)
			switch kind {
			case 0: // mapping entries
				fmt.Fprintf(&b, "%sk%d:", pad, i)
				if r.Intn(2) == 0 {
					if r.Intn(4) == 0 {
						b.WriteString(" # key line")
					}
					b.WriteString("\n")
					node(indent+2*r.Intn(2)+map[bool]int{true: 2, false: 0}[r.Intn(2) == 0], depth+1)
					continue
				}
			case 1: // sequence items
				fmt.Fprintf(&b, "%s-", pad)
				if r.Intn(2) == 0 {
					b.WriteString("\n")
					node(indent+2, depth+1)
					continue
				}
			case 2:
				fmt.Fprintf(&b, "%sk%d:", pad, i)
			}
			s := scalars[r.Intn(len(scalars))]
			if strings.Contains(s, "%s") {
				s = fmt.Sprintf(s, pad, pad)
				b.WriteString(" " + s)
				continue
			}
			if s != "" {
				b.WriteString(" " + s)
			}
			if r.Intn(3) == 0 {
				b.WriteString(" # line")
			}
			b.WriteString("\n")
		}
		comment(indent)
	}
	if r.Intn(3) == 0 {
		b.WriteString("# document head\n\n")
	}
	node(0, 0)
	if r.Intn(3) == 0 {
		b.WriteString("\n# document foot\n")
	}
	return b.Bytes()
}

func TestEncodeRandomCommentedYAML(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	decoded, handled := 0, 0
	for i := 0; i < 3000; i++ {
		in := randomYAML(r)
		var n yaml.Node
		if err := yaml.Unmarshal(in, &n); err != nil || n.Kind == 0 {
			continue
		}
		decoded++
		if check(t, &n) {
			handled++
		}
		if len(n.Content) == 1 {
			checkSeqItem(t, n.Content[0])
		}
	}
	t.Logf("%d texts decoded, %d handled", decoded, handled)
	if decoded < 1000 || handled < decoded*8/10 {
		t.Errorf("%d texts decoded, only %d handled", decoded, handled)
	}
}
