package fastyaml

import (
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// StringNode is the scalar node that, encoded, gives the bytes yaml.v3's
// reflecting encoder writes for the Go string s as a block-context value
// ((*encoder).stringv): literal when s holds a line break, plain when s
// reads back as the same string, double-quoted otherwise (a value that
// would resolve to another tag, or that YAML 1.1 reads as a bool or a
// base-60 float). ok is false for invalid UTF-8, which yaml.v3 writes as
// !!binary base64: callers then encode by reflection.
func StringNode(s string) (n *yaml.Node, ok bool) {
	if !utf8.ValidString(s) {
		return nil, false
	}
	n = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	switch {
	case strings.Contains(s, "\n"):
		n.Style = yaml.LiteralStyle
	case ResolveTag(s) == "!!str" && !isBase60Float(s) && !isOldBool(s):
	default:
		n.Style = yaml.DoubleQuotedStyle
	}
	return n, true
}

// IntNode is the scalar node of the Go integer i as yaml.v3's encoder
// writes it (decimal, plain).
func IntNode(i int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(i, 10)}
}

// isBase60Float reports a YAML 1.1 sexagesimal number ("1:20", "-3:25:45.5",
// "190:20:30.15"): digits (and '_'), then one or more ':' groups of one
// digit or two with the first at most 5, then an optional fraction. YAML
// 1.2 reads these as strings, but a YAML 1.1 reader would not, so yaml.v3
// quotes them, and so do we.
func isBase60Float(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if i >= len(s) || !isDigit(s[i]) {
		return false
	}
	for i < len(s) && (isDigit(s[i]) || s[i] == '_') {
		i++
	}
	groups := 0
	for i < len(s) && s[i] == ':' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		if i+1 < len(s) && isDigit(s[i+1]) {
			if s[i] > '5' {
				return false
			}
			i++
		}
		i++
		groups++
	}
	if groups == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && (isDigit(s[i]) || s[i] == '_') {
			i++
		}
	}
	return i == len(s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isOldBool reports the YAML 1.1 booleans that YAML 1.2 reads as strings
// (y, yes, on, n, no, off in their three spellings): yaml.v3 quotes them
// for YAML 1.1 readers, and so do we.
func isOldBool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

// SortKeys orders map keys as yaml.v3's encoder orders the keys of a
// map[string]T: a "natural" order in which numbers inside keys compare
// by value (keyLess gives the rules).
func SortKeys(keys []string) {
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
}

// keyLess is the order yaml.v3 writes string map keys in, as observed
// (TestSortKeysMatchesYAMLv3 and FuzzSortKeys hold it to yaml.v3). Keys
// compare rune by rune; at the first rune where they differ:
//   - two letters compare as runes;
//   - a letter and a non-letter: the letter comes first right after a
//     digit (so "a1b" < "a1_"), the non-letter first otherwise;
//   - two non-letters: the runs of digits that start there compare as
//     numbers (a non-digit starts an empty run, worth 0); when either
//     rune is '0' and the digits just before it hold a non-zero digit, the
//     zeros count (both runs are read as if preceded by a 1); equal
//     numbers: the shorter run first; equal runs: the runes decide.
//
// A key that is a prefix of the other comes first.
func keyLess(a, b string) bool {
	x, y := []rune(a), []rune(b)
	i := 0
	for i < len(x) && i < len(y) && x[i] == y[i] {
		i++
	}
	if i == len(x) || i == len(y) {
		return len(x) < len(y)
	}
	xLetter, yLetter := unicode.IsLetter(x[i]), unicode.IsLetter(y[i])
	switch {
	case xLetter && yLetter:
		return x[i] < y[i]
	case xLetter || yLetter:
		if i > 0 && unicode.IsDigit(x[i-1]) {
			return xLetter
		}
		return yLetter
	}
	var lead int64
	if (x[i] == '0' || y[i] == '0') && nonZeroDigitRunEnds(x, i) {
		lead = 1
	}
	xNum, xEnd := digitRun(x, i, lead)
	yNum, yEnd := digitRun(y, i, lead)
	if xNum != yNum {
		return xNum < yNum
	}
	if xEnd != yEnd {
		return xEnd < yEnd
	}
	return x[i] < y[i]
}

// nonZeroDigitRunEnds reports whether the digits right before position i
// of r hold one that is not '0'.
func nonZeroDigitRunEnds(r []rune, i int) bool {
	for j := i - 1; j >= 0 && unicode.IsDigit(r[j]); j-- {
		if r[j] != '0' {
			return true
		}
	}
	return false
}

// digitRun reads the digits of r from position i as a decimal number
// after the leading value lead, returning it and where the run ends.
func digitRun(r []rune, i int, lead int64) (n int64, end int) {
	n = lead
	for end = i; end < len(r) && unicode.IsDigit(r[end]); end++ {
		n = n*10 + int64(r[end]-'0')
	}
	return n, end
}
