package fastyaml

import (
	"math/rand"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// yamlv3Tag is the tag yaml.v3's decoder gives v as a plain mapping value;
// ok is false when v does not read back as that plain scalar (a comment,
// an indicator, a flow collection...).
func yamlv3Tag(v string) (tag string, ok bool) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("k: "+v+"\n"), &n); err != nil {
		return "", false
	}
	if len(n.Content) != 1 || len(n.Content[0].Content) != 2 {
		return "", false
	}
	vn := n.Content[0].Content[1]
	if vn.Kind != yaml.ScalarNode || vn.Style != 0 || vn.Value != v {
		return "", false
	}
	return vn.Tag, true
}

// checkResolveTag compares ResolveTag with yaml.v3 for v. "<<" is the one
// value whose tag yaml.v3's decoder sets outside resolution (!!merge, in
// key and value alike); the encoder and decoder here never take it plain.
func checkResolveTag(t testing.TB, v string) {
	t.Helper()
	want, ok := yamlv3Tag(v)
	if !ok || v == "<<" {
		return
	}
	if got := ResolveTag(v); got != want {
		t.Fatalf("ResolveTag(%q) = %s, yaml.v3 decodes %s", v, got, want)
	}
}

// TestResolveTag spells out the tag of the spellings the rules turn on,
// so that a wrong rule fails here by name.
func TestResolveTag(t *testing.T) {
	cases := map[string][]string{
		nullTag: {"", "~", "null", "Null", "NULL"},
		boolTag: {"true", "True", "TRUE", "false", "False", "FALSE"},
		intTag: {"0", "7", "-12", "+12", "1_000", "0777", "-0777", "0x1F", "0X1f", "-0x1F", "0o17", "0O17", "0b101",
			"0B101", "-0b101", "0b+101", "0b-101", "0o+17", "0o-17", "9223372036854775807", "-9223372036854775808",
			"18446744073709551615", "0xFFFFFFFFFFFFFFFF", "123456789012345678"},
		floatTag: {"1.5", "1.", "-.5", "+.5", ".5", ".5e3", ".5_0", "1e3", "1E3", "1e-3", "08", "09.5", "1_0.5",
			".inf", ".Inf", ".INF", "+.inf", "-.INF", ".nan", ".NaN", ".NAN", "18446744073709551616",
			"+18446744073709551615", "-9223372036854775809", "1e308"},
		timestampTag: {"2001-12-14", "2001-1-4", "2001-12-14t21:59:43.10Z", "2001-12-14T21:59:43.10+05:00",
			"2001-12-14T21:59:43Z", "2001-12-14 21:59:43.10", "2001-12-14 21:59:43", "2001-12-14 21:59:43,5",
			"2000-02-29"},
		strTag: {"<<", "yes", "no", "on", "off", "y", "n", "Yes", "OFF", "nan", "inf", "+inf", "-infinity",
			".", "-", "+", "_1", "0b", "0o", "0x", "0x_", "-0b-1", "0xZZ", "0x1p3", "1e", "1e309", ".1e999",
			"1.2.3", "1:20", "500m", "128Mi", "--port=8080", "2001-02-30", "2001-12-14T21:59:43",
			"2001-12-14 21:59:43 +05:00", "200-12-14", "0x10000000000000000", "-0x8000000000000001",
			"+0x8000000000000000", "é1", "1é", "name", "~x"},
	}
	for want, values := range cases {
		for _, v := range values {
			if got := ResolveTag(v); got != want {
				t.Errorf("ResolveTag(%q) = %s, want %s", v, got, want)
			}
			checkResolveTag(t, v)
		}
	}
}

// resolvePieces are the fragments numbers, booleans, nulls and timestamps
// are made of, and a few that turn them into strings.
var resolvePieces = []string{"0", "1", "7", "9", "2001", "-", "+", ".", "_", ":", ",", "T", "t", "Z", " ", "\t",
	"e", "E", "x", "X", "o", "O", "b", "B", "a", "f", "p", "i", "n", "inf", "nan", "Inf", "NaN", "m", "Mi", "s",
	"=", "v", "12", "05", "08", "2001-12-14", "2000-02-29", "21:59:43", "-05:00", "true", "null", "~", "<<", "y",
	"0x", "0o", "0b", "0b+", "0o-", "1e3", "1e308", "1e309", "24", "60", "9223372036854775807",
	"18446744073709551615", "FFFFFFFFFFFFFFFF"}

// TestResolveTagMatchesYAMLv3 compares ResolveTag with yaml.v3 on every
// value of up to three characters from the numeric alphabet and on values
// built at random from resolvePieces.
func TestResolveTagMatchesYAMLv3(t *testing.T) {
	alpha := "0189+-_.: aexoTZbm"
	for _, a := range alpha {
		checkResolveTag(t, string(a))
		for _, b := range alpha {
			checkResolveTag(t, string(a)+string(b))
			for _, c := range alpha {
				checkResolveTag(t, string(a)+string(b)+string(c))
			}
		}
	}
	n := 200000
	if testing.Short() {
		n = 20000
	}
	r := rand.New(rand.NewSource(3))
	for i := 0; i < n; i++ {
		var b strings.Builder
		for k := r.Intn(6) + 1; k > 0; k-- {
			b.WriteString(resolvePieces[r.Intn(len(resolvePieces))])
		}
		checkResolveTag(t, b.String())
	}
	for _, v := range trickyValues {
		checkResolveTag(t, v)
	}
}

// FuzzResolveTag: ResolveTag agrees with yaml.v3 on any value that reads
// back as a plain scalar.
func FuzzResolveTag(f *testing.F) {
	for _, p := range resolvePieces {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, v string) { checkResolveTag(t, v) })
}
