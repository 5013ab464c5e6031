package fastyaml

import (
	"regexp"
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

// isBase60Float and isOldBool are yaml.v3's (encode.go, v3.0.5): strings
// its encoder quotes although they resolve to !!str.
func isBase60Float(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if !(c == '+' || c == '-' || c >= '0' && c <= '9') || strings.IndexByte(s, ':') < 0 {
		return false
	}
	return base60float.MatchString(s)
}

var base60float = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)

func isOldBool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return true
	}
	return false
}

// SortKeys orders map keys as yaml.v3's encoder orders a map[string]T's
// (sorter.go keyList.Less for two strings: runs of digits compare as
// numbers, letters before other runes after a digit).
func SortKeys(keys []string) {
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
}

func keyLess(a, b string) bool {
	ar, br := []rune(a), []rune(b)
	digits := false
	for i := 0; i < len(ar) && i < len(br); i++ {
		if ar[i] == br[i] {
			digits = unicode.IsDigit(ar[i])
			continue
		}
		al := unicode.IsLetter(ar[i])
		bl := unicode.IsLetter(br[i])
		if al && bl {
			return ar[i] < br[i]
		}
		if al || bl {
			if digits {
				return al
			}
			return bl
		}
		var ai, bi int
		var an, bn int64
		if ar[i] == '0' || br[i] == '0' {
			for j := i - 1; j >= 0 && unicode.IsDigit(ar[j]); j-- {
				if ar[j] != '0' {
					an = 1
					bn = 1
					break
				}
			}
		}
		for ai = i; ai < len(ar) && unicode.IsDigit(ar[ai]); ai++ {
			an = an*10 + int64(ar[ai]-'0')
		}
		for bi = i; bi < len(br) && unicode.IsDigit(br[bi]); bi++ {
			bn = bn*10 + int64(br[bi]-'0')
		}
		if an != bn {
			return an < bn
		}
		if ai != bi {
			return ai < bi
		}
		return ar[i] < br[i]
	}
	return len(ar) < len(br)
}
