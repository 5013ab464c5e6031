package fastyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// refEncode is what kyaml's encoder writes: yaml.v3 with indent 2 and
// compact (or, for Wide, default) sequence indentation.
func refEncode(n *yaml.Node, style SeqStyle) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml.v3 panicked: %v", r)
		}
	}()
	var b bytes.Buffer
	e := yaml.NewEncoder(&b)
	e.SetIndent(2)
	if style == Compact {
		e.CompactSeqIndent()
	} else {
		e.DefaultSeqIndent()
	}
	if err := e.Encode(n); err != nil {
		return nil, err
	}
	if err := e.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var styles = []SeqStyle{Compact, Wide}

// check compares AppendDocument with yaml.v3 for n in both sequence styles.
// It reports whether n was handled (in both styles; handling must not depend
// on the style).
func check(t testing.TB, n *yaml.Node) bool {
	t.Helper()
	handled := 0
	for _, st := range styles {
		prefix := []byte("prefix")
		got, ok := AppendDocument(prefix, n, st)
		if !ok {
			if string(got) != "prefix" {
				t.Fatalf("not handled but buffer changed: %q", got)
			}
			continue
		}
		handled++
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatalf("prefix lost: %q", got)
		}
		got = got[len("prefix"):]
		want, err := refEncode(n, st)
		if err != nil {
			t.Fatalf("handled a node yaml.v3 cannot encode (%v):\n%s", err, dump(n))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("style %d: mismatch for\n%s\nyaml.v3:   %q\nfastyaml:  %q", st, dump(n), want, got)
		}
	}
	if handled == 1 {
		t.Fatalf("handled in one sequence style only:\n%s", dump(n))
	}
	if Encodable(n) != (handled == 2) {
		t.Fatalf("Encodable = %v, AppendDocument handled = %v:\n%s", Encodable(n), handled == 2, dump(n))
	}
	return handled == 2
}

// dump describes a node tree for failure messages.
func dump(n *yaml.Node) string {
	var b strings.Builder
	var rec func(n *yaml.Node, depth int)
	rec = func(n *yaml.Node, depth int) {
		fmt.Fprintf(&b, "%sKind=%d Style=%d Tag=%q Value=%q Anchor=%q H=%q L=%q F=%q\n", strings.Repeat("  ", depth),
			n.Kind, n.Style, n.Tag, n.Value, n.Anchor, n.HeadComment, n.LineComment, n.FootComment)
		for _, c := range n.Content {
			rec(c, depth+1)
		}
	}
	rec(n, 0)
	return b.String()
}

func scalar(v, tag string, style yaml.Style) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Value: v, Tag: tag, Style: style}
}

func mapping(kv ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: kv}
}

func seq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
}

func doc(n *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}
}

func str(v string) *yaml.Node { return scalar(v, "!!str", 0) }

func flowStyle(n *yaml.Node) *yaml.Node {
	n.Style |= yaml.FlowStyle
	return n
}

// contexts places a node everywhere a scalar can appear.
func contexts(n *yaml.Node) map[string]*yaml.Node {
	return map[string]*yaml.Node{
		"root":          doc(n),
		"bare root":     n,
		"value":         doc(mapping(str("k"), n)),
		"key":           doc(mapping(n, str("v"))),
		"item":          doc(seq(n)),
		"nested value":  doc(mapping(str("a"), mapping(str("b"), n, str("c"), str("d")))),
		"item in value": doc(mapping(str("a"), seq(n, str("x")))),
		"seq of seq":    doc(seq(seq(n, n), seq(str("x")))),
		"map in seq":    doc(mapping(str("a"), seq(mapping(str("k"), n, n, str("v")), str("y")))),
		"deep":          doc(seq(mapping(str("a"), seq(seq(mapping(str("b"), n)))))),
		"flow seq":      doc(mapping(str("a"), flowStyle(seq(n, str("x"), n)))),
		"flow value":    doc(seq(flowStyle(mapping(str("k"), n, str("l"), seq(n, mapping()))))),
		"flow key":      doc(flowStyle(mapping(n, str("v"), str("w"), n))),
		"nested flow":   doc(flowStyle(seq(seq(n), mapping(str("a"), seq(n)), seq()))),
	}
}

var trickyValues = []string{
	"", " ", "  ", "a", "abc", "8080", "true", "True", "TRUE", "false", "yes", "no", "on", "off", "y", "n",
	"null", "Null", "~", "0", "-1", "+1", "1.5", ".5", "1e3", "1E-3", ".inf", "-.Inf", ".nan", "0x1F", "0o17",
	"017", "0b101", "-0b1", "1_000", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10 -5",
	"<<", "=", "---", "...", "--- a", "... a", "----", "-", "- ", "-a", "- a", "?", "? a", "?a", ":", ": a", ":a",
	"a:", "a: b", "a:b", "a :b", "#", "# a", "a#b", "a #b", "a\t#b", "a ", " a", "a  b", "a\tb", "\ta", "a\t",
	"[", "]", "{", "}", ",", "a,b", "a[b]", "{a}", "&a", "*a", "!a", "!!str", "|", "|-", ">", "'", "''", "a'b",
	"'a'", "\"", "a\"b", "\"a\"", "\\", "a\\b", "%", "@", "`", "a%", "a@b", "a`b",
	"\n", "\n\n", "a\n", "a\nb", "a\nb\n", "a\nb\n\n", "\na", "\n a", " \na", "a \nb", "a\n b", "a\n\nb", "a\n\n",
	"a\r\nb", "a\rb", "\r", "a\u0085b", "a\u2028b", "a\u2029", "\u2028", "a\nb\u2028c", "\u00a0", "a\u00a0b",
	"é", "日本語", "\ufeff", "\ufeffa", "\ufeffa\n", "a\ufeff", "😀", "a😀b", "\x00", "a\x00b", "\x7f", "\x1b", "\x01",
	"\u0080", "\u009f", "\ufffe", "\uffff", "\ue000", "\ud7ff",
	"line1\nline2\n", "  indented\n", "trailing \nspace", "tab\tin\nliteral\n", "x\n  y\n",
	"a\xffb", "\xc3", // invalid UTF-8
	strings.Repeat("k", 128), strings.Repeat("k", 129), strings.Repeat("é", 64), strings.Repeat("é", 65),
	strings.Repeat("a b", 43), strings.Repeat("\"", 129), strings.Repeat("long value ", 20),
	"http://example.com/a?b=c#d", "image:tag", "gcr.io/kpt-fn/set-labels:v0.1.5", "${VAR}", "a=b,c=d",
}

var trickyTags = []string{"", "!!str", "tag:yaml.org,2002:str", "!!int", "!!bool", "!!null", "!!float", "!!timestamp",
	"!!binary", "!!merge", "!foo", "!!map"}

var trickyStyles = []yaml.Style{0, yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle, yaml.LiteralStyle,
	yaml.FoldedStyle, yaml.FlowStyle, yaml.TaggedStyle, yaml.DoubleQuotedStyle | yaml.LiteralStyle,
	yaml.SingleQuotedStyle | yaml.FoldedStyle, yaml.LiteralStyle | yaml.FoldedStyle}

func TestEncodeScalars(t *testing.T) {
	total, handled := 0, 0
	var current string
	defer func() {
		if t.Failed() {
			t.Logf("last case: %s", current)
		}
	}()
	for _, v := range trickyValues {
		for _, tag := range trickyTags {
			for _, st := range trickyStyles {
				for name, n := range contexts(scalar(v, tag, st)) {
					total++
					current = fmt.Sprintf("value %q tag %q style %d context %s", v, tag, st, name)
					ok := check(t, n)
					if ok {
						handled++
					} else if mustHandle(v, tag, st, name) {
						t.Errorf("value %q tag %q style %d context %s: not handled", v, tag, st, name)
					}
				}
			}
		}
	}
	t.Logf("%d of %d handled", handled, total)
}

// mustHandle says which scalars must not fall back: strings (untagged or
// !!str) in the plain, quoted and literal styles, valid UTF-8, except keys
// that need "? ".
func mustHandle(v, tag string, st yaml.Style, context string) bool {
	if tag != "" && shortTag(tag) != strTag || !utf8.ValidString(v) {
		return false
	}
	switch st {
	case 0, yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle, yaml.LiteralStyle, yaml.FoldedStyle, yaml.FlowStyle,
		yaml.DoubleQuotedStyle | yaml.LiteralStyle, yaml.SingleQuotedStyle | yaml.FoldedStyle, yaml.LiteralStyle | yaml.FoldedStyle:
	default:
		return false
	}
	if (context == "key" || context == "map in seq" || context == "flow key") && (len(v) > 128 || strings.ContainsAny(v, "\n\r\u0085\u2028\u2029")) {
		return false
	}
	return true
}

// TestEncodeHandlesCommonCases pins what must not fall back: the shapes
// every Kubernetes resource has.
func TestEncodeHandlesCommonCases(t *testing.T) {
	cases := []*yaml.Node{
		doc(mapping(str("apiVersion"), str("v1"), str("kind"), str("ConfigMap"),
			str("metadata"), mapping(str("name"), str("x"), str("labels"), mapping()),
			str("data"), mapping(str("port"), str("8080"), str("flag"), str("true"), str("empty"), str(""),
				str("script"), str("#!/bin/sh\necho hi\n"), str("nochomp"), str("a\nb"),
				str("keep"), str("a\n\n"), str("quoted"), scalar("x", "!!str", yaml.DoubleQuotedStyle)),
			str("list"), seq(str("a"), scalar("1", "!!int", 0), mapping(str("k"), str("v")), seq()),
			str("nested"), seq(seq(str("a"), str("b")), seq(mapping(str("c"), str("d")))))),
		mapping(str("a"), scalar("", "!!null", 0), str("b"), scalar("~", "!!null", 0)),
		seq(str("x")),
		str("root"),
		scalar("multi\nline\n", "!!str", yaml.LiteralStyle),
	}
	for i, n := range cases {
		if !check(t, n) {
			t.Errorf("case %d not handled:\n%s", i, dump(n))
		}
	}
}

func TestEncodeFallsBack(t *testing.T) {
	badAnchor := doc(mapping(str("a"), str("b")))
	badAnchor.Content[0].Content[1].Anchor = "x y"
	badAlias := doc(mapping(str("a"), &yaml.Node{Kind: yaml.AliasNode, Value: "é"}))
	emptyAlias := doc(mapping(str("a"), &yaml.Node{Kind: yaml.AliasNode}))
	flow := doc(mapping(str("a"), flowStyle(mapping(seq(str("b")), str("c")))))
	cases := map[string]*yaml.Node{
		"bad anchor":       badAnchor,
		"bad alias":        badAlias,
		"empty alias":      emptyAlias,
		"comment bad utf8": doc(mapping(str("a"), &yaml.Node{Kind: yaml.ScalarNode, Value: "b", LineComment: "# \xff"})),
		"pending line": {Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, LineComment: "# l",
			Content: []*yaml.Node{str("a"), str("b")}}}},
		"flow":           flow,
		"custom tag":     doc(mapping(str("a"), scalar("b", "!foo", 0))),
		"binary":         doc(mapping(str("a"), scalar("aGk=", "!!binary", 0))),
		"int tag kept":   doc(mapping(str("a"), scalar("b", "!!int", 0))),
		"tagged":         doc(mapping(str("a"), scalar("b", "!!str", yaml.TaggedStyle))),
		"complex key":    doc(mapping(mapping(str("a"), str("b")), str("c"))),
		"long key":       doc(mapping(str(strings.Repeat("k", 129)), str("c"))),
		"multiline key":  doc(mapping(str("a\nb"), str("c"))),
		"invalid utf8":   doc(mapping(str("a"), str("\xff"))),
		"empty doc":      {Kind: yaml.DocumentNode},
		"two roots":      {Kind: yaml.DocumentNode, Content: []*yaml.Node{str("a"), str("b")}},
		"zero node":      {},
		"odd mapping":    doc(mapping(str("a"))),
		"custom map tag": doc(&yaml.Node{Kind: yaml.MappingNode, Tag: "!x", Content: []*yaml.Node{str("a"), str("b")}}),
	}
	for name, n := range cases {
		for _, st := range styles {
			if out, ok := AppendDocument([]byte("x"), n, st); ok || string(out) != "x" {
				t.Errorf("%s: handled (ok=%v, out=%q); want fallback", name, ok, out)
			}
			if out, ok := AppendSeqItem([]byte("x"), n, st); ok || string(out) != "x" {
				t.Errorf("%s: AppendSeqItem handled (ok=%v, out=%q); want fallback", name, ok, out)
			}
		}
		if Encodable(n) {
			t.Errorf("%s: Encodable", name)
		}
	}
}

// corpusDirs are the YAML trees of the differential test and fuzz seeds.
var corpusDirs = []string{"/work/shared/kpt-e2e-sample", "../../../test", "../../../examples", "../../../deploy"}

type corpusDoc struct {
	file string
	raw  []byte // the document's file (for fuzz seeds)
	node *yaml.Node
}

func loadCorpus(t testing.TB) []corpusDoc {
	var docs []corpusDoc
	for _, dir := range corpusDirs {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return nil
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			dec := yaml.NewDecoder(bytes.NewReader(raw))
			for {
				var n yaml.Node
				if err := dec.Decode(&n); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Logf("%s: %v (skipped)", path, err)
					}
					break
				}
				docs = append(docs, corpusDoc{file: path, raw: raw, node: &n})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return docs
}

// stripComments returns a deep copy of n without comments.
func stripComments(n *yaml.Node) *yaml.Node {
	c := *n
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	c.Content = nil
	for _, k := range n.Content {
		c.Content = append(c.Content, stripComments(k))
	}
	return &c
}

// TestEncodeCorpus is the differential test over every YAML document of the
// repository's test data, examples and deploy files and the kpt e2e sample:
// as decoded (comments make most of them fall back) and with comments
// stripped (the shape KRM functions hand back), in both sequence styles.
func TestEncodeCorpus(t *testing.T) {
	docs := loadCorpus(t)
	if len(docs) < 100 {
		t.Fatalf("only %d corpus documents found", len(docs))
	}
	handled, handledStripped := 0, 0
	var unhandled []string
	for _, d := range docs {
		if check(t, d.node) {
			handled++
		}
		if check(t, stripComments(d.node)) {
			handledStripped++
		} else {
			unhandled = append(unhandled, d.file)
		}
	}
	t.Logf("%d documents: %d handled as decoded, %d with comments stripped", len(docs), handled, handledStripped)
	if len(unhandled) > 0 {
		t.Logf("not handled without comments: %v", unhandled)
	}
	if handledStripped < len(docs)*95/100 || handled < len(docs)*9/10 {
		t.Errorf("only %d (as decoded) and %d (comment-free) of %d documents handled", handled, handledStripped, len(docs))
	}
}

// TestAppendSeqItem: appending the items one by one gives the bytes of
// encoding the whole sequence at once.
func TestAppendSeqItem(t *testing.T) {
	var items []*yaml.Node
	for _, d := range loadCorpus(t) {
		// As decoded (with comments) and without comments.
		for _, n := range []*yaml.Node{d.node, stripComments(d.node)} {
			if n.Kind == yaml.DocumentNode {
				n = n.Content[0]
			}
			items = append(items, n)
		}
	}
	for _, v := range trickyValues {
		items = append(items, str(v), scalar(v, "!!str", yaml.LiteralStyle), seq(str(v)), mapping(str("k"), str(v)))
	}
	items = append(items, seq(), mapping(), seq(seq(str("a"))), scalar("", "", 0))
	for _, st := range styles {
		var buf []byte
		var handledItems []*yaml.Node
		for _, it := range items {
			out, ok := AppendSeqItem(buf, it, st)
			if !ok {
				if len(out) != len(buf) {
					t.Fatalf("not handled but buffer changed")
				}
				continue
			}
			buf = out
			handledItems = append(handledItems, it)
			// Each item alone must also be exact.
			one, _ := AppendSeqItem(nil, it, st)
			want, err := refEncode(seq(it), st)
			if err != nil || !bytes.Equal(one, want) {
				t.Fatalf("item %s: got %q want %q (%v)", dump(it), one, want, err)
			}
		}
		if len(handledItems) < len(items)*9/10 {
			t.Fatalf("only %d of %d items handled", len(handledItems), len(items))
		}
		want, err := refEncode(&yaml.Node{Kind: yaml.SequenceNode, Content: handledItems}, st)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, want) {
			t.Fatalf("style %d: item by item differs from the whole sequence (%d vs %d bytes)", st, len(buf), len(want))
		}
		t.Logf("style %d: %d of %d items, %d bytes", st, len(handledItems), len(items), len(buf))
	}
}

// treeBuilder builds node trees from a byte stream of decisions (random
// bytes in TestEncodeRandomTrees, fuzz input in FuzzEncodeTree): shapes
// decoding never produces, like Style 0 strings with leading spaces, tags ""
// vs "!!str", quoted styles on keys.
type treeBuilder struct {
	b        []byte
	comments bool // also attach head, line and foot comments
}

func (tb *treeBuilder) next() int {
	if len(tb.b) == 0 {
		return 0
	}
	c := tb.b[0]
	tb.b = tb.b[1:]
	return int(c)
}

var treePieces = []string{" ", "  ", "\n", "\n\n", "\t", ":", ": ", "#", " #", "-", "- ", "?", "'", "\"", "\\", "!", "&",
	"*", "|", ">", "%", "@", "`", ",", "[", "]", "{", "}", ".", "...", "---", "~", "0", "1", "0x", "e", "a", "b", "key",
	"true", "null", "\r", "\u0085", "\u2028", "\u00a0", "é", "\ufeff", "😀", "\x00", "\x7f", "\x1b", "_", "+", "<<",
	"y", "2001-12-14", "1.5", ".inf", "\xff"}

var treeTags = []string{"", "", "!!str", "!!str", "tag:yaml.org,2002:str", "!!int", "!!bool", "!!null", "!!float",
	"!!binary", "!x", "!!map", "!!seq"}

var treeStyles = []yaml.Style{0, 0, 0, yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle, yaml.LiteralStyle, yaml.FoldedStyle,
	yaml.FlowStyle, yaml.TaggedStyle, yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle}

func (tb *treeBuilder) value() string {
	n := tb.next() % 9
	var s strings.Builder
	for i := 0; i < n; i++ {
		s.WriteString(treePieces[tb.next()%len(treePieces)])
	}
	return s.String()
}

func (tb *treeBuilder) node(depth int) *yaml.Node {
	c := tb.next()
	kind := c % 4
	if depth > 4 {
		kind = 0
	}
	var n *yaml.Node
	switch kind {
	case 0, 1:
		n = scalar(tb.value(), treeTags[tb.next()%len(treeTags)], treeStyles[tb.next()%len(treeStyles)])
	case 2:
		n = &yaml.Node{Kind: yaml.MappingNode}
		if c&0x10 != 0 {
			n.Tag = "!!map"
		}
		for i := tb.next() % 4; i > 0; i-- {
			n.Content = append(n.Content, tb.node(depth+1), tb.node(depth+1))
		}
	case 3:
		n = &yaml.Node{Kind: yaml.SequenceNode}
		if c&0x10 != 0 {
			n.Tag = "!!seq"
		}
		for i := tb.next() % 4; i > 0; i-- {
			n.Content = append(n.Content, tb.node(depth+1))
		}
	}
	if c&0xE0 == 0xE0 {
		n.Style |= yaml.FlowStyle
	}
	if d := tb.next(); d&0xF == 0xF {
		n.Anchor = treeAnchors[tb.next()%len(treeAnchors)]
	} else if d&0xF == 0xE {
		n = &yaml.Node{Kind: yaml.AliasNode, Value: treeAnchors[tb.next()%len(treeAnchors)]}
	}
	if tb.comments {
		if d := tb.next(); d&0x7 == 0x7 {
			n.HeadComment = treeComments[tb.next()%len(treeComments)]
		} else if d&0x7 == 0x6 {
			n.LineComment = treeComments[tb.next()%len(treeComments)]
		} else if d&0x7 == 0x5 {
			n.FootComment = treeComments[tb.next()%len(treeComments)]
		}
	}
	return n
}

var treeAnchors = []string{"a", "x-1", "_", "A9", "a b", "é", "a:", "", strings.Repeat("k", 127)}

var treeComments = []string{"# c", "#", "c", "# a\n# b", "# a\n\n# b", "#x\n", "\n# y", "# é", "# \u2028 z", "# a\r\nb"}

func (tb *treeBuilder) document() *yaml.Node {
	tb.comments = tb.next()%4 == 0
	n := tb.node(0)
	if d := tb.next(); d%2 == 0 {
		n = doc(n)
		if tb.comments && d%8 == 0 {
			n.HeadComment = "# doc head"
		}
		if tb.comments && d%16 == 2 {
			n.FootComment = "# doc foot"
		}
	}
	return n
}

func TestEncodeRandomTrees(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	buf := make([]byte, 400)
	handled := 0
	const rounds = 20000
	for i := 0; i < rounds; i++ {
		r.Read(buf)
		tb := &treeBuilder{b: buf}
		n := tb.document()
		if check(t, n) {
			handled++
		}
		// The same tree as an item of a top-level sequence.
		if n.Kind != yaml.DocumentNode {
			for _, st := range styles {
				got, ok := AppendSeqItem(nil, n, st)
				if !ok {
					continue
				}
				want, err := refEncode(seq(n), st)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("AppendSeqItem:\n%s\ngot  %q\nwant %q (%v)", dump(n), got, want, err)
				}
			}
		}
	}
	t.Logf("%d of %d random trees handled", handled, rounds)
	if handled < rounds/10 {
		t.Errorf("only %d of %d random trees handled", handled, rounds)
	}
}

// benchResources is n Kubernetes-like resources (ConfigMaps with numeric,
// boolean and multi-line data; Deployments with containers, ports, env,
// resources, labels), as yaml.v3 decodes them.
func benchResources(tb testing.TB, n int) []*yaml.Node {
	const cm = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config-%d
  namespace: team-a
  labels:
    app.kubernetes.io/name: app
    app.kubernetes.io/instance: app-%d
  annotations:
    config.kubernetes.io/index: '%d'
    internal.config.kubernetes.io/path: 'configmaps/app-%d.yaml'
data:
  port: "8080"
  debug: "false"
  replicas: "3"
  greeting: hello world
  url: https://example.com/api/v1?x=1
  script: |
    #!/bin/sh
    set -eu
    echo "starting $HOSTNAME"
    exec /app --port=8080
  empty: ""
`
	const deploy = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%d
  namespace: team-a
  labels:
    app: web
    tier: frontend
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: gcr.io/example/web:v1.%d.0
        args:
        - --port=8080
        - --verbose
        ports:
        - containerPort: 8080
          protocol: TCP
        - containerPort: 9090
          name: metrics
        env:
        - name: MODE
          value: production
        - name: WORKERS
          value: "4"
        resources:
          limits:
            cpu: 500m
            memory: 128Mi
          requests:
            cpu: 250m
            memory: 64Mi
        readinessProbe:
          httpGet:
            path: /healthz
            port: 8080
      tolerations: []
`
	var out []*yaml.Node
	for i := 0; i < n; i++ {
		src := fmt.Sprintf(cm, i, i, i, i)
		if i%2 == 1 {
			src = fmt.Sprintf(deploy, i, i)
		}
		var d yaml.Node
		if err := yaml.Unmarshal([]byte(src), &d); err != nil {
			tb.Fatal(err)
		}
		out = append(out, &d)
	}
	return out
}

func TestBenchResourcesHandled(t *testing.T) {
	var items []*yaml.Node
	for _, d := range benchResources(t, 10) {
		if !check(t, d) {
			t.Fatalf("benchmark resource not handled:\n%s", dump(d))
		}
		items = append(items, d.Content[0])
	}
	for _, st := range styles {
		var buf []byte
		for _, it := range items {
			var ok bool
			if buf, ok = AppendSeqItem(buf, it, st); !ok {
				t.Fatal("not handled")
			}
		}
		want, _ := refEncode(seq(items...), st)
		if !bytes.Equal(buf, want) {
			t.Fatalf("style %d: seq items differ", st)
		}
	}
}

// BenchmarkEncode: 1,000 resources (half ConfigMaps, half Deployments),
// each encoded as a document, by yaml.v3 (kyaml's settings) and by
// AppendDocument; and as the items of a ResourceList (one block sequence).
func BenchmarkEncode(b *testing.B) {
	docs := benchResources(b, 1000)
	var size int64
	for _, d := range docs {
		out, _ := AppendDocument(nil, d, Compact)
		size += int64(len(out))
	}
	b.Run("docs/yaml.v3", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var w bytes.Buffer
		for i := 0; i < b.N; i++ {
			w.Reset()
			for _, d := range docs {
				e := yaml.NewEncoder(&w)
				e.SetIndent(2)
				e.CompactSeqIndent()
				if err := e.Encode(d); err != nil {
					b.Fatal(err)
				}
				e.Close()
			}
		}
	})
	b.Run("docs/fastyaml", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = buf[:0]
			for _, d := range docs {
				var ok bool
				if buf, ok = AppendDocument(buf, d, Compact); !ok {
					b.Fatal("not handled")
				}
			}
		}
	})
	b.Run("stream/yaml.v3", func(b *testing.B) {
		// One encoder for all documents, as kio.ByteWriter writes them.
		b.SetBytes(size)
		b.ReportAllocs()
		var w bytes.Buffer
		for i := 0; i < b.N; i++ {
			w.Reset()
			e := yaml.NewEncoder(&w)
			e.SetIndent(2)
			e.CompactSeqIndent()
			for _, d := range docs {
				if err := e.Encode(d); err != nil {
					b.Fatal(err)
				}
			}
			e.Close()
		}
	})
	b.Run("stream/fastyaml", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = buf[:0]
			for j, d := range docs {
				if j > 0 {
					buf = append(buf, "---\n"...)
				}
				var ok bool
				if buf, ok = AppendDocument(buf, d, Compact); !ok {
					b.Fatal("not handled")
				}
			}
		}
	})
	items := seq()
	for _, d := range docs {
		items.Content = append(items.Content, d.Content[0])
	}
	b.Run("resourcelist/yaml.v3", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var w bytes.Buffer
		for i := 0; i < b.N; i++ {
			w.Reset()
			e := yaml.NewEncoder(&w)
			e.SetIndent(2)
			e.CompactSeqIndent()
			if err := e.Encode(items); err != nil {
				b.Fatal(err)
			}
			e.Close()
		}
	})
	b.Run("resourcelist/fastyaml", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = buf[:0]
			for _, it := range items.Content {
				var ok bool
				if buf, ok = AppendSeqItem(buf, it, Compact); !ok {
					b.Fatal("not handled")
				}
			}
		}
	})
}

// TestAppendDocumentStream: several documents written by one yaml.v3
// encoder (as kio.ByteWriter does) are the AppendDocument outputs joined by
// "---\n".
func TestAppendDocumentStream(t *testing.T) {
	var docs []*yaml.Node
	for _, d := range loadCorpus(t) {
		docs = append(docs, d.node, stripComments(d.node))
	}
	for _, v := range trickyValues {
		docs = append(docs, doc(str(v)), doc(scalar(v, "", yaml.LiteralStyle)), doc(mapping(str("k"), str(v))))
	}
	for _, st := range styles {
		var w bytes.Buffer
		e := yaml.NewEncoder(&w)
		e.SetIndent(2)
		if st == Compact {
			e.CompactSeqIndent()
		} else {
			e.DefaultSeqIndent()
		}
		var buf []byte
		n := 0
		for _, d := range docs {
			if !Encodable(d) {
				continue
			}
			if n > 0 {
				buf = append(buf, "---\n"...)
			}
			buf, _ = AppendDocument(buf, d, st)
			if err := e.Encode(d); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if n < len(docs)/2 {
			t.Fatalf("only %d of %d documents handled", n, len(docs))
		}
		if !bytes.Equal(buf, w.Bytes()) {
			t.Fatalf("style %d: stream of %d documents differs", st, n)
		}
	}
}

// TestAppendSeqItemInResourceList: in Compact style, the items of a
// sequence under a top-level key ("items:" of a ResourceList) are written
// exactly like the items of a top-level sequence, so a ResourceList can be
// assembled as header + "items:\n" + AppendSeqItem... + the remaining keys.
func TestAppendSeqItemInResourceList(t *testing.T) {
	var items []*yaml.Node
	for _, d := range loadCorpus(t) {
		if d.node.Kind == yaml.DocumentNode && d.node.Content[0].Kind == yaml.MappingNode {
			items = append(items, d.node.Content[0])
		}
	}
	var body []byte
	var used []*yaml.Node
	for _, it := range items {
		if out, ok := AppendSeqItem(body, it, Compact); ok {
			body = out
			used = append(used, it)
		}
	}
	if len(used) < len(items)*9/10 {
		t.Fatalf("only %d of %d items handled", len(used), len(items))
	}
	fnConfig := mapping(str("apiVersion"), str("v1"), str("kind"), str("ConfigMap"), str("data"), mapping(str("a"), str("1")))
	rl := mapping(str("apiVersion"), str("config.kubernetes.io/v1"), str("kind"), str("ResourceList"),
		str("items"), seq(used...), str("functionConfig"), fnConfig)
	want, err := refEncode(doc(rl), Compact)
	if err != nil {
		t.Fatal(err)
	}
	got := []byte("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	got = append(got, body...)
	tailDoc, ok := AppendDocument(nil, doc(mapping(str("functionConfig"), fnConfig)), Compact)
	if !ok {
		t.Fatal("functionConfig not handled")
	}
	got = append(got, tailDoc...)
	if !bytes.Equal(got, want) {
		t.Fatalf("assembled ResourceList differs from yaml.v3's (%d vs %d bytes)", len(got), len(want))
	}
}

// TestEncodeAnchorsAliases: anchors on scalars and collections, aliases as
// values, items and keys, in every context, with comments (comments inside
// flow collections are left to yaml.v3).
func commented(n *yaml.Node) bool {
	return n.HeadComment != "" || n.LineComment != "" || n.FootComment != ""
}

func TestEncodeAnchorsAliases(t *testing.T) {
	anchored := func(n *yaml.Node, a string) *yaml.Node { n.Anchor = a; return n }
	alias := func(a string) *yaml.Node { return &yaml.Node{Kind: yaml.AliasNode, Value: a} }
	nodes := []*yaml.Node{
		anchored(str("v"), "a"),
		anchored(str(""), "a"),
		anchored(scalar("x\ny\n", "!!str", 0), "lit"),
		anchored(scalar("q", "!!str", yaml.DoubleQuotedStyle), "a-1"),
		anchored(mapping(str("k"), str("v")), "m"),
		anchored(seq(str("i")), "s"),
		anchored(mapping(), "e"),
		anchored(flowStyle(seq(str("i"))), "f"),
		alias("a"),
		alias(strings.Repeat("k", 128)),
		{Kind: yaml.AliasNode, Value: "c", HeadComment: "# h", LineComment: "# l", FootComment: "# f"},
	}
	total, handled := 0, 0
	for _, n := range nodes {
		for name, c := range contexts(n) {
			total++
			if check(t, c) {
				handled++
			} else if name != "key" && name != "map in seq" && name != "flow key" && !(commented(n) && strings.HasPrefix(name, "flow") || commented(n) && name == "nested flow") {
				t.Errorf("context %s not handled:\n%s", name, dump(c))
			}
		}
		// As an item of a sequence, and as a key.
		checkSeqItem(t, n)
		check(t, doc(mapping(alias("k"), n)))
	}
	t.Logf("%d of %d handled", handled, total)
}
