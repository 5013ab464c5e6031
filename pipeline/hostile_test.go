package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// hostileRender renders a one-mutator package whose function is the hostile
// fixture in mode args (test/fixtures/hostile/output.go), in place.
func hostileRender(t *testing.T, lim OutputLimits, args ...string) (string, error, map[string]string, map[string]string) {
	t.Helper()
	fake := &fakeResolver{fx: fnimage.Binary(t, "hostile"), images: map[string][]string{"gcr.io/x/hostile:v1": args}, fail: map[string]error{}}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: gcr.io/x/hostile:v1\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	before := snapshot(t, dir)
	var stderr bytes.Buffer
	_, err := Render(context.Background(), dir, Options{Resolver: fake, Runner: runtime.Host{}, Stderr: &stderr, Limits: lim})
	after := snapshot(t, dir)
	return stderr.String(), err, before, after
}

// TestHostileOutputLimits: a function printing more than kptr reads fails
// with an error naming the package, the function and the limit, and the
// package keeps its resources (only the Kptfile's render status changes,
// as for any failed function).
func TestHostileOutputLimits(t *testing.T) {
	for _, c := range []struct {
		args []string
		lim  OutputLimits
		want string
	}{
		{[]string{"results", "1000000"}, OutputLimits{}, "output has more than 50000 results (KPTR_FN_MAX_RESULTS)"},
		{[]string{"items", "200000"}, OutputLimits{}, "output has more than 50000 items (KPTR_FN_MAX_ITEMS)"},
		{[]string{"items", "200"}, OutputLimits{MaxItems: 100}, "output has more than 100 items (KPTR_FN_MAX_ITEMS)"},
		{[]string{"results", "200"}, OutputLimits{MaxResults: 100}, "output has more than 100 results (KPTR_FN_MAX_RESULTS)"},
		{[]string{"deep", "1500"}, OutputLimits{}, "output has more than 1000 levels of nesting"},
		{[]string{"flowdeep", "5000"}, OutputLimits{}, "output has more than 1000 levels of nesting"},
		{[]string{"laughs", "9"}, OutputLimits{}, "output has more than 4000000 YAML nodes (aliases expanded) (KPTR_FN_MAX_NODES)"},
		{[]string{"laughresults", "9"}, OutputLimits{}, "output has more than 4000000 YAML nodes (aliases expanded) (KPTR_FN_MAX_NODES)"},
		{[]string{"laughs", "4"}, OutputLimits{MaxNodes: 1000}, "output has more than 1000 YAML nodes (aliases expanded) (KPTR_FN_MAX_NODES)"},
		{[]string{"scalar", "1000"}, OutputLimits{MaxNodes: 10}, "output has more than 10 YAML nodes (aliases expanded) (KPTR_FN_MAX_NODES)"},
	} {
		t.Run(strings.Join(c.args, "-"), func(t *testing.T) {
			transcript, err, before, after := hostileRender(t, c.lim, c.args...)
			want := "render .: gcr.io/x/hostile:v1: " + c.want
			if err == nil || err.Error() != want {
				t.Fatalf("got %v, want %s\n%.2000s", err, want, transcript)
			}
			var le *OutputLimitError
			if !errors.As(err, &le) {
				t.Errorf("%v is not an *OutputLimitError", err)
			}
			delete(before, "Kptfile")
			delete(after, "Kptfile")
			if !equalTrees(before, after) {
				t.Errorf("the package changed:\n%v", after)
			}
		})
	}
}

// TestHostileOutputWithinLimits: outputs at the edge of the limits, and a
// billion laughs small enough to expand within them, are read as before
// (the aliases are kept, never expanded).
func TestHostileOutputWithinLimits(t *testing.T) {
	for _, args := range [][]string{{"items", "100"}, {"results", "100"}, {"deep", "900"}, {"laughs", "3"}, {"scalar", "10000000"}} {
		t.Run(strings.Join(args, "-"), func(t *testing.T) {
			transcript, err, _, _ := hostileRender(t, OutputLimits{MaxItems: 100, MaxResults: 100}, args...)
			if err != nil {
				t.Fatalf("%v\n%.2000s", err, transcript)
			}
		})
	}
}

// TestStderrNeutralised: escape sequences a function prints (on stderr or
// in a result) reach the transcript made visible, never raw; results.yaml
// keeps them exactly.
func TestStderrNeutralised(t *testing.T) {
	fake := &fakeResolver{fx: fnimage.Binary(t, "hostile"), images: map[string][]string{"gcr.io/x/hostile:v1": {"escapes"}}, fail: map[string]error{}}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: gcr.io/x/hostile:v1\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	results := t.TempDir()
	var stderr bytes.Buffer
	if _, err := Render(context.Background(), dir, Options{Resolver: fake, Runner: runtime.Host{}, Stderr: &stderr, Output: OutputMemory, ResultsDir: results}); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	got := stderr.String()
	for _, bad := range []string{"\x1b", "\x07", "\r"} {
		if strings.Contains(got, bad) {
			t.Errorf("transcript holds %q:\n%q", bad, got)
		}
	}
	for _, want := range []string{
		"    clipboard ^[]52;c;ZXZpbA==^G written\n",
		"    progress 10%^M[PASS] \"forged\" in 0s\n",
		"    ^[[2A^[[2K[PASS] \"gcr.io/forged\" in 0s^[[0m\n",
		"    bell^G tab\tend\n",
		"    [info]: result ^[]52;c;ZXZpbA==^G done\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("transcript lacks %q:\n%s", want, got)
		}
	}
	b, err := os.ReadFile(filepath.Join(results, "results.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`\e]52;c;ZXZpbA==\a written`, `progress 10%\r[PASS]`, `\e[2A\e[2K[PASS]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("results.yaml lacks %s:\n%s", want, b)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\ttab":  "plain text\n\ttab",
		"crlf\r\nline":       "crlf\nline",
		"\x1b]52;c;eA==\x07": "^[]52;c;eA==^G",
		"a\rb":               "a^Mb",
		"del\x7f nul\x00":    "del^? nul^@",
		"c1 \u009b2J":        `c1 \u009b2J`,
		"bidi \u202egnp.exe": `bidi \u202egnp.exe`,
		"bad \xff utf8":      `bad \xff utf8`,
		"ünïcödé ✓":          "ünïcödé ✓",
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// One results budget for the whole render (issue 30: each function within
// KPTR_FN_MAX_RESULTS, 40 of them took kptr to 3 GB): the function whose
// results take the render over the budget fails, named, with the setting,
// and the package keeps its resources; results whose aliases expand past
// the bytes budget are counted as expanded. generate's FailedResultsOnly
// keeps no passing function's results, but counts them.
func TestRenderResultBudget(t *testing.T) {
	fake := &fakeResolver{fx: fnimage.Binary(t, "hostile"), fail: map[string]error{}, images: map[string][]string{
		"gcr.io/x/r1:v1":   {"results", "100"},
		"gcr.io/x/r2:v1":   {"results", "100"},
		"gcr.io/x/r3:v1":   {"results", "100"},
		"gcr.io/x/lol:v1":  {"laughresults", "5"},
		"gcr.io/x/fail:v1": {"exit", "1"},
	}}
	render := func(fns string, opts Options) (*Output, error, string) {
		dir := writeTree(t, map[string]string{
			"Kptfile": kptfile("app", "pipeline:\n  validators:\n"+fns),
			"cm.yaml": fmt.Sprintf(cm, "x"),
		})
		before := snapshot(t, dir)
		var stderr bytes.Buffer
		opts.Resolver, opts.Runner, opts.Stderr = fake, runtime.Host{}, &stderr
		out, err := Render(context.Background(), dir, opts)
		after := snapshot(t, dir)
		delete(before, "Kptfile")
		delete(after, "Kptfile")
		if !equalTrees(before, after) {
			t.Errorf("the package changed:\n%v", after)
		}
		return out, err, stderr.String()
	}
	three := "    - image: gcr.io/x/r1:v1\n    - image: gcr.io/x/r2:v1\n    - image: gcr.io/x/r3:v1\n"
	for _, c := range []struct {
		name   string
		fns    string
		budget ResultBudget
		want   string
	}{
		{"count", three, ResultBudget{MaxResults: 250}, "render .: gcr.io/x/r3:v1: output takes the render's functions over 250 results in all (KPTR_MAX_RESULTS)"},
		{"bytes", three, ResultBudget{MaxBytes: 3000}, "render .: gcr.io/x/r2:v1: output takes the render's functions over 3000 bytes of results in all (KPTR_MAX_RESULT_BYTES)"},
		{"aliases", "    - image: gcr.io/x/lol:v1\n", ResultBudget{MaxBytes: 100_000}, "render .: gcr.io/x/lol:v1: output takes the render's functions over 100000 bytes of results in all (KPTR_MAX_RESULT_BYTES)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err, transcript := render(c.fns, Options{Results: c.budget})
			if err == nil || err.Error() != c.want {
				t.Fatalf("got %v, want %s\n%.2000s", err, c.want, transcript)
			}
			var le *OutputLimitError
			if !errors.As(err, &le) || !le.Render {
				t.Errorf("%v is not the render's *OutputLimitError", err)
			}
		})
	}
	// within the budget: three functions' 300 results are all kept
	out, err, _ := render(three, Options{Results: ResultBudget{MaxResults: 300}})
	if err != nil {
		t.Fatal(err)
	}
	if n := countKept(out.Results); n != 300 {
		t.Errorf("%d results kept, want 300", n)
	}
	// generate's way: the failed function's results alone
	dir := t.TempDir()
	_, err, _ = render(three+"    - image: gcr.io/x/fail:v1\n", Options{Output: OutputMemory, FailedResultsOnly: true, ResultsDir: dir})
	if err == nil {
		t.Fatal("the failing function did not fail the render")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "results.yaml"))
	if strings.Contains(string(b), "message: m0") || !strings.Contains(string(b), "exitCode: 1") {
		t.Errorf("results.yaml keeps a passing function's results or lacks the failure:\n%.1000s", b)
	}
	_, err, _ = render(three, Options{Output: OutputMemory, FailedResultsOnly: true, Results: ResultBudget{MaxResults: 250}})
	if err == nil || !strings.Contains(err.Error(), "KPTR_MAX_RESULTS") {
		t.Errorf("results not kept escaped the budget: %v", err)
	}
}

func countKept(rl *ResultList) int {
	n := 0
	for _, it := range rl.Items {
		n += len(it.Results)
	}
	return n
}
