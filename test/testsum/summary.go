package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// counts are the tests of a package or a suite; subtests are counted apart.
type counts struct{ passed, failed, skipped, subtests int }

func (c *counts) add(o counts) {
	c.passed += o.passed
	c.failed += o.failed
	c.skipped += o.skipped
	c.subtests += o.subtests
}

// maxKept bounds the output kept per test and per package (the tail is
// what explains a failure).
const maxKept = 400

type pkgState struct {
	counts
	output []string            // package-level output (outside any test)
	tests  map[string][]string // output per top-level test, subtests included
}

type summary struct {
	suite      string
	pkgs       map[string]*pkgState
	total      counts
	failedPkgs int
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
}

func (s *summary) event(e event, w io.Writer) {
	p := s.pkg(e.Package)
	top, _, sub := strings.Cut(e.Test, "/")
	switch {
	case e.Action == "output" && e.Test == "":
		p.output = keep(p.output, e.Output)
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		s.finish(e, p, w)
	case e.Test == "":
		// start, run, pause, cont of the package: nothing to count
	case e.Action == "output":
		p.tests[top] = keep(p.tests[top], e.Output)
	case e.Test != "" && sub:
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			p.subtests++
		}
	case e.Action == "pass":
		p.passed++
		delete(p.tests, top)
	case e.Action == "skip":
		p.skipped++
		delete(p.tests, top)
	case e.Action == "fail" && e.Test != "":
		p.failed++
		fmt.Fprintf(w, "--- FAIL: %s (%s)\n%s", e.Test, shortPkg(e.Package), strings.Join(p.tests[top], ""))
		delete(p.tests, top)
	}
}

// finish prints a package's line when its last event arrives.
func (s *summary) finish(e event, p *pkgState, w io.Writer) {
	s.total.add(p.counts)
	status := "ok  "
	if e.Action == "fail" {
		status = "FAIL"
		s.failedPkgs++
		if p.failed == 0 {
			// failed outside any test: a build error, a panic, TestMain
			fmt.Fprint(w, strings.Join(p.output, ""))
		}
	}
	name := shortPkg(e.Package)
	if s.suite != "" {
		name += " (" + s.suite + ")"
	}
	line := fmt.Sprintf("%s %s: %d passed, %d failed, %d skipped", status, name, p.passed, p.failed, p.skipped)
	if p.subtests > 0 {
		line += fmt.Sprintf(" (%d subtests)", p.subtests)
	}
	if e.Action == "skip" && p.passed+p.failed+p.skipped == 0 {
		fmt.Fprintf(w, "?    %s: no test files\n", name)
		delete(s.pkgs, e.Package)
		return
	}
	fmt.Fprintf(w, "%s in %s\n", line, (time.Duration(e.Elapsed * float64(time.Second))).Round(100*time.Millisecond))
	delete(s.pkgs, e.Package)
}

// shortPkg drops the module path: packages are named as in the repository.
func shortPkg(p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, "github.com/kptr-dev/kptr"), "/")
}
