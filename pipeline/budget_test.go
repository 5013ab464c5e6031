package pipeline

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// v3Nodes is the number of nodes yaml.v3 builds for data (every document,
// aliases counted once), ok=false when it does not decode.
func v3Nodes(data []byte) (int, bool) {
	d := yaml.NewDecoder(bytes.NewReader(data))
	total := 0
	var count func(n *yaml.Node) int
	count = func(n *yaml.Node) int {
		c := 1
		for _, k := range n.Content {
			c += count(k)
		}
		return c
	}
	for {
		var n yaml.Node
		err := d.Decode(&n)
		if err == io.EOF {
			return total, true
		}
		if err != nil {
			return 0, false
		}
		total += count(&n)
	}
}

// countSeeds: shapes of every kind the counter charges, and the corpora.
func countSeeds(t testing.TB) [][]byte {
	seeds := []string{
		"a: b\n", "a:\n  b: c\n", "- a\n- b\n", "- - - a\n", "- a: b\n  c: d\n", "k:\n- a\n- b\n",
		"a: |\n  x\n  y: z\n- q\nb: c\n", "- |\n x\n- y\n", "- k: |\n    x\n  o: p\n", "- \"k\": |\n    x\n  o: p\n",
		"{a, b}", "{a: , b: }", "[a: ]", "[a: 1, b: 2]", "{\"a\":1,\"b\":[1,2,{\"c\":null}]}", "[[[]]]",
		"a: &x [1, 2]\nb: *x\nc: !!str 3\n", "? a\n: b\n", "- ? a\n  : b\n", "---\na: 1\n---\nb: 2\n...\n",
		"%YAML 1.2\n---\na: 1\n", "a: 'x # y'\nb: \"p: q\"\n", "a: b # c: d\n", "a:\n", "-\n-\n", "- \n- a:\n",
		"a: >-\n  folded\n  text\nb: 1\n", "k: 'multi\n  line'\nj: 2\n", "a: x\n  continued\n", "a: http://x:80/y\n",
		"[a, b, ]", "{a: [b, {c: d}], e: f}", "- [a: b, c]\n", "a: !t\nb: &y\n", "a: *x\n",
		"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\nresults:\n- message: m\n  severity: info\n",
	}
	var out [][]byte
	for _, s := range seeds {
		out = append(out, []byte(s))
	}
	for _, root := range corpusDirs {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") || d.Name() == "Kptfile") {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil {
				out = append(out, b)
			}
			return nil
		})
	}
	return out
}

func checkCount(t *testing.T, data []byte) {
	want, ok := v3Nodes(data)
	if !ok {
		return
	}
	if got := countNodes(data, 1<<40); got < want {
		t.Errorf("countNodes = %d, yaml.v3 built %d nodes, for\n%s", got, want, data)
	}
}

// TestCountNodesBound: the counter never undercounts what yaml.v3 builds,
// and stays close to it on real YAML.
func TestCountNodesBound(t *testing.T) {
	var real, counted int
	for _, s := range countSeeds(t) {
		checkCount(t, s)
		if n, ok := v3Nodes(s); ok {
			real += n
			counted += countNodes(s, 1<<40)
		}
	}
	if real < 5000 {
		t.Fatalf("corpus too small: %d nodes", real)
	}
	if ratio := float64(counted) / float64(real); ratio > 1.5 {
		t.Errorf("countNodes overcounts the corpus %.2f times (%d for %d)", ratio, counted, real)
	} else {
		t.Logf("corpus: %d nodes, counted %d (%.2f)", real, counted, ratio)
	}
}

func FuzzCountNodes(f *testing.F) {
	for _, s := range countSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkCount)
}

// TestCheckTrees: depth and alias expansion measured exactly, a billion
// laughs in the time its printed size takes.
func TestCheckTrees(t *testing.T) {
	parse := func(s string) *yaml.Node {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(s), &n); err != nil {
			t.Fatal(err)
		}
		return &n
	}
	lim := OutputLimits{MaxNodes: 1000, MaxDepth: 10}.withDefaults()
	var laughs strings.Builder
	laughs.WriteString("l0: &l0 lol\n")
	for i := 1; i <= 30; i++ {
		laughs.WriteString("l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " [" + strings.Repeat("*l"+strconv.Itoa(i-1)+", ", 8) + "*l" + strconv.Itoa(i-1) + "]\n")
	}
	for _, c := range []struct{ doc, err string }{
		{"a: b\n", ""},
		{"a: &x [1, 2, 3]\nb: [*x, *x, *x]\n", ""},
		{laughs.String(), "output has more than 1000 YAML nodes (aliases expanded) (KPTR_FN_MAX_NODES)"},
		{strings.Repeat("[", 10) + strings.Repeat("]", 10), ""},
		{strings.Repeat("[", 11) + strings.Repeat("]", 11), "output has more than 10 levels of nesting"},
	} {
		err := lim.checkTrees(parse(c.doc))
		if got := errString(err); got != c.err {
			t.Errorf("%.40q: got %q, want %q", c.doc, got, c.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
