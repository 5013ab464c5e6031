// Command testsum summarises a test run for CI logs: it reads `go test -json`
// (or `go tool test2json`) events on stdin and prints one line per package
// with its test counts, the output of every failed test and of every package
// that failed outside a test (a build error, a panic in TestMain), and a
// final plain line for the whole suite:
//
//	ok   runtime (as uid 999, no caps): 57 passed, 0 failed, 2 skipped (12 subtests) in 41.2s
//	runtime (as uid 999, no caps): 57 passed, 0 failed, 2 skipped
//
// A test the package's binary never finished (a timeout's panic, a crash)
// is a failure, shown with its output and the panic's head; a package that
// failed outside its tests (a build error) is one. It exits 1 when anything
// failed, or when no test ran at all (a suite that silently ran nothing
// must not look green).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	suite := flag.String("suite", "", "name of the suite, for the lines printed")
	flag.Parse()
	if !summarise(os.Stdin, os.Stdout, *suite) {
		os.Exit(1)
	}
}

// summarise reads events from r and writes the summary to w; it reports
// whether the suite passed.
func summarise(r io.Reader, w io.Writer, suite string) bool {
	s := newSummary(suite)
	s.read(r, w)
	t := s.total
	label := suite
	if label == "" {
		label = "tests"
	}
	line := fmt.Sprintf("%s: %d passed, %d failed, %d skipped", label, t.passed, t.failed, t.skipped)
	if len(s.failedPkgs) > 0 {
		line += "; failed: " + strings.Join(s.failedPkgs, ", ")
	}
	if t.passed+t.failed+t.skipped == 0 {
		line += "; no test ran"
	}
	fmt.Fprintln(w, line)
	return t.failed == 0 && len(s.failedPkgs) == 0 && t.passed+t.skipped > 0
}
