package fastyaml

// Tag resolution: which type an untagged plain scalar has. yaml.v3 follows
// YAML 1.2's core schema (null, bool, int, float spelled as that schema
// spells them) with some YAML 1.1 forms kept (timestamps, 0777 octals,
// 0b binaries, '_' between digits) and leans on Go's number syntax for the
// rest. The rules below are written from those schemas and from what
// yaml.v3 gives for each spelling (TestResolveTagMatchesYAMLv3 and
// FuzzResolveTag decode the value with yaml.v3 and compare), not from its
// code.

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The short tags this package reads and writes.
const (
	nullTag      = "!!null"
	boolTag      = "!!bool"
	strTag       = "!!str"
	intTag       = "!!int"
	floatTag     = "!!float"
	timestampTag = "!!timestamp"
	seqTag       = "!!seq"
	mapTag       = "!!map"
)

// yamlTagPrefix is the long form of the "!!" handle.
const yamlTagPrefix = "tag:yaml.org,2002:"

// shortTag writes a tag under yaml.org's prefix with the "!!" handle, as
// yaml.Node.ShortTag does; other tags are returned as they are.
func shortTag(tag string) string {
	if rest, ok := strings.CutPrefix(tag, yamlTagPrefix); ok {
		return "!!" + rest
	}
	return tag
}

// scalarStart classifies a plain scalar by its first byte, which is all it
// takes to rule most types out.
type scalarStart uint8

const (
	startOther   scalarStart = iota // only a string
	startKeyword                    // a null or bool keyword, or a string
	startDot                        // .inf/.nan, a float such as .5, or a string
	startNumber                     // a digit or a sign: any number, a timestamp, +.inf/-.inf
)

var startClass = func() (t [256]scalarStart) {
	for _, c := range "nNtTfFyYoO~" {
		t[c] = startKeyword
	}
	t['.'] = startDot
	for _, c := range "0123456789+-" {
		t[c] = startNumber
	}
	return t
}()

// ResolveTag is the short tag yaml.v3 gives the untagged plain scalar
// value: !!null, !!bool, !!int, !!float, !!timestamp or !!str.
func ResolveTag(value string) string {
	if value == "" {
		return nullTag
	}
	switch startClass[value[0]] {
	case startKeyword:
		return keywordTag(value)
	case startDot:
		if t := keywordTag(value); t != strTag {
			return t
		}
		// A float with no integer part; Go's float syntax decides the
		// rest (it also takes '_' between digits).
		if _, err := strconv.ParseFloat(value, 64); err == nil {
			return floatTag
		}
		return strTag
	case startNumber:
		return numberTag(value)
	}
	return strTag
}

// keywordTag resolves the spellings YAML 1.2's core schema reserves for
// null, the booleans and the special floats (lower case, capitalised or
// all upper case), and "<<" (a merge key where it is a key; yaml.v3's
// decoder marks it, not its resolution). The YAML 1.1 booleans (yes, on,
// y...) are strings here.
func keywordTag(v string) string {
	switch v {
	case "~", "null", "Null", "NULL":
		return nullTag
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return boolTag
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
		".nan", ".NaN", ".NAN":
		return floatTag
	}
	return strTag
}

// numberTag resolves a value that starts with a digit or a sign.
func numberTag(v string) string {
	// The common case first: a short decimal integer.
	if len(v) <= 18 && (v[0] != '0' || len(v) == 1) && allDecimal(v) {
		return intTag
	}
	if t := keywordTag(v); t != strTag {
		return t
	}
	// Only these bytes spell a timestamp, an integer in any base or a
	// float: "500m", "128Mi" and "--port=8080" are strings at once.
	for i := 0; i < len(v); i++ {
		if !numberByte[v[i]] {
			return strTag
		}
	}
	if isTimestamp(v) {
		return timestampTag
	}
	digits := v
	if strings.IndexByte(v, '_') >= 0 {
		// '_' may stand anywhere: it is dropped before the number is read.
		digits = strings.ReplaceAll(v, "_", "")
	}
	if isInteger(digits) {
		return intTag
	}
	if isDecimalFloat(digits) {
		return floatTag
	}
	return strTag
}

var numberByte = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEFxXoO+-._:,TtZ " {
		t[c] = true
	}
	return t
}()

func allDecimal(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// isInteger reports whether v is an integer as yaml.v3 reads one: Go's
// integer literal syntax (decimal, 0x hex, 0o or 0 octal, 0b binary, with
// an optional sign) for a value that fits in an int64, or without a sign in
// a uint64; and, a quirk of its own, a lower-case 0b or 0o prefix followed
// by a signed number in that base.
func isInteger(v string) bool {
	sign := byte(0)
	body := v
	if v[0] == '+' || v[0] == '-' {
		sign, body = v[0], v[1:]
	}
	base := uint64(10)
	switch {
	case len(body) >= 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X'):
		base, body = 16, body[2:]
	case len(body) >= 2 && body[0] == '0' && (body[1] == 'o' || body[1] == 'O'):
		base, body = 8, body[2:]
	case len(body) >= 2 && body[0] == '0' && (body[1] == 'b' || body[1] == 'B'):
		base, body = 2, body[2:]
	case len(body) >= 2 && body[0] == '0':
		base, body = 8, body[1:]
	}
	if fitsInteger(sign, body, base) {
		return true
	}
	if sign == 0 && len(v) > 2 && v[0] == '0' && (v[1] == 'b' || v[1] == 'o') && (v[2] == '+' || v[2] == '-') {
		base = 2
		if v[1] == 'o' {
			base = 8
		}
		return fitsInteger(v[2], v[3:], base)
	}
	return false
}

// fitsInteger reports whether digits (at least one, all below base) make
// a number that fits: at most MaxUint64 unsigned, MaxInt64 with '+', and
// -MinInt64 with '-'.
func fitsInteger(sign byte, digits string, base uint64) bool {
	if digits == "" {
		return false
	}
	limit := uint64(math.MaxUint64)
	switch sign {
	case '+':
		limit = math.MaxInt64
	case '-':
		limit = 1 << 63
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		d := digitValue(digits[i])
		if d >= base {
			return false
		}
		if n > (limit-d)/base {
			return false
		}
		n = n*base + d
	}
	return true
}

func digitValue(c byte) uint64 {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0')
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 99
}

// isDecimalFloat reports whether v is a float in the decimal notation
// YAML 1.2's core schema gives ([-+]? digits with an optional point and
// fraction, or a point and a fraction, then an optional exponent; YAML
// 1.2 also takes "1." and "08") whose value is finite as a float64.
func isDecimalFloat(v string) bool {
	i := 0
	if v[i] == '+' || v[i] == '-' {
		i++
	}
	intDigits := countDecimal(v[i:])
	i += intDigits
	if i < len(v) && v[i] == '.' {
		i++
		frac := countDecimal(v[i:])
		if intDigits == 0 && frac == 0 {
			return false
		}
		i += frac
	} else if intDigits == 0 {
		return false
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		exp := countDecimal(v[i:])
		if exp == 0 {
			return false
		}
		i += exp
	}
	if i != len(v) {
		return false
	}
	_, err := strconv.ParseFloat(v, 64)
	return err == nil // out of range: a string
}

func countDecimal(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// timestampLayouts are the YAML 1.1 timestamp spellings that resolve to
// !!timestamp: a date; a date, 'T' or 't', a time and a zone (Z or an
// offset with a colon); a date, a space and a time without a zone. Month,
// day, hour, minute and second may take one digit, the fraction is
// optional (after '.' or ','), and the date must exist.
var timestampLayouts = [...]string{
	"2006-1-2",
	"2006-1-2T15:4:5.999999999Z07:00",
	"2006-1-2t15:4:5.999999999Z07:00",
	"2006-1-2 15:4:5.999999999",
}

// isTimestamp reports whether v is a timestamp: four digits and a '-' start
// every form.
func isTimestamp(v string) bool {
	if len(v) < 8 || v[4] != '-' || countDecimal(v[:4]) != 4 {
		return false
	}
	for _, layout := range timestampLayouts {
		if _, err := time.Parse(layout, v); err == nil {
			return true
		}
	}
	return false
}
