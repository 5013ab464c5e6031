// Package lazyre declares regular expressions that compile on first use.
//
// A package-level regexp.MustCompile runs in the package's initialiser, in
// every start of kptr, whether or not the command reads the expression: a
// dozen of them were a visible part of `kptr version`'s start (issue 33).
// New keeps the declaration beside its use and defers the compile to the
// first call, once (safe for concurrent callers); a malformed expression
// still panics, at its first use, which the package's tests reach.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr on its first call and returns
// the same *regexp.Regexp from then on.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
