package fastyaml

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// yamlv3KeyOrder is the order yaml.v3 writes the keys of a map[string]int in.
func yamlv3KeyOrder(t testing.TB, keys []string) []string {
	m := map[string]int{}
	for _, k := range keys {
		m[k] = 0
	}
	var n yaml.Node
	if err := n.Encode(m); err != nil {
		return nil // yaml.v3 cannot read its own output for some keys ("\t\n")
	}
	var order []string
	for i := 0; i < len(n.Content); i += 2 {
		order = append(order, n.Content[i].Value)
	}
	return order
}

func checkSortKeys(t testing.TB, keys []string) {
	t.Helper()
	seen := map[string]bool{}
	var uniq []string
	for _, k := range keys {
		if !seen[k] && utf8.ValidString(k) {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	want := yamlv3KeyOrder(t, uniq)
	if want == nil {
		return
	}
	got := append([]string(nil), uniq...)
	SortKeys(got)
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("SortKeys(%q)\n got %q\nwant %q (yaml.v3)", uniq, got, want)
	}
}

var keyPieces = []string{"a", "b", "z", "A", "Z", "é", "ß", "0", "00", "1", "01", "10", "2", "9", "007", "٣", "_", "-",
	".", "/", " ", "~", "k8s", "app", "x1", "x10", "x2", "1a", "a1", "😀"}

// TestSortKeysMatchesYAMLv3: SortKeys orders keys as yaml.v3 writes a
// map[string]T, for a few spelled-out sets and many random ones.
func TestSortKeysMatchesYAMLv3(t *testing.T) {
	checkSortKeys(t, []string{"b", "a", "a1", "a10", "a2", "a01", "a001", "a1b", "a1_", "a_", "ab", "A", "Z", "_"})
	checkSortKeys(t, []string{"x0", "x00", "x10", "x100", "x1000", "x01", "x010", "x9", "x09"})
	r := rand.New(rand.NewSource(5))
	for round := 0; round < 3000; round++ {
		keys := make([]string, r.Intn(12)+2)
		for i := range keys {
			var b strings.Builder
			for k := r.Intn(4) + 1; k > 0; k-- {
				b.WriteString(keyPieces[r.Intn(len(keyPieces))])
			}
			keys[i] = b.String()
		}
		checkSortKeys(t, keys)
	}
}

// FuzzSortKeys: the input split at NUL bytes is a set of keys.
func FuzzSortKeys(f *testing.F) {
	f.Add("a1\x00a10\x00a2\x00a01")
	f.Add("x0\x00x00\x00x1b\x00x1_\x00é\x00Z")
	f.Fuzz(func(t *testing.T, s string) { checkSortKeys(t, strings.Split(s, "\x00")) })
}

// checkStringNode: the node StringNode gives for s encodes as yaml.v3
// writes the Go string s as a mapping value.
func checkStringNode(t testing.TB, s string) {
	t.Helper()
	n, ok := StringNode(s)
	if !ok {
		if utf8.ValidString(s) {
			t.Fatalf("StringNode(%q) declined valid UTF-8", s)
		}
		return
	}
	var want bytes.Buffer
	e := yaml.NewEncoder(&want)
	e.SetIndent(2)
	if err := e.Encode(map[string]string{"k": s}); err != nil {
		t.Fatal(err)
	}
	got, ok := AppendDocument(nil, mapping(str("k"), n), Wide)
	if !ok {
		return // the encoder declines it: its caller encodes by reflection
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("StringNode(%q) encodes as %q; yaml.v3 writes %q", s, got, want.Bytes())
	}
}

// TestStringNodeMatchesYAMLv3: the style StringNode picks is the one
// yaml.v3's reflecting encoder picks for a Go string.
func TestStringNodeMatchesYAMLv3(t *testing.T) {
	values := append([]string{"1:20", "-3:25:45.5", "190:20:30.15", "1:60", "1:2:3", "1_0:5", "+1:5.", "1:5_",
		":1", "1:", "1::2", "yes", "Off", "y", "on", "ON", "true", "08", "1e3", "x\ny"}, trickyValues...)
	values = append(values, resolvePieces...)
	r := rand.New(rand.NewSource(9))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for k := r.Intn(5) + 1; k > 0; k-- {
			b.WriteString(resolvePieces[r.Intn(len(resolvePieces))])
		}
		values = append(values, b.String())
	}
	for _, v := range values {
		checkStringNode(t, v)
	}
}

// FuzzStringNode: StringNode agrees with yaml.v3 on any string.
func FuzzStringNode(f *testing.F) {
	for _, v := range []string{"1:20", "yes", "x\ny", "08", "a: b"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, s string) { checkStringNode(t, s) })
}
