package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A real `go test -json` run of testdata/suite, where one package times out,
// one crashes with a test running and one does not build: each is a failure
// in the suite's final line, with the tests that were running and how the
// binary ended; the passing package still counts.
func TestSummariseRealFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on testdata/suite")
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "-timeout", "5s", "./...")
	cmd.Dir = "testdata/suite"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	events, _ := cmd.Output() // go test exits 1: the events are the point
	var out strings.Builder
	if summarise(strings.NewReader(string(events)), &out, "real") {
		t.Errorf("the suite passed:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{
		"--- FAIL: TestHangs (testsum.example/timesout): did not finish",
		"panic: test timed out after 5s",
		"FAIL testsum.example/timesout (real): 1 passed, 1 failed, 0 skipped",
		"test timed out after 5s\n",
		"--- FAIL: TestCrashes (testsum.example/crashes): did not finish",
		"panic: a goroutine of the test gave up",
		"FAIL testsum.example/crashes (real): 1 passed, 1 failed, 0 skipped",
		"undefined: undefinedThing",
		"FAIL testsum.example/nobuild (real): 0 passed, 1 failed, 0 skipped",
		"ok   testsum.example/passes (real): 1 passed, 0 failed, 0 skipped",
		"real: 3 passed, 3 failed, 0 skipped; failed: ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
