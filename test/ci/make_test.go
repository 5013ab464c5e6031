package ci

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// make test runs every suite although one fails before the others, then
// ends with each suite's verdict and a non-zero exit (issue 32: a timeout in
// the unit suite used to stop make before the three suites after it, with no
// word of them). GO=true keeps the build and testsum prerequisites from
// building anything.
func TestMakeTestRunsEverySuite(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "-f", "Makefile", "-f", "test/ci/testdata/suites.mk",
		"test", "GO=true", "TEST_SUITES=suite-passes suite-fails suite-after")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err == nil || !errorsAs(err, &exit) {
		t.Fatalf("make test with a failing suite: err %v, want a non-zero exit\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"ran suite-passes", "ran suite-fails", "ran suite-after", "== make test: each suite's verdict", "== make test: FAILED"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	verdicts := regexp.MustCompile(`(?m)^(ok  |FAIL) (suite-\w+) in \d+ s$`).FindAllStringSubmatch(got, -1)
	var seen []string
	for _, v := range verdicts {
		seen = append(seen, strings.TrimSpace(v[1])+" "+v[2])
	}
	if want := "ok suite-passes,FAIL suite-fails,ok suite-after"; strings.Join(seen, ",") != want {
		t.Errorf("verdicts %q, want %q\n%s", strings.Join(seen, ","), want, got)
	}
}

func errorsAs(err error, exit **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*exit = e
	return ok
}
