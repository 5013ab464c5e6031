package main

import (
	"strings"
	"testing"
)

// A suite's log: one line per package with its counts, the output of a
// failed test and of a package that failed outside its tests, and the
// suite's plain final line; the exit status follows the failures.
func TestSummarise(t *testing.T) {
	ev := func(action, pkg, test, output string) string {
		return `{"Action":"` + action + `","Package":"` + pkg + `","Test":"` + test + `","Output":` + quote(output) + `,"Elapsed":1.25}`
	}
	for _, tc := range []struct {
		name  string
		in    []string
		pass  bool
		lines []string
	}{
		{"passing, as test2json -p runtime", []string{
			ev("run", "runtime", "TestA", ""), ev("output", "runtime", "TestA", "=== RUN TestA\n"),
			ev("run", "runtime", "TestA/x", ""), ev("pass", "runtime", "TestA/x", ""),
			ev("pass", "runtime", "TestA", ""), ev("skip", "runtime", "TestB", ""), ev("pass", "runtime", "TestC", ""),
			ev("output", "runtime", "", "PASS\n"), ev("pass", "runtime", "", ""),
		}, true, []string{
			"ok   runtime (as uid 999): 2 passed, 0 failed, 1 skipped (1 subtests) in 1.3s",
			"as uid 999: 2 passed, 0 failed, 1 skipped",
		}},
		{"a failed test and a package that did not build", []string{
			ev("output", "github.com/kptr-dev/kptr/cache", "TestA", "cache_test.go:10: boom\n"),
			ev("fail", "github.com/kptr-dev/kptr/cache", "TestA", ""), ev("pass", "github.com/kptr-dev/kptr/cache", "TestB", ""),
			ev("fail", "github.com/kptr-dev/kptr/cache", "", ""),
			ev("output", "github.com/kptr-dev/kptr/pipeline", "", "pipeline.go:1: syntax error\n"),
			ev("fail", "github.com/kptr-dev/kptr/pipeline", "", ""),
			ev("skip", "github.com/kptr-dev/kptr/deploy/image", "", ""),
		}, false, []string{
			"--- FAIL: TestA (cache)", "cache_test.go:10: boom",
			"FAIL cache (as uid 999): 1 passed, 1 failed, 0 skipped in 1.3s",
			"pipeline.go:1: syntax error", "FAIL pipeline (as uid 999): 0 passed, 1 failed, 0 skipped in 1.3s: failed outside its tests (build error, panic or TestMain)",
			"?    deploy/image (as uid 999): no test files",
			"as uid 999: 1 passed, 2 failed, 0 skipped; failed: cache, pipeline",
		}},
		{"nothing ran", []string{"no events at all"}, false, []string{"no events at all", "as uid 999: 0 passed, 0 failed, 0 skipped; no test ran"}},
	} {
		var out strings.Builder
		pass := summarise(strings.NewReader(strings.Join(tc.in, "\n")), &out, "as uid 999")
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if pass != tc.pass || strings.Join(got, "\n") != strings.Join(tc.lines, "\n") {
			t.Errorf("%s: pass %v, want %v; lines:\n%s\nwant:\n%s", tc.name, pass, tc.pass, out.String(), strings.Join(tc.lines, "\n"))
		}
	}
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"`
}
