package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	ImportPath string // build events: "pkg [pkg.test]"
	Test       string
	Elapsed    float64
	Output     string
}

// counts are the tests of a package or a suite; subtests are counted apart.
// failed counts failed tests, tests the package's binary never finished (a
// timeout, a panic, a crash) and packages that failed with no failed test of
// their own (a build error, a panic in TestMain): each is a failure.
type counts struct{ passed, failed, skipped, subtests int }

func (c *counts) add(o counts) {
	c.passed += o.passed
	c.failed += o.failed
	c.skipped += o.skipped
	c.subtests += o.subtests
}

// maxKept bounds the output kept per test and per package (the tail is
// what explains a failure); maxPanic bounds the head of a panic kept apart,
// since a goroutine dump can push the panic's own first lines (the message
// and, for a timeout, the list of running tests) out of the tail.
const (
	maxKept  = 400
	maxPanic = 40
)

type pkgState struct {
	counts
	output  []string            // package-level output (outside any test)
	tests   map[string][]string // output per top-level test, subtests included
	running []string            // top-level tests started and not ended, in order
	panic   []string            // the first lines from a "panic: " line on
}

type summary struct {
	suite      string
	pkgs       map[string]*pkgState
	total      counts
	failedPkgs []string
}

func newSummary(suite string) *summary {
	return &summary{suite: suite, pkgs: map[string]*pkgState{}}
}

func keep(lines []string, l string) []string {
	lines = append(lines, l)
	if len(lines) > maxKept {
		lines = lines[len(lines)-maxKept:]
	}
	return lines
}

func (s *summary) pkg(name string) *pkgState {
	p := s.pkgs[name]
	if p == nil {
		p = &pkgState{tests: map[string][]string{}}
		s.pkgs[name] = p
	}
	return p
}

// read consumes the events; a line that is not an event is passed through.
// Packages whose binary never reported an end (the stream was cut) fail.
func (s *summary) read(r io.Reader, w io.Writer) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(w, line)
			continue
		}
		s.event(e, w)
	}
	for _, name := range slices.Sorted(maps.Keys(s.pkgs)) {
		s.pkgs[name].output = keep(s.pkgs[name].output, "(the test output ended before this package reported its result)\n")
		s.finish(event{Action: "fail", Package: name}, s.pkgs[name], w)
	}
}

func (s *summary) event(e event, w io.Writer) {
	if e.Package == "" && e.ImportPath != "" {
		// build-output and build-fail of a package go test then reports as failed
		if e.Action != "build-output" {
			return
		}
		e.Package, _, _ = strings.Cut(e.ImportPath, " ")
		e.Action = "output"
	}
	p := s.pkg(e.Package)
	top, _, sub := strings.Cut(e.Test, "/")
	if e.Action == "output" && (strings.HasPrefix(e.Output, "panic: ") || len(p.panic) > 0) && len(p.panic) < maxPanic {
		p.panic = append(p.panic, e.Output)
	}
	switch {
	case e.Action == "output" && e.Test == "":
		p.output = keep(p.output, e.Output)
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		s.finish(e, p, w)
	case e.Test == "":
		// start, run, pause, cont of the package: nothing to count
	case e.Action == "output":
		p.tests[top] = keep(p.tests[top], e.Output)
	case e.Action == "run" && !sub:
		p.running = append(p.running, top)
	case e.Test != "" && sub:
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			p.subtests++
		}
	case e.Action == "pass":
		p.passed++
		p.ended(top)
	case e.Action == "skip":
		p.skipped++
		p.ended(top)
	case e.Action == "fail":
		p.failed++
		fmt.Fprintf(w, "--- FAIL: %s (%s)\n%s", e.Test, shortPkg(e.Package), strings.Join(p.tests[top], ""))
		p.ended(top)
	}
}

func (p *pkgState) ended(test string) {
	delete(p.tests, test)
	if i := slices.Index(p.running, test); i >= 0 {
		p.running = slices.Delete(p.running, i, i+1)
	}
}

// finish prints a package's line when its last event arrives. A failed
// package's tests that never ended are failures, printed with their output;
// a failed package with no failed test counts as one failure, with its own
// output (a build error, a panic outside a test).
func (s *summary) finish(e event, p *pkgState, w io.Writer) {
	name := shortPkg(e.Package)
	label := name
	if s.suite != "" {
		label += " (" + s.suite + ")"
	}
	status := "ok  "
	cause := ""
	if e.Action == "fail" {
		status = "FAIL"
		s.failedPkgs = append(s.failedPkgs, name)
		panicShown := false
		for _, t := range p.running {
			p.failed++
			fmt.Fprintf(w, "--- FAIL: %s (%s): did not finish: the test binary ended while it ran\n%s", t, name, strings.Join(p.tests[t], ""))
			panicShown = panicShown || len(p.panic) > 0 && slices.Contains(p.tests[t], p.panic[0])
		}
		switch {
		case len(p.running) > 0 && len(p.panic) > 0:
			cause = ": " + strings.TrimSpace(strings.TrimPrefix(p.panic[0], "panic: "))
			if !panicShown { // the goroutine dump pushed it out of the kept tail
				fmt.Fprintf(w, "%s: how it ended:\n%s", name, strings.Join(p.panic, ""))
			}
		case len(p.running) > 0:
			cause = fmt.Sprintf(": %d test(s) did not finish", len(p.running))
		case p.failed == 0:
			// failed outside any test: a build error, a panic, TestMain
			p.failed++
			cause = ": failed outside its tests (build error, panic or TestMain)"
			fmt.Fprint(w, strings.Join(p.output, ""))
		}
	}
	line := fmt.Sprintf("%s %s: %d passed, %d failed, %d skipped", status, label, p.passed, p.failed, p.skipped)
	if p.subtests > 0 {
		line += fmt.Sprintf(" (%d subtests)", p.subtests)
	}
	s.total.add(p.counts)
	delete(s.pkgs, e.Package)
	if e.Action == "skip" && p.passed+p.failed+p.skipped == 0 {
		fmt.Fprintf(w, "?    %s: no test files\n", label)
		return
	}
	fmt.Fprintf(w, "%s in %s%s\n", line, (time.Duration(e.Elapsed * float64(time.Second))).Round(100*time.Millisecond), cause)
}

// shortPkg drops the module path: packages are named as in the repository.
func shortPkg(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, "github.com/kptr-dev/kptr"), "/")
}
