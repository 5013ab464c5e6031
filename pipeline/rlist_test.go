package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/pipeline/internal/fastyaml"
	"sigs.k8s.io/kustomize/kyaml/fn/framework"
	"sigs.k8s.io/kustomize/kyaml/fn/runtime/runtimeutil"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// normDump is dump with the tags a parser would give to nodes built in
// code (Tag ""), and without positions: what reusing an input node instead
// of parsing its printed bytes may change, and nothing else.
func normDump(rn *yaml.RNode) string {
	var b strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		tag := n.Tag
		if tag == "" {
			switch n.Kind {
			case yaml.ScalarNode:
				tag = fastyaml.ResolveTag(n.Value)
				if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
					tag = "!!str"
				}
			case yaml.MappingNode:
				tag = "!!map"
			case yaml.SequenceNode:
				tag = "!!seq"
			}
		}
		fmt.Fprintf(&b, "%s%d %q %q c=%q/%q/%q\n", strings.Repeat(" ", depth), n.Kind, tag, n.Value, n.HeadComment, n.LineComment, n.FootComment)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(rn.YNode(), 0)
	return b.String()
}

// Functions as Go code over the ResourceList bytes they read: each makes
// the output take another way through readResourceList.
var listFunctions = map[string]func(in []byte) []byte{
	"cat": func(in []byte) []byte { return in },
	"kyaml-roundtrip": func(in []byte) []byte {
		return kyamlFn(in, func(ns []*yaml.RNode) []*yaml.RNode { return ns })
	},
	"label-every-other": func(in []byte) []byte {
		return kyamlFn(in, func(ns []*yaml.RNode) []*yaml.RNode {
			for i, n := range ns {
				if i%2 == 0 {
					_ = n.PipeE(yaml.SetLabel("touched", "yes"))
				}
			}
			return ns
		})
	},
	"reverse-and-drop": func(in []byte) []byte {
		return kyamlFn(in, func(ns []*yaml.RNode) []*yaml.RNode {
			var out []*yaml.RNode
			for i := len(ns) - 1; i >= 0; i-- {
				if i%3 != 1 {
					out = append(out, ns[i])
				}
			}
			return out
		})
	},
	"duplicate": func(in []byte) []byte {
		// the same item twice: two resources, never one node shared
		return kyamlFn(in, func(ns []*yaml.RNode) []*yaml.RNode {
			return append(ns, ns[0].Copy())
		})
	},
	"generate": func(in []byte) []byte {
		return kyamlFn(in, func(ns []*yaml.RNode) []*yaml.RNode {
			return append(ns, yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: generated\ndata:\n  k: v\n"))
		})
	},
	"results-first": func(in []byte) []byte {
		out := kyamlFn(in, func(ns []*yaml.RNode) []*yaml.RNode { return ns })
		return append([]byte("results:\n- message: hello\n  severity: info\n"), out...)
	},
	"wide-items": func(in []byte) []byte {
		// a wide list: cut and decoded entry by entry, outdented
		return bytes.ReplaceAll(bytes.ReplaceAll(in, []byte("\n- "), []byte("\n  - ")), []byte("\n  "), []byte("\n    "))
	},
	"comment-between": func(in []byte) []byte {
		return bytes.Replace(in, []byte("\n- "), []byte("\n# note\n- "), 2)
	},
	"blank-lines": func(in []byte) []byte {
		return bytes.ReplaceAll(in, []byte("\n- "), []byte("\n\n- "))
	},
	"json": func(in []byte) []byte {
		nodes, _ := (&kio.ByteReader{Reader: bytes.NewReader(in)}).Read()
		var items []string
		for _, n := range nodes {
			j, _ := n.MarshalJSON()
			items = append(items, string(j))
		}
		return []byte(`{"apiVersion":"config.kubernetes.io/v1","kind":"ResourceList","items":[` + strings.Join(items, ",") + "]}")
	},
	"not-a-list": func(in []byte) []byte {
		return bytes.Replace(in, []byte("kind: ResourceList"), []byte("kind: Other"), 1)
	},
}

// longListFunctions run on all of the corpora as one list.
var longListFunctions = map[string]bool{"cat": true, "label-every-other": true, "reverse-and-drop": true, "duplicate": true}

func kyamlFn(in []byte, f func([]*yaml.RNode) []*yaml.RNode) []byte {
	r := &kio.ByteReader{Reader: bytes.NewReader(in)}
	nodes, err := r.Read()
	if err != nil {
		return []byte(err.Error())
	}
	var b bytes.Buffer
	_ = kio.ByteWriter{Writer: &b, KeepReaderAnnotations: true, FunctionConfig: r.FunctionConfig,
		WrappingKind: kio.ResourceListKind, WrappingAPIVersion: kio.ResourceListAPIVersion,
		Results: yaml.MustParse("- message: done\n  severity: info\n")}.Write(f(nodes))
	return b.Bytes()
}

// runFilter, with its ResourceList cut into items and unchanged items
// reused, gives what kyaml's FunctionFilter (what kpt runs) gives, over
// every package of the corpora and every kind of function output.
func TestRunFilterReuseMatchesKyaml(t *testing.T) {
	fc := yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  k: v\n")
	compared, reusedTotal := 0, 0
	var fnames []string
	for fname := range listFunctions {
		fnames = append(fnames, fname)
	}
	sort.Strings(fnames)
	k := 0
	pkgs := corpusPackages(t)
	// and all the corpora's resources as one list, long enough that the
	// filter numbers, encodes and copies back its items on every core
	var names []string
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	var all []*yaml.RNode
	for _, name := range names {
		all = append(all, copyAll(pkgs[name])...)
	}
	// (300 items: two workers of 150)
	if len(all) < 300 {
		t.Fatalf("only %d resources in the corpora", len(all))
	}
	all = all[:300]
	const allName = "all of the corpora"
	pkgs[allName] = all
	for name, nodes := range pkgs {
		// every function on every third package: each function still
		// meets a few hundred packages; on the long list, those that
		// change, drop, reorder or repeat items
		for fi, fname := range fnames {
			if name == allName {
				if !longListFunctions[fname] {
					continue
				}
			} else if (k+fi)%3 != 0 {
				continue
			}
			f := listFunctions[fname]
			var gotIn []byte
			run := func(r io.Reader, w io.Writer) error {
				in, _ := io.ReadAll(r)
				gotIn = in
				_, err := w.Write(f(in))
				return err
			}
			a, b := copyAll(nodes), copyAll(nodes)
			want, werr := (&runtimeutil.FunctionFilter{Run: run, GlobalScope: true, FunctionConfig: fc}).Filter(a)
			wantIn := gotIn
			// kptr's filter numbers and encodes its input the same way
			in, err := encodeResourceList(copyAll(b), fc)
			if err != nil {
				t.Fatal(err)
			}
			got, _, gerr := runFilter(streamed(run), fc, b, OutputLimits{}, true)
			if !bytes.Equal(gotIn, wantIn) {
				t.Fatalf("%s/%s: the function read different bytes", name, fname)
			}
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s/%s: error %v, kyaml %v", name, fname, gerr, werr)
			}
			if werr != nil {
				continue
			}
			ws, _ := kio.StringAll(want)
			gs, _ := kio.StringAll(got)
			if ws != gs {
				t.Fatalf("%s/%s differs from kyaml:\n--- kyaml\n%s\n--- kptr\n%s", name, fname, ws, gs)
			}
			seen := map[*yaml.Node]bool{}
			for i := range want {
				if dw, dg := normDump(want[i]), normDump(got[i]); dw != dg {
					t.Fatalf("%s/%s: resource %d differs:\n--- kyaml\n%s--- kptr\n%s", name, fname, i, dw, dg)
				}
				if seen[got[i].YNode()] {
					t.Fatalf("%s/%s: resource %d shares its node with another", name, fname, i)
				}
				seen[got[i].YNode()] = true
			}
			compared++
			k++
			if _, _, reused, err := readResourceList(f(in.data), in, b, OutputLimits{}); err == nil {
				for _, r := range reused {
					if r {
						reusedTotal++
					}
				}
			}
		}
	}
	t.Logf("%d package × function cases compared, %d items reused", compared, reusedTotal)
	if reusedTotal == 0 {
		t.Fatal("no item was ever reused: the fast path is dead")
	}
}

// Which outputs take the fast path, and which are read whole.
func TestSplitResourceList(t *testing.T) {
	input := []*yaml.RNode{
		yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  s: |\n    x\n\n    y\n"),
		yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b # comment\n"),
	}
	in, err := encodeResourceList(input, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		out    string
		fast   bool
		reused []bool
	}{
		"unchanged":        {string(in.data), true, []bool{true, false}}, // b has a comment: parsed
		"results":          {string(in.data) + "results:\n- message: m\n", true, []bool{true, false}},
		"changed":          {strings.Replace(string(in.data), "name: a", "name: c", 1), true, []bool{false, false}},
		"twice":            {string(in.data) + string(in.data[in.spans[0][0]:in.spans[0][1]]), true, []bool{true, false, false}},
		"document-marker":  {"---\n" + string(in.data), false, nil},
		"crlf":             {strings.ReplaceAll(string(in.data), "\n", "\r\n"), false, nil},
		"two-items-keys":   {string(in.data) + "items:\n- a: b\n", false, nil},
		"inline-items":     {"apiVersion: v1\nkind: ResourceList\nitems: []\n", false, nil},
		"no-kind":          {strings.Replace(string(in.data), "kind: ResourceList\n", "", 1), false, nil},
		"bad-item":         {string(in.data) + "- a: 'open\n", false, nil},
		"quote-over-lines": {"apiVersion: v1\nkind: \"ResourceList\n- x\"\nitems:\n- a: b\n", false, nil},
		// a wide list (kyaml before v0.13, the catalog's apply-setters):
		// its entries outdented are kptr's own bytes
		"wide":              {widen(string(in.data), 2), true, []bool{true, false}},
		"wide-4":            {widen(string(in.data), 4) + "results:\n- message: m\n", true, []bool{true, false}},
		"wide-changed":      {strings.Replace(widen(string(in.data), 2), "name: a", "name: c", 1), true, []bool{false, false}},
		"wide-comment":      {strings.Replace(widen(string(in.data), 2), "  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: b", "  # between\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: b", 1), false, nil},
		"wide-then-compact": {widen(string(in.data), 2) + "- a: b\n", false, nil},
		"wide-outside":      {strings.Replace(widen(string(in.data), 2), "    kind: ConfigMap\n    metadata:\n      name: b", " kind: ConfigMap\n    metadata:\n      name: b", 1), false, nil},
	}
	for name, c := range cases {
		out, _, reused, ok := splitResourceList([]byte(c.out), in, input)
		if ok != c.fast {
			t.Errorf("%s: fast path %v, want %v", name, ok, c.fast)
			continue
		}
		if ok && fmt.Sprint(reused) != fmt.Sprint(c.reused) {
			t.Errorf("%s: reused %v, want %v", name, reused, c.reused)
		}
		if ok && reused[0] && out[0].YNode() != input[0].YNode() {
			t.Errorf("%s: a reused item is not the input's node", name)
		}
		if !ok {
			continue
		}
		// parsed items carry the positions a whole-document parse gives
		whole, err := (&kio.ByteReader{Reader: strings.NewReader(c.out)}).Read()
		if err != nil || len(whole) != len(out) {
			t.Fatalf("%s: ByteReader: %d items, %v", name, len(whole), err)
		}
		for i := range out {
			if !reused[i] {
				if pw, pg := positions(whole[i].YNode()), positions(out[i].YNode()); pw != pg {
					t.Errorf("%s: item %d positions %s, want %s", name, i, pg, pw)
				}
			}
		}
	}
}

// widen indents the items of a compact ResourceList by n spaces, blank
// lines aside.
func widen(rl string, n int) string {
	head, items, _ := strings.Cut(rl, "items:\n")
	body, tail := items, ""
	if i := strings.Index(items, "\nfunctionConfig:"); i >= 0 {
		body, tail = items[:i+1], items[i+1:]
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(body, "\n") {
		if l != "" && l != "\n" {
			b.WriteString(strings.Repeat(" ", n))
		}
		b.WriteString(l)
	}
	return head + "items:\n" + b.String() + tail
}

func positions(n *yaml.Node) string {
	s := fmt.Sprintf("%d:%d ", n.Line, n.Column)
	for _, c := range n.Content {
		s += positions(c)
	}
	return s
}

// splitResourceList is readResourceList's fast path alone, limits at their defaults.
func splitResourceList(out []byte, in *encodedList, input []*yaml.RNode) ([]*yaml.RNode, *yaml.RNode, []bool, bool) {
	cut, err := cutResourceList(out, in, OutputLimits{}.withDefaults())
	if err != nil || cut == nil {
		return nil, nil, nil, false
	}
	return cut.decode(out, in, input)
}

// parseResults decodes the results node as kpt prints and parses it.
func TestParseResultsMatchesKpt(t *testing.T) {
	for _, src := range []string{
		"- message: m\n  severity: warning\n  resourceRef: {apiVersion: v1, kind: ConfigMap, name: a, namespace: n}\n  field: {path: spec.x, currentValue: 3, proposedValue: [a, {b: c}]}\n  file: {path: a.yaml, index: 2}\n  tags: {k: v}\n",
		"- message: &m anchored\n  severity: info\n- message: *m\n",
		"- message: \"multi\\nline\"\n  severity: error\n  field:\n    path: a\n    currentValue: !!str 5\n",
		"- message: 5\n  severity: 1\n  file: {index: \"3\"}\n",
		"- message: x\n  file: {index: notanint}\n",
		"- message: x\n  message: y\n",
		"- [a, b]\n",
		"- message: x\n  resourceRef:\n    apiVersion: v1\n    kind: Pod\n    metadata: {name: p, namespace: q}\n",
		"items:\n- message: legacy\n  severity: info\n",
		"- message: x\n  tags: [a]\n",
	} {
		node := yaml.MustParse(src)
		var want []*framework.Result
		werr := yaml.Unmarshal([]byte(node.MustString()), &want)
		if node.YNode().Kind == yaml.MappingNode {
			werr, want = nil, nil
			items, _ := node.Pipe(yaml.Lookup("items"))
			werr = yaml.Unmarshal([]byte(items.MustString()), &want)
		}
		got, gerr := parseResults(node)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Fatalf("%q: kpt's way fails with %v, parseResults with %v", src, werr, gerr)
		}
		if werr == nil {
			w, _ := yaml.Marshal(want)
			g, _ := yaml.Marshal(got)
			if !strings.Contains(src, "metadata") && string(w) != string(g) {
				t.Fatalf("%q:\n%s\n%s", src, w, g)
			}
		}
	}
}

// decodeHeader, where it decides, decides as kio.ByteReader does and gives
// the results node yaml.v3 gives (positions included); it must decide for
// the catalog's result shapes, or the fast path is dead.
func TestDecodeHeaderMatchesByteReader(t *testing.T) {
	var lineDump func(b *strings.Builder, n *yaml.Node, depth int)
	lineDump = func(b *strings.Builder, n *yaml.Node, depth int) {
		fmt.Fprintf(b, "%s%d %q %d %q %d:%d %q/%q/%q\n", strings.Repeat(" ", depth), n.Kind, n.Tag, n.Style, n.Value, n.Line, n.Column,
			n.HeadComment, n.LineComment, n.FootComment)
		for _, c := range n.Content {
			lineDump(b, c, depth+1)
		}
	}
	catalog := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nresults:\n" +
		"- message: Resource(apiVersion=apps/v1, kind=Deployment, namespace=, name=app-0001) does not have upstream origin.\n  severity: warning\n" +
		"- message: set field value to \"gcr.io/example-team/app-0001:v1.2.3\"\n  severity: info\n  resourceRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: app-0001\n    namespace: bench\n" +
		"  field:\n    path: spec.template.spec.containers[0].image\n    currentValue: registry.example.com/team/app-0001:v1.0.0\n    proposedValue: gcr.io/example-team/app-0001:v1.2.3\n  file:\n    path: app-000.yaml\n    index: 3\n" +
		"- message: namespace [default] updated to \"bench\", 5 value(s) changed\n  severity: info\n"
	headers := map[string]string{
		"catalog":         catalog,
		"wide":            "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nresults:\n  - message: a\n    severity: error\n  - message: 'quoted: yes'\n",
		"fnconfig-first":  "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig:\n  apiVersion: v1\n  kind: ConfigMap\n  data:\n    a: b\nresults:\n- message: x\n",
		"list":            "apiVersion: v1\nkind: List\nresults:\n- message: x\n",
		"other-kind":      "apiVersion: v1\nkind: ConfigMap\nresults:\n- message: x\n",
		"null-kind":       "apiVersion: v1\nkind: ~\nresults:\n- message: x\n",
		"no-kind":         "apiVersion: v1\nresults:\n- message: x\n",
		"null-results":    "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nresults:\n",
		"empty-results":   "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nresults: []\n",
		"no-results":      "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n",
		"dup-results":     "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nresults:\n- message: first\nresults:\n- message: second\n",
		"dup-kind":        "kind: ConfigMap\nkind: ResourceList\n",
		"legacy-wrapper":  "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nresults:\n  name: x\n  items:\n  - message: m\n",
		"folded":          "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nresults:\n- message: >\n    folded\n",
		"scalar-kind-map": "apiVersion: v1\nkind:\n  a: b\n",
	}
	decided := 0
	for name, h := range headers {
		header := []byte(h + "items: []\n")
		res, isList := decodeHeader(header)
		r := &kio.ByteReader{Reader: bytes.NewReader(header)}
		ns, err := r.Read()
		wantList := err == nil && len(ns) == 0 && r.WrappingKind != ""
		if !isList {
			continue
		}
		decided++
		if !wantList {
			t.Errorf("%s: decodeHeader reads a list, ByteReader does not", name)
			continue
		}
		var want, got strings.Builder
		if r.Results != nil {
			lineDump(&want, r.Results.YNode(), 0)
		}
		if res != nil {
			lineDump(&got, res.YNode(), 0)
		}
		if want.String() != got.String() {
			t.Errorf("%s: results differ:\n--- ByteReader\n%s--- decodeHeader\n%s", name, want.String(), got.String())
		}
	}
	if _, ok := decodeHeader([]byte(catalog + "items: []\n")); !ok {
		t.Error("decodeHeader declines the catalog's results: the fast path is dead")
	}
	if decided < 8 {
		t.Errorf("decodeHeader decided only %d headers", decided)
	}
}
