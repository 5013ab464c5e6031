package fastyaml

import (
	"testing"
)

// decFuzzSeeds are the table inputs plus the corpus documents and items.
func decFuzzSeeds(f *testing.F, items bool) {
	for _, s := range []string{
		"a: b\n", "- a\n- b: c\n  d: |\n    x\n", "k:\n- 'a''b'\n- \"\\u00e9\\t\"\n", "a: {}\nb: []\n",
		"a: |+2\n   x\n\n", "---\na:\n  b: ~\n", "é: ü\n", "- - a\n  -\n", "a: b c:d #e\n",
		"a: b # c\n# h\nd: e # kpt-set: ${x}\n", "- v # c\n- w\n", "k: # c\n  # h1\n  #h2\n  a: [b] # x\n",
		"- a: b\n  # h\n  c: 'd' #e\n", "a: b\n\n# h\nc: d\n", "k:\n  # h\n  - a\n", "a: | # c\n  x\n",
		"# a\n\n# b\na: b # c\n", "# a\na:\n  b: c\n", "- # h\n  #\n  a: b\n- # i\n  c: d # e\n",
	} {
		f.Add([]byte(s))
	}
	docs := decCorpus(f)
	if !items {
		for _, d := range docs {
			f.Add(d)
		}
		return
	}
	_, its := decResourceList(f, docs, true)
	for _, it := range its {
		f.Add(it)
	}
}

// FuzzDecode: whenever Decode handles an input, yaml.v3 decodes it without
// error into an identical tree.
func FuzzDecode(f *testing.F) {
	decFuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		decCheck(t, "fuzz", data)
	})
}

// FuzzDecodeSeqItem: whenever DecodeSeqItem handles an input, yaml.v3
// decodes it into a one-item sequence whose item is identical.
func FuzzDecodeSeqItem(f *testing.F) {
	decFuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		decCheckItem(t, "fuzz", data)
	})
}
