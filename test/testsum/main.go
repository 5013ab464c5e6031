// Command testsum summarises a test run for CI logs: it reads `go test -json`
// (or `go tool test2json`) events on stdin and prints one line per package
// with its test counts, the output of every failed test and of every package
// that failed outside a test (a build error, a panic in TestMain), and a
// final plain line for the whole suite:
//
//	ok   runtime (as uid 999, no caps): 57 passed, 0 failed, 2 skipped (12 subtests) in 41.2s
//	runtime (as uid 999, no caps): 57 passed, 0 failed, 2 skipped
//
// It exits 1 when a test or a package failed, or when no test ran at all
// (a suite that silently ran nothing must not look green).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
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
	fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped\n", label, t.passed, t.failed, t.skipped)
	return t.failed == 0 && s.failedPkgs == 0 && t.passed+t.skipped > 0
}
