package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"github.com/kptr-dev/kptr/runtime"
)

// TestEvalSaveAndTag: --tag resolves like a Kptfile `tag:`; --save adds the
// function to the Kptfile after the run (image before tag resolution, the tag
// kept, selector, configMap), keeping the Kptfile's comments, and a second
// save of the same image replaces the entry; a failing run saves nothing.
func TestEvalSaveAndTag(t *testing.T) {
	fake := newFake(t)
	fake.images["gcr.io/kpt-fn/labeler:v0.2.9"] = []string{"op=label", "key=b", "value=2"}
	fake.images["gcr.io/kpt-fn/labeler:v1.0.0"] = []string{"op=crash", "code=1", "message=boom"}
	dir := writeTree(t, map[string]string{
		"Kptfile": "# head\napiVersion: kpt.dev/v1\nkind: Kptfile # kind\nmetadata:\n  name: app # name\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	var stderr bytes.Buffer
	opts := Options{Resolver: fake, Runner: runtime.Host{}, Stderr: &stderr}
	fn := EvalFunction{Image: "gcr.io/kpt-fn/labeler", Tag: "~0.2", SaveAs: SaveAsMutator,
		ConfigMap: map[string]string{"k": "v"}, Selector: kptv1.Selector{Kind: "ConfigMap"}}
	if _, err := Eval(context.Background(), dir, fn, opts, nil); err != nil {
		t.Fatalf("eval: %v\n%s", err, stderr.String())
	}
	want := `# head
apiVersion: kpt.dev/v1
kind: Kptfile # kind
metadata:
  name: app # name
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/labeler
      configMap:
        k: v
      tag: ~0.2
      selectors:
        - kind: ConfigMap
`
	if got := readKptfile(t, dir); got != want {
		t.Fatalf("Kptfile:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(stderr.String(), `[RUNNING] "gcr.io/kpt-fn/labeler:v0.2.9" on 1 resource(s)`) ||
		!strings.HasSuffix(stderr.String(), "Added \"gcr.io/kpt-fn/labeler\" as mutator in the Kptfile.\n") {
		t.Fatalf("transcript:\n%s", stderr.String())
	}
	// the same image again, failing: nothing saved, nothing written
	fn.Tag = "v1.0.0"
	if _, err := Eval(context.Background(), dir, fn, opts, nil); err == nil {
		t.Fatal("failing eval succeeded")
	}
	if got := readKptfile(t, dir); got != want {
		t.Fatalf("a failed eval changed the Kptfile:\n%s", got)
	}
	// a succeeding one replaces the entry, as a validator list stays empty
	fn.Tag, fn.Selector, fn.ConfigMap = "~0.2", kptv1.Selector{}, nil
	stderr.Reset()
	if _, err := Eval(context.Background(), dir, fn, opts, nil); err != nil {
		t.Fatalf("eval: %v\n%s", err, stderr.String())
	}
	if got := readKptfile(t, dir); !strings.Contains(got, "    - image: gcr.io/kpt-fn/labeler\n      tag: ~0.2\n") || strings.Contains(got, "selectors") ||
		!strings.Contains(stderr.String(), "Updated \"gcr.io/kpt-fn/labeler\" as mutator in the Kptfile.") {
		t.Fatalf("update:\n%s\n%s", got, stderr.String())
	}
}

func readKptfile(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "Kptfile"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckSave(t *testing.T) {
	for _, tc := range []struct {
		save bool
		typ  string
		want string
	}{
		{false, "", ""}, {false, "bogus", ""}, {true, SaveAsMutator, ""}, {true, SaveAsValidator, ""},
		{true, "", "--type must be specified if saving functions to Kptfile (--save=true)"},
		{true, "transformer", "--type must be either `mutator` or `validator`"},
	} {
		err := CheckSave(tc.save, tc.typ)
		if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
			t.Errorf("CheckSave(%v, %q) = %v, want %q", tc.save, tc.typ, err, tc.want)
		}
	}
	dir := t.TempDir()
	if err := CheckSaveFnConfig(dir, filepath.Join(dir, "cfg.yaml")); err != nil {
		t.Error(err)
	}
	if err := CheckSaveFnConfig(filepath.Join(dir, "pkg"), filepath.Join(dir, "cfg.yaml")); err == nil ||
		!strings.Contains(err.Error(), "--fn-config must be under") {
		t.Errorf("config outside the package: %v", err)
	}
}
