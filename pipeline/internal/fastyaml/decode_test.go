package fastyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

func init() { strictPanics = true }

// decRef is what yaml.v3's Decoder gives for data, with err set when it
// fails or when data holds more than one document.
func decRef(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("more than one document (%v)", err)
	}
	return &n, nil
}

// decDiff compares two trees field by field and describes the first
// difference ("" when identical).
func decDiff(path string, got, want *yaml.Node) string {
	if got == nil || want == nil {
		if got == want {
			return ""
		}
		return fmt.Sprintf("%s: got %v, want %v", path, got, want)
	}
	type field struct {
		name      string
		got, want any
	}
	for _, f := range []field{
		{"Kind", got.Kind, want.Kind},
		{"Style", got.Style, want.Style},
		{"Tag", got.Tag, want.Tag},
		{"Value", got.Value, want.Value},
		{"Anchor", got.Anchor, want.Anchor},
		{"Line", got.Line, want.Line},
		{"Column", got.Column, want.Column},
		{"HeadComment", got.HeadComment, want.HeadComment},
		{"LineComment", got.LineComment, want.LineComment},
		{"FootComment", got.FootComment, want.FootComment},
		{"Alias", got.Alias != nil, want.Alias != nil},
		{"len(Content)", len(got.Content), len(want.Content)},
	} {
		if f.got != f.want {
			return fmt.Sprintf("%s (line %d col %d, value %q): %s = %#v, yaml.v3 has %#v", path, want.Line, want.Column, want.Value, f.name, f.got, f.want)
		}
	}
	if (got.Content == nil) != (want.Content == nil) {
		return fmt.Sprintf("%s: Content nil=%v, yaml.v3 nil=%v", path, got.Content == nil, want.Content == nil)
	}
	for i := range want.Content {
		if d := decDiff(fmt.Sprintf("%s/%d", path, i), got.Content[i], want.Content[i]); d != "" {
			return d
		}
	}
	return ""
}

// decCheck decodes data with both decoders; it fails t when Decode says ok
// but yaml.v3 fails or differs. It reports whether Decode handled data.
func decCheck(t testing.TB, name string, data []byte) bool {
	t.Helper()
	got, ok := Decode(data)
	if !ok {
		if got != nil {
			t.Errorf("%s: Decode returned a node with ok=false", name)
		}
		return false
	}
	want, err := decRef(data)
	if err != nil {
		t.Errorf("%s: Decode handled input yaml.v3 rejects (%v):\n%s", name, err, data)
		return true
	}
	if d := decDiff("doc", got, want); d != "" {
		t.Errorf("%s: %s\ninput:\n%s", name, d, data)
	}
	return true
}

// decCheckItem checks DecodeSeqItem against the item yaml.v3 decodes.
func decCheckItem(t testing.TB, name string, data []byte) bool {
	t.Helper()
	got, ok := DecodeSeqItem(data)
	if !ok {
		return false
	}
	want, err := decRef(data)
	if err != nil {
		t.Errorf("%s: DecodeSeqItem handled input yaml.v3 rejects (%v):\n%s", name, err, data)
		return true
	}
	root := want.Content[0]
	if root.Kind != yaml.SequenceNode || len(root.Content) != 1 {
		t.Errorf("%s: DecodeSeqItem handled a non-item: yaml.v3 root kind %v with %d entries", name, root.Kind, len(root.Content))
		return true
	}
	if d := decDiff("item", got, root.Content[0]); d != "" {
		t.Errorf("%s: %s\ninput:\n%s", name, d, data)
	}
	return true
}

func TestDecodeTable(t *testing.T) {
	handled := []string{
		"a: b\n",
		"a: b",
		"a: b\nc: d\n",
		"a:\n",
		"a:",
		"a:   \n",
		"a:\nb:\n",
		"a:\n  b:\n",
		"key:\n- a\n- b\n",
		"key:\n  - a\n  - b\nz: 1\n",
		"key:\n- a\nz:\n",
		"- a\n- b\n",
		"-\n- b\n-\n",
		"- - a\n  - b\n- c\n",
		"- a: b\n  c: d\n- e: f\n",
		"-   a: b\n    c: d\n",
		"-\n  a: b\n",
		"-\n  - a\n",
		"key:\n-\n- a\n",
		"key:\n-\n  a: b\n",
		"a:\n  b:\n    c:\n    - d\n    - e: f\n      g: [ ]\n",
		"a: {}\nb: []\n",
		"{}\n",
		"[]",
		"a: 'x'\nb: \"y\"\n",
		"'a': 1\n\"b\" : 2\nc : 3\n",
		"a: 'it''s'\n",
		"a: ''\nb: \"\"\n",
		`a: "\t\n\\\"\x41\u00e9\U0001F600\0\a\b\v\f\r\e\ \N\_\L\P\/"` + "\n",
		"a: \"tab\tin\"\n",
		"a: \"\\\tx\"\n",
		"a: 1\nb: 1.5\nc: true\nd: null\ne: ~\nf: 0x1F\ng: 2001-12-14\nh: .inf\ni: -.5\nj: +1\nk: 0o17\nl: 1e3\nm: Yes\nn: NO\n",
		"a: \"1\"\nb: '0777'\n",
		"a: b c  d   \n",
		"a: b:c\nd: e#f\ng: -h\ni: ?j\nk: :l\nm: x::\n",
		"a: http://example.com/x?y=z#w\n",
		"a b: c\n",
		"a : b\n",
		"é: ü\nßß: \"ñ\"\n- x\n",
		"é: ü\nßß: \"ñ\"\n",
		"- é: ü\n  ß: x\n",
		"a: |\n  x\n  y\n",
		"a: |\n  x\n  y",
		"a: |-\n  x\n  y\n",
		"a: |+\n  x\n  y\n\n\n",
		"a: |+\n  x\n\n\nb: c\n",
		"a: |\n  x\n\n\nb: c\n",
		"a: |2\n   x\n  y\n",
		"a: |1-\n  x\n",
		"a: |-2\n    x\n",
		"a: |\n\n  x\n",
		"a: |\n    \n  x\n",
		"a: |\n  x\n     \n  y\n",
		"a: |\n  x\n \n",
		"a: |\nb: c\n",
		"a: |\n",
		"a: |",
		"a: |\n  \tx\n",
		"a: |\n  x # not a comment\n  #y\n",
		"- |\n  x\n- |-\n  y\n",
		"- a: |\n    x\n  b: y\n",
		"|\n x\n",
		"|+\n x\n\n",
		"|2\n   x\n",
		"plain\n",
		"'quoted'\n",
		"---\na: b\n",
		"\n\na: b\n\n\n",
		"  a: b\n  c: d\n",
		"a:\n    - b\n    - c\n",
		"a: b\n\n\nc: d\n",
		"a: [b]\n",
		"a: 'b' c\n",
		"a: b\n  c\n",
		"a:\n  - b\n  c: d\n",
		"a: b\n- c\n",
		"- a\nb: c\n",
		"a: b\na: c\n",
		"a: - b\n",
		"a: b: c\n",
		"a:\tb\n",
		"a: b\t\n",
		"\ta: b\n",
		"a: b # c\n",
		"# c\na: b\n",
		"a: &x b\n",
		"a: *x\n",
		"a: !!str b\n",
		"a: >\n  x\n",
		"a: \"b\n  c\"\n",
		"a: 'b\n  c'\n",
		"? a\n: b\n",
		"<<: {}\n",
		"a: <<\n",
		"%YAML 1.2\n---\na: b\n",
		"a: b\r\n",
		"\ufeffa: b\n",
		"a: b\n---\nc: d\n",
		"a: b\n...\n",
		"---\n",
		"",
		"\n\n",
		"a: @b\n",
		"a: `b\n",
		"a: ,b\n",
		"a: }\n",
		"a: |0\n  x\n",
		"a: | x\n",
		"a: |\n \tx\n",
		"a: \"\\q\"\n",
		"a: \"\\x4\"\n",
		"a: \"\\uD800\"\n",
		"a: \"b\\\n  c\"\n",
		"- a\n  b\n",
		"- a\n - b\n",
		" - a\n- b\n",
		"a:\n  b: c\n d: e\n",
		"a: |\n    x\n  b: c\n",
		"- |\n  x\n  - y\n",
		"a: b\n \n",
		"a: b\n\t\n",
		"a: \x01\n",
		"a: \u0085\n",
		"a: \u2028\n",
		"a: \xff\n",
		strings.Repeat("k", 1100) + ": v\n",
		strings.Repeat("k", 900) + ": v\n",
		"-\tx\n",
		strings.Repeat("- ", 999) + "a\n",
		strings.Repeat("- ", 1001) + "a\n",
		strings.Repeat("- ", 10001) + "a\n",
		"- \"a\": b\n  'c': d\n",
		"a:\n  \"b\"\n",
		"a:\n  b\n",
		"a:\n  |\n   x\n",
		"a: {}: b\n",
		"{}: b\n",
		"a:\n- b\n  - c\n",
		"a:\n-\n -\n",
		"---a: b\n",
		"...a: b\n",
		"a: ---\n",
		"- ---\n",
		"a: [b]\n", "a: [b, c]\n", "a: [ b ,c ]\n", "a: ['b', \"c\", d e]\n", "a: [ ]\n", "a: [b,]\n",
		"a: [b, [c]]\n", "a: [b: c]\n", "a: [b:c, d:]\n", "a: [-b, -]\n", "a: [- b]\n", "a: [b #c]\n",
		"a: [b#c]\n", "a: [b\n", "a: [b,\n  c]\n", "a: [b?c]\n", "a: [\"b\":c]\n", "a: [1, true, ~, null, 0x1]\n",
		"- [a]\n- [é, ü]\n", "[a, b]\n", "[a]: b\n", "a: [b] c\n", "a: [<<]\n", "a: [b, {}]\n", "a: [b,,c]\n",
	}
	n := 0
	for _, in := range handled {
		if decCheck(t, fmt.Sprintf("%q", in), []byte(in)) {
			n++
		}
	}
	t.Logf("handled %d of %d table inputs", n, len(handled))
	// Inputs that must be handled (the common KRM shapes).
	for _, in := range []string{
		"a: b\n", "a:\n", "- a\n", "key:\n- a\n", "- a: b\n  c: d\n", "a: {}\nb: []\n",
		"a: 'x'\n", "a: \"\\n\"\n", "a: |\n  x\n", "a: |-\n  x\n", "a: |+\n  x\n\n", "---\na: b\n",
		"a: |2\n   x\n", "é: ü\n", "a: b\na: c\n", "a: [b, 'c']\n", "a: b # c\n",
	} {
		if _, ok := Decode([]byte(in)); !ok {
			t.Errorf("%q: not handled", in)
		}
	}
	// Inputs that must fall back.
	for _, in := range []string{
		"# c\n- a\n", "a: &x b\n", "a: *x\n", "a: !!str b\n", "a: >\n  x\n", "a: {b: c}\n", "? a\n: b\n",
		"<<: {}\n", "a: b\r\n", "\ufeffa: b\n", "a: b\n---\nc: d\n", "", "a: b\n  c\n", "a: \"b\n  c\"\n",
		"%YAML 1.2\n---\na: b\n", "a:\tb\n", "\ta: b\n",
	} {
		if _, ok := Decode([]byte(in)); ok {
			t.Errorf("%q: handled, must fall back", in)
		}
	}
}

func TestDecodeSeqItemTable(t *testing.T) {
	for _, in := range []string{
		"- apiVersion: v1\n  kind: ConfigMap\n  data:\n    a: |\n      x\n",
		"- a\n",
		"- a: b\n  c:\n  - d\n",
		"- |\n  x\n",
	} {
		if !decCheckItem(t, fmt.Sprintf("%q", in), []byte(in)) {
			t.Errorf("%q: not handled", in)
		}
	}
	for _, in := range []string{"- a\n- b\n", "a: b\n", "[]\n", "- a\n# c\n", "", "  - a\n"} {
		if _, ok := DecodeSeqItem([]byte(in)); ok && in != "  - a\n" {
			t.Errorf("%q: handled, must fall back", in)
		}
		decCheckItem(t, fmt.Sprintf("%q", in), []byte(in))
	}
}

// decCorpus is every YAML document under the sample trees, split on
// "---" lines.
func decCorpus(t testing.TB) map[string][]byte {
	docs := map[string][]byte{}
	for _, root := range []string{"/work/shared/kpt-e2e-sample", "../../../test", "../../../examples", "../../../deploy"} {
		filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			name := e.Name()
			if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml") && name != "Kptfile" {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for i, part := range bytes.Split(data, []byte("\n---\n")) {
				docs[fmt.Sprintf("%s#%d", path, i)] = part
			}
			return nil
		})
	}
	return docs
}

func decStripComments(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	for _, c := range n.Content {
		decStripComments(c)
	}
}

// decResourceList encodes the corpus documents that are resources into a
// ResourceList the way kyaml writes one, and returns it with its items cut
// out as DecodeSeqItem gets them.
func decResourceList(t testing.TB, docs map[string][]byte, stripComments bool) (list []byte, items [][]byte) {
	var nodes []*kyaml.Node
	for _, data := range docs {
		n, err := decRef(data)
		if err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode {
			continue
		}
		if stripComments {
			decStripComments(n)
		}
		nodes = append(nodes, n.Content[0])
	}
	seq := &kyaml.Node{Kind: kyaml.SequenceNode, Content: nodes}
	rl := &kyaml.Node{Kind: kyaml.MappingNode, Content: []*kyaml.Node{
		{Kind: kyaml.ScalarNode, Value: "apiVersion"}, {Kind: kyaml.ScalarNode, Value: "config.kubernetes.io/v1"},
		{Kind: kyaml.ScalarNode, Value: "kind"}, {Kind: kyaml.ScalarNode, Value: "ResourceList"},
		{Kind: kyaml.ScalarNode, Value: "items"}, seq,
	}}
	var buf bytes.Buffer
	enc := kyaml.NewEncoder(&buf)
	if err := enc.Encode(rl); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	list = buf.Bytes()
	body := list[bytes.Index(list, []byte("\nitems:\n"))+len("\nitems:\n"):]
	for len(body) > 0 {
		next := bytes.Index(body, []byte("\n- "))
		if next < 0 {
			items = append(items, body)
			break
		}
		items = append(items, body[:next+1])
		body = body[next+1:]
	}
	return list, items
}

func TestDecodeCorpus(t *testing.T) {
	docs := decCorpus(t)
	handled := 0
	for name, data := range docs {
		if decCheck(t, name, data) {
			handled++
		}
	}
	// Count the documents without comments ('#') and those with.
	plain, plainHandled, commented, commentedHandled := 0, 0, 0, 0
	for _, data := range docs {
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		_, ok := Decode(data)
		if !bytes.Contains(data, []byte("#")) {
			plain++
			if ok {
				plainHandled++
			}
		} else {
			commented++
			if ok {
				commentedHandled++
			}
		}
	}
	t.Logf("handled %d of %d corpus documents; %d of the %d without comments; %d of the %d with a '#'",
		handled, len(docs), plainHandled, plain, commentedHandled, commented)
	if len(docs) < 100 || plain < 100 || plainHandled*100 < plain*95 {
		t.Errorf("handled only %d of %d corpus documents without comments", plainHandled, plain)
	}
	// Most commented corpus documents carry a license or note header and
	// setter/line comments: shapes the decoder takes.
	if commented < 100 || commentedHandled*100 < commented*90 {
		t.Errorf("handled only %d of %d corpus documents with comments", commentedHandled, commented)
	}

	// With comments: kyaml writes a resource's head comment as "- # c"
	// and the lines below it, a shape DecodeSeqItem takes.
	list, items := decResourceList(t, docs, false)
	decCheck(t, "ResourceList with comments", list)
	withComments, withCommentsHandled := 0, 0
	for i, item := range items {
		ok := decCheckItem(t, fmt.Sprintf("commented item %d", i), item)
		if bytes.Contains(item, []byte("#")) {
			withComments++
			if ok {
				withCommentsHandled++
			}
		}
	}
	t.Logf("DecodeSeqItem handled %d of %d items with a '#'", withCommentsHandled, withComments)
	if withComments < 100 || withCommentsHandled*100 < withComments*90 {
		t.Errorf("DecodeSeqItem handled only %d of %d items with comments", withCommentsHandled, withComments)
	}
	list, items = decResourceList(t, docs, true)
	decCheck(t, "ResourceList", list)
	itemsHandled := 0
	var handledList bytes.Buffer
	handledList.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	for i, item := range items {
		if decCheckItem(t, fmt.Sprintf("item %d", i), item) {
			itemsHandled++
			handledList.Write(item)
		}
	}
	t.Logf("DecodeSeqItem handled %d of %d items", itemsHandled, len(items))
	if len(items) < 50 || itemsHandled*100 < len(items)*95 {
		t.Errorf("DecodeSeqItem handled only %d of %d items", itemsHandled, len(items))
	}
	if !decCheck(t, "ResourceList of the handled items", handledList.Bytes()) {
		t.Errorf("the ResourceList of the handled items is not handled")
	}
}

// decBenchList is a ResourceList as kyaml encodes it: n ConfigMaps and
// Deployment-like resources with literal strings and quoted numbers.
func decBenchList(n int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n")
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, `- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cm-%d
    namespace: default
    labels:
      app: demo
      tier: "backend"
    annotations:
      config.kubernetes.io/index: '0'
      internal.config.kubernetes.io/path: 'cm-%d.yaml'
  data:
    port: "8080"
    enabled: "true"
    script: |
      #!/bin/sh
      echo hello %d
      exit 0
    empty: ""
`, i, i, i)
			continue
		}
		fmt.Fprintf(&b, `- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: app-%d
    labels:
      app: demo
  spec:
    replicas: 3
    selector:
      matchLabels:
        app: demo
    template:
      metadata:
        labels:
          app: demo
      spec:
        containers:
        - name: app
          image: registry.example.com/app:v1.2.%d
          args:
          - --port=8080
          - --verbose
          ports:
          - containerPort: 8080
            protocol: TCP
          env:
          - name: MODE
            value: "production"
          - name: RETRIES
            value: "3"
          resources:
            limits:
              cpu: 500m
              memory: 128Mi
        volumes: []
        securityContext: {}
`, i, i)
	}
	return []byte(b.String())
}

func TestDecodeBenchInput(t *testing.T) {
	data := decBenchList(20)
	if !decCheck(t, "bench list", data) {
		t.Fatal("benchmark input not handled")
	}
}

func BenchmarkDecode(b *testing.B) {
	data := decBenchList(1000)
	b.Run("yaml.v3", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var n yaml.Node
			if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fastyaml", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := Decode(data); !ok {
				b.Fatal("not handled")
			}
		}
	})
}

// TestDecodeGenerated compares both decoders on random documents built
// from tricky fragments, some of them mutated, so that many handled (and
// nearly handled) shapes are checked beyond the byte-level fuzzer's reach.
func TestDecodeGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(decSeed(), 2))
	keys := []string{"a", "key", "'q k'", "\"d\"", "a b", "é", "-x", "k:x", "<<", "~", "1", "true", "\"\"", "''", "a#b", "?x", ":x", "x  "}
	scalars := []string{"v", "1", "-1", "0x1F", "1.5", "true", "Null", "~", "''", "\"\"", "'it''s'", "\"\\t\\u00e9\\x41\\\"\"", "a b  ",
		"v: w", "v #c", "v#c", "http://x/y?z#w", "[]", "{}", "[a, 'b', \"c\"]", "[ ]", "[a,]", "[a: b]", "-", "- x", "@x", "`x", "!x",
		"&a x", "*a", "2001-12-14", "0777", "09", ".inf", "-.inf", "+12", "1e3", "ü", "\"a", "'a", "---", "...", "%x", ",x", "|x", ">", "<<"}
	blocks := []string{"|", "|-", "|+", "|2", "|1-", "|+2", "|0", "|9", "| "}
	var gen func(b *strings.Builder, ind int, depth int)
	pad := func(b *strings.Builder, n int) { b.WriteString(strings.Repeat(" ", n)) }
	literal := func(b *strings.Builder, ind int) {
		b.WriteString(blocks[rng.IntN(len(blocks))] + "\n")
		for i := rng.IntN(4); i >= 0; i-- {
			switch rng.IntN(5) {
			case 0:
				b.WriteString("\n")
			case 1:
				pad(b, ind+rng.IntN(4))
				b.WriteString("\n")
			default:
				pad(b, ind+2+rng.IntN(3)-1)
				b.WriteString(scalars[rng.IntN(len(scalars))] + "\n")
			}
		}
	}
	value := func(b *strings.Builder, ind, depth int) {
		switch r := rng.IntN(10); {
		case r < 5 || depth > 3:
			b.WriteString(" " + scalars[rng.IntN(len(scalars))] + "\n")
		case r < 6:
			b.WriteString(" ")
			literal(b, ind)
		case r < 7:
			b.WriteString("\n")
		default:
			b.WriteString("\n")
			gen(b, ind+[]int{0, 2, 2, 4, 1}[rng.IntN(5)], depth+1)
		}
	}
	gen = func(b *strings.Builder, ind, depth int) {
		n := 1 + rng.IntN(3)
		if rng.IntN(2) == 0 {
			for i := 0; i < n; i++ {
				pad(b, ind)
				b.WriteString(keys[rng.IntN(len(keys))] + ":")
				value(b, ind, depth)
			}
			return
		}
		for i := 0; i < n; i++ {
			pad(b, ind)
			b.WriteString("-")
			switch rng.IntN(4) {
			case 0:
				b.WriteString(" " + keys[rng.IntN(len(keys))] + ":")
				value(b, ind+2, depth)
				if rng.IntN(2) == 0 {
					pad(b, ind+2)
					b.WriteString(keys[rng.IntN(len(keys))] + ":")
					value(b, ind+2, depth)
				}
			case 1:
				b.WriteString(" - " + scalars[rng.IntN(len(scalars))] + "\n")
			default:
				value(b, ind, depth)
			}
		}
	}
	handled := 0
	const total = 30000
	for i := 0; i < total; i++ {
		var b strings.Builder
		gen(&b, rng.IntN(2), 0)
		data := []byte(b.String())
		if rng.IntN(3) == 0 { // mutate one byte
			p := rng.IntN(len(data))
			const subst = " -:#'\"\n\t|>[]{}ax"
			data[p] = subst[rng.IntN(len(subst))]
		}
		if decCheck(t, fmt.Sprintf("generated %d", i), data) {
			handled++
		}
		if data[0] == '-' {
			decCheckItem(t, fmt.Sprintf("generated item %d", i), data)
		}
	}
	t.Logf("handled %d of %d generated documents", handled, total)
	if handled < total/5 {
		t.Errorf("handled only %d of %d generated documents", handled, total)
	}
}

// decSeed is the generator seed: FASTYAML_SEED or 1.
func decSeed() uint64 {
	var s uint64 = 1
	fmt.Sscan(os.Getenv("FASTYAML_SEED"), &s)
	return s
}

// BenchmarkDecodeSeqItem decodes the 1,000 items of the benchmark list one
// by one.
func BenchmarkDecodeSeqItem(b *testing.B) {
	data := decBenchList(1000)
	body := data[bytes.Index(data, []byte("\nitems:\n"))+len("\nitems:\n"):]
	var items [][]byte
	for len(body) > 0 {
		next := bytes.Index(body, []byte("\n- "))
		if next < 0 {
			items = append(items, body)
			break
		}
		items = append(items, body[:next+1])
		body = body[next+1:]
	}
	b.Run("yaml.v3", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			for _, it := range items {
				var n yaml.Node
				if err := yaml.NewDecoder(bytes.NewReader(it)).Decode(&n); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("fastyaml", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			for _, it := range items {
				if _, ok := DecodeSeqItem(it); !ok {
					b.Fatal("not handled")
				}
			}
		}
	})
}

// TestDecodeGeneratedLiterals: literal block scalars in every context, with
// random headers, indentation, blank and space-only lines, tabs, trailers.
func TestDecodeGeneratedLiterals(t *testing.T) {
	rng := rand.New(rand.NewPCG(decSeed(), 3))
	contexts := []struct{ before, after string }{
		{"", ""}, {"k: ", "z: 1\n"}, {"- ", "- z\n"}, {"- k: ", "  z: 1\n"}, {"k:\n- ", "z: 1\n"},
		{"k:\n  k2: ", "  z: 1\n"}, {"- - ", "  - z\n"}, {"k:\n  - ", "  - z\n"}, {"---\nk: ", ""}, {"  k: ", "  z: 1\n"},
	}
	headers := []string{"|", "|-", "|+", "|1", "|2", "|3", "|1-", "|2+", "|-1", "|+3", "|  ", "|0", "|-+", "|10"}
	handled := 0
	const total = 20000
	for i := 0; i < total; i++ {
		c := contexts[rng.IntN(len(contexts))]
		var b strings.Builder
		b.WriteString(c.before + headers[rng.IntN(len(headers))] + "\n")
		for j := rng.IntN(6); j >= 0; j-- {
			switch rng.IntN(6) {
			case 0:
				b.WriteString("\n")
			case 1:
				b.WriteString(strings.Repeat(" ", rng.IntN(8)) + "\n")
			case 2:
				b.WriteString(strings.Repeat(" ", rng.IntN(8)) + "\tx\n")
			default:
				b.WriteString(strings.Repeat(" ", rng.IntN(8)) + []string{"x", "x y", "x ", "#x", "- x", "k: v", "'q'"}[rng.IntN(7)] + "\n")
			}
		}
		if rng.IntN(2) == 0 {
			b.WriteString(c.after)
		}
		data := b.String()
		if rng.IntN(4) == 0 {
			data = strings.TrimSuffix(data, "\n")
		}
		if decCheck(t, fmt.Sprintf("literal %d", i), []byte(data)) {
			handled++
		}
	}
	t.Logf("handled %d of %d generated literals", handled, total)
	if handled < total/4 {
		t.Errorf("handled only %d of %d generated literals", handled, total)
	}
}

// TestDecodeGeneratedScalars: random plain, single- and double-quoted
// scalars (escapes, Unicode, indicators) as keys, values, items and flow
// items.
func TestDecodeGeneratedScalars(t *testing.T) {
	rng := rand.New(rand.NewPCG(decSeed(), 4))
	atoms := []string{"a", "Z", "0", "9", " ", "  ", ":", ": ", "#", " #", "-", "- ", "?", ",", "[", "]", "{", "}", "'", "''", "\"",
		"\\", "\\n", "\\x41", "\\x4", "\\u00e9", "\\uD800", "\\U0001F600", "\\U00110000", "\\q", "\\ ", "\\\"", "\\\t", "\t", "é", "€",
		"\u00a0", "\ufeff", "\u2028", "&", "*", "!", "|", ">", "%", "@", "`", "~", ".", "e", "x", "_", "+", "<<", "---", "..."}
	word := func() string {
		var b strings.Builder
		for j := rng.IntN(5); j >= 0; j-- {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		return b.String()
	}
	quote := func(s string) string {
		switch rng.IntN(3) {
		case 0:
			return "'" + s + "'"
		case 1:
			return "\"" + s + "\""
		}
		return s
	}
	handled := 0
	const total = 20000
	for i := 0; i < total; i++ {
		var data string
		switch rng.IntN(5) {
		case 0:
			data = quote(word()) + ": " + quote(word()) + "\n"
		case 1:
			data = "k: " + quote(word()) + "\nz: " + quote(word()) + "\n"
		case 2:
			data = "- " + quote(word()) + "\n- " + quote(word()) + ": " + quote(word()) + "\n"
		case 3:
			data = "k: [" + quote(word()) + ", " + quote(word()) + "]\n"
		default:
			data = quote(word()) + "\n"
		}
		if decCheck(t, fmt.Sprintf("scalar %d", i), []byte(data)) {
			handled++
		}
	}
	t.Logf("handled %d of %d generated scalars", handled, total)
	if handled < total/5 {
		t.Errorf("handled only %d of %d generated scalars", handled, total)
	}
}
