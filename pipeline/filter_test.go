package pipeline

import (
	"bytes"
	"io"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/fn/runtime/runtimeutil"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// runFilter must produce exactly what kyaml's FunctionFilter (kpt's) does,
// on its fast path and off it.
func TestRunFilterMatchesKyaml(t *testing.T) {
	inputs := map[string]string{
		"plain":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '1'\n  y: \"2\"\n",
		"comments":    "# head\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a # line\ndata:\n  # x\n  x: '1'\n",
		"doc-comment": "# license\n\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '1'\n# trailer\n",
		"license":     "# license\n\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '1'\n",
		"folded":      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: >\n    folded\n    text\n",
		"lists":       "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      containers:\n      - name: c\n        image: i\n        args: [a, b]\n",
	}
	// functions as Go code: pass through, reverse fields, strip comments, add fields
	funcs := map[string]func(*yaml.Node){
		"identity": func(*yaml.Node) {},
		"reverse": func(n *yaml.Node) {
			c := n.Content[0]
			for i, j := 0, len(c.Content)-2; i < j; i, j = i+2, j-2 {
				c.Content[i], c.Content[i+1], c.Content[j], c.Content[j+1] = c.Content[j], c.Content[j+1], c.Content[i], c.Content[i+1]
			}
		},
		"strip": func(n *yaml.Node) { strip(n) },
		"add-first": func(n *yaml.Node) {
			c := n.Content[0]
			c.Content = append([]*yaml.Node{{Kind: yaml.ScalarNode, Value: "zz"}, {Kind: yaml.ScalarNode, Value: "new"}}, c.Content...)
		},
	}
	for iname, in := range inputs {
		for fname, f := range funcs {
			run := editingRun(f, nil, nil)
			a, _ := (&kio.ByteReader{Reader: bytes.NewBufferString(in)}).Read()
			b, _ := (&kio.ByteReader{Reader: bytes.NewBufferString(in)}).Read()
			want, err := (&runtimeutil.FunctionFilter{Run: run, GlobalScope: true}).Filter(a)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := runFilter(streamed(run), nil, b, OutputLimits{}, true)
			if err != nil {
				t.Fatal(err)
			}
			ws, _ := kio.StringAll(want)
			gs, _ := kio.StringAll(got)
			if ws != gs {
				t.Errorf("%s/%s differs from kyaml:\n--- kyaml\n%s\n--- kptr\n%s", iname, fname, ws, gs)
			}
		}
	}
}

func strip(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	if n.Kind == yaml.MappingNode {
		for i, j := 0, len(n.Content)-2; i < j; i, j = i+2, j-2 {
			n.Content[i], n.Content[i+1], n.Content[j], n.Content[j+1] = n.Content[j], n.Content[j+1], n.Content[i], n.Content[i+1]
		}
	}
	for _, c := range n.Content {
		strip(c)
	}
}

func TestWriteResourceListMatchesByteWriter(t *testing.T) {
	in := "# license\n# more\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a # x\n  annotations:\n    config.kubernetes.io/path: 'a.yaml'\ndata:\n  l: [1, 2]\n  s: |\n    multi\n    line\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  # c\n  containers:\n  - name: c\n    args:\n    - a\n"
	fc := yaml.MustParse("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: function-input\ndata:\n  k: v\n")
	for _, withConfig := range []bool{false, true} {
		a, _ := (&kio.ByteReader{Reader: bytes.NewBufferString(in), PreserveSeqIndent: true}).Read()
		b, _ := (&kio.ByteReader{Reader: bytes.NewBufferString(in), PreserveSeqIndent: true}).Read()
		var cfg *yaml.RNode
		if withConfig {
			cfg = fc
		}
		var want, got bytes.Buffer
		if err := (kio.ByteWriter{Writer: &want, KeepReaderAnnotations: true, FunctionConfig: cfg,
			WrappingAPIVersion: kio.ResourceListAPIVersion, WrappingKind: kio.ResourceListKind}).Write(a); err != nil {
			t.Fatal(err)
		}
		if err := writeResourceList(&got, b, cfg); err != nil {
			t.Fatal(err)
		}
		if want.String() != got.String() {
			t.Fatalf("differs:\n--- ByteWriter\n%s\n--- writeResourceList\n%s", want.String(), got.String())
		}
	}
}

// streamed adapts a function that reads and writes streams to runFilter's.
func streamed(run func(io.Reader, io.Writer) error) func([]byte) ([]byte, error) {
	return func(in []byte) ([]byte, error) {
		var out bytes.Buffer
		err := run(bytes.NewReader(in), &out)
		return out.Bytes(), err
	}
}

// editingRun is a function that applies edit to the document of every
// item of its ResourceList and prints the list back with results (none
// when nil), then exits with exit.
func editingRun(edit func(*yaml.Node), results *yaml.RNode, exit error) func(io.Reader, io.Writer) error {
	return func(r io.Reader, w io.Writer) error {
		items, err := (&kio.ByteReader{Reader: r}).Read()
		if err != nil {
			return err
		}
		for _, n := range items {
			edit(n.Document())
		}
		if err := (kio.ByteWriter{Writer: w, KeepReaderAnnotations: true, WrappingKind: kio.ResourceListKind,
			WrappingAPIVersion: kio.ResourceListAPIVersion, Results: results}).Write(items); err != nil {
			return err
		}
		return exit
	}
}
