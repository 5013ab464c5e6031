package fastyaml

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
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
