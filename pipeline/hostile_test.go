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
