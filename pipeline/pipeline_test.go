package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
	"github.com/kptr-dev/kptr/test/fnimage"
	"sigs.k8s.io/kustomize/kyaml/kio/kioutil"
)

// fakeResolver maps image references to host commands (the kptr-fx fixture
// with arguments), records every Resolve call and fails those listed.
type fakeResolver struct {
	mu     sync.Mutex
	fx     string
	images map[string][]string // ref -> fx arguments
	fail   map[string]error
	calls  []string
	tags   map[string][]string // repo -> tags, for ResolveConstraint
}

func (f *fakeResolver) Resolve(_ context.Context, ref string) (bundle.Bundle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, ref)
	if err := f.fail[ref]; err != nil {
		return bundle.Bundle{}, err
	}
	args, ok := f.images[ref]
	if !ok {
		return bundle.Bundle{}, fmt.Errorf("%s: not found", ref)
	}
	return bundle.Bundle{Ref: ref, Config: v1.Config{Entrypoint: []string{f.fx}, Cmd: args}}, nil
}

func (f *fakeResolver) ResolveConstraint(_ context.Context, repo, constraint string) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "constraint "+repo+" "+constraint)
	f.mu.Unlock()
	if constraint == "~0.2" {
		return repo + ":v0.2.9", nil
	}
	return "", fmt.Errorf("no tag of %s matches %s", repo, constraint)
}

// failingRunner fails every run (a sandbox that refuses).
type failingRunner struct{}

func (failingRunner) Run(context.Context, bundle.Bundle, runtime.Invocation) (runtime.Result, error) {
	return runtime.Result{}, errors.New("sandbox refused: no user namespaces")
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pkg")
	for p, c := range files {
		fp := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTrees(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n"

func kptfile(name, pipeline string) string {
	return "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: " + name + "\n" + pipeline
}

func newFake(t *testing.T) *fakeResolver {
	return &fakeResolver{fx: fnimage.Binary(t, "kptr-fx"), images: map[string][]string{}, fail: map[string]error{}}
}

func TestRenderImagesThroughResolver(t *testing.T) {
	fake := newFake(t)
	fake.images["ghcr.io/kptdev/krm-functions-catalog/labeler:latest"] = []string{"op=label", "key=a", "value=1"}
	fake.images["gcr.io/kpt-fn/labeler:v0.2.9"] = []string{"op=label", "key=b", "value=2"}
	fake.images["gcr.io/kpt-fn/labeler:v1.0.0"] = []string{"op=label", "key=c", "value=3"}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", `pipeline:
  mutators:
    - image: labeler
    - image: gcr.io/kpt-fn/labeler
      tag: "~0.2"
    - image: gcr.io/kpt-fn/labeler
      tag: v1.0.0
`),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	var stderr bytes.Buffer
	out, err := Render(context.Background(), dir, Options{Resolver: fake, Runner: runtime.Host{}, Stderr: &stderr, Output: OutputMemory})
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	want := []string{
		"constraint gcr.io/kpt-fn/labeler ~0.2",
		"ghcr.io/kptdev/krm-functions-catalog/labeler:latest",
		"gcr.io/kpt-fn/labeler:v0.2.9",
		"gcr.io/kpt-fn/labeler:v1.0.0",
	}
	if strings.Join(fake.calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("resolver calls:\n%s\nwant (tags resolved before any fetch):\n%s", strings.Join(fake.calls, "\n"), strings.Join(want, "\n"))
	}
	var got []string
	for _, n := range out.Resources {
		if n.GetName() == "x" {
			for k, v := range n.GetLabels() {
				got = append(got, k+"="+v)
			}
		}
	}
	sort.Strings(got)
	if strings.Join(got, ",") != "a=1,b=2,c=3" {
		t.Fatalf("labels %v, want a=1,b=2,c=3", got)
	}
	if out.Functions != 3 || out.Packages != 1 {
		t.Fatalf("functions %d packages %d", out.Functions, out.Packages)
	}
}

func TestKptfileErrorBeforeAnyFetch(t *testing.T) {
	fake := newFake(t)
	fake.images["ghcr.io/kptdev/krm-functions-catalog/a:latest"] = []string{"op=count"}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: a\n    - exec: fx\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	before := snapshot(t, dir)
	_, err := Render(context.Background(), dir, Options{Resolver: fake, Runner: runtime.Host{}})
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Message(), "--allow-exec") {
		t.Fatalf("want the --allow-exec error, got %v", err)
	}
	if len(fake.calls) != 0 {
		t.Fatalf("an image was resolved before the pipeline was prepared: %v", fake.calls)
	}
	after := snapshot(t, dir)
	delete(after, "Kptfile")
	delete(before, "Kptfile")
	if !equalTrees(before, after) {
		t.Fatalf("files other than the Kptfile changed")
	}
}

func TestPullFailureAtItsTurnIs125(t *testing.T) {
	fake := newFake(t)
	fake.images["ghcr.io/kptdev/krm-functions-catalog/one:latest"] = []string{"op=label", "key=one", "value=ran"}
	fake.fail["ghcr.io/kptdev/krm-functions-catalog/two:latest"] = errors.New("pull refused: unauthorized")
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: one\n    - image: two\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	before := snapshot(t, dir)
	var stderr bytes.Buffer
	results := filepath.Join(t.TempDir(), "results")
	_, err := Render(context.Background(), dir, Options{Resolver: fake, Runner: runtime.Host{}, Stderr: &stderr, ResultsDir: results})
	if err == nil {
		t.Fatal("render succeeded")
	}
	if got := strings.Join(fake.calls, ","); got != "ghcr.io/kptdev/krm-functions-catalog/one:latest,ghcr.io/kptdev/krm-functions-catalog/two:latest" {
		t.Fatalf("resolve order %s", got)
	}
	tr := stderr.String()
	for _, want := range []string{
		`[PASS] "ghcr.io/kptdev/krm-functions-catalog/one:latest"`,
		`[FAIL] "ghcr.io/kptdev/krm-functions-catalog/two:latest"`,
		"pull refused: unauthorized",
		"  Exit code: 125\n",
	} {
		if !strings.Contains(tr, want) {
			t.Fatalf("transcript lacks %q:\n%s", want, tr)
		}
	}
	rb, _ := os.ReadFile(filepath.Join(results, "results.yaml"))
	if !strings.Contains(string(rb), "exitCode: 125") || !strings.Contains(string(rb), "exitCode: 1\n") {
		t.Fatalf("results.yaml:\n%s", rb)
	}
	after := snapshot(t, dir)
	if after["cm.yaml"] != before["cm.yaml"] {
		t.Fatalf("cm.yaml changed by a failed render")
	}
	if !strings.Contains(after["Kptfile"], "exitCode: 125") || !strings.Contains(after["Kptfile"], "reason: RenderFailed") {
		t.Fatalf("Kptfile status:\n%s", after["Kptfile"])
	}
	if pe := (*Error)(nil); !errors.As(err, &pe) || pe.Function != "ghcr.io/kptdev/krm-functions-catalog/two:latest" {
		t.Fatalf("error does not name the function: %v", err)
	}
}

func TestRunnerErrorIs125(t *testing.T) {
	fake := newFake(t)
	fake.images["ghcr.io/kptdev/krm-functions-catalog/one:latest"] = []string{"op=count"}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: one\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	var stderr bytes.Buffer
	_, err := Render(context.Background(), dir, Options{Resolver: fake, Runner: failingRunner{}, Stderr: &stderr})
	if err == nil || !strings.Contains(stderr.String(), "sandbox refused") || !strings.Contains(stderr.String(), "Exit code: 125") {
		t.Fatalf("err %v\n%s", err, stderr.String())
	}
	if !strings.Contains(err.Error(), "render .: ghcr.io/kptdev/krm-functions-catalog/one:latest") {
		t.Fatalf("summary %q does not name package and function", err.Error())
	}
}

func TestInMemoryRenderWritesNothing(t *testing.T) {
	fake := newFake(t)
	dir := writeTree(t, map[string]string{
		"Kptfile":     kptfile("app", "pipeline:\n  mutators:\n    - exec: "+fake.fx+" op=label key=r value=y\n"),
		"cm.yaml":     fmt.Sprintf(cm, "top"),
		"sub/Kptfile": kptfile("sub", ""),
		"sub/s.yaml":  fmt.Sprintf(cm, "nested"),
	})
	before := snapshot(t, dir)
	out, err := Render(context.Background(), dir, Options{AllowExec: true, Output: OutputMemory})
	if err != nil {
		t.Fatal(err)
	}
	if !equalTrees(before, snapshot(t, dir)) {
		t.Fatal("in-memory render changed the package")
	}
	paths := map[string]string{}
	for _, n := range out.Resources {
		p, _, _ := kioutil.GetFileAnnotations(n)
		paths[n.GetName()] = p
		if n.GetLabels()["r"] != "y" {
			t.Errorf("%s not rendered", n.GetName())
		}
		if _, ok := n.GetAnnotations()[pkgPathAnnotation]; ok {
			t.Errorf("%s keeps the internal package-path annotation", n.GetName())
		}
	}
	if paths["nested"] != "sub/s.yaml" || paths["top"] != "cm.yaml" || paths["sub"] != "sub/Kptfile" {
		t.Fatalf("paths %v", paths)
	}
}

func TestImagesListsEveryPackage(t *testing.T) {
	fake := newFake(t)
	dir := writeTree(t, map[string]string{
		"Kptfile":       kptfile("app", "pipeline:\n  mutators:\n    - image: set-labels\n  validators:\n    - image: gcr.io/kpt-fn/kubeval:v0.3\n"),
		"a/Kptfile":     kptfile("a", "pipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/x\n      tag: \"~0.2\"\n    - exec: ./local.sh\n"),
		"a/b/c/Kptfile": kptfile("c", "pipeline:\n  mutators:\n    - image: set-labels\n"),
	})
	got, err := Images(dir, Options{Resolver: fake, ImagePrefix: "reg.local/fns"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gcr.io/kpt-fn/kubeval:v0.3", "gcr.io/kpt-fn/x:v0.2.9", "reg.local/fns/set-labels:latest"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Images = %v, want %v", got, want)
	}
}

func TestCommitCrashBeforeAndAfterCommitPoint(t *testing.T) {
	dir := writeTree(t, map[string]string{"a.yaml": "old a\n", "b.yaml": "old b\n", "gone.yaml": "old gone\n"})
	files := map[string][]byte{"a.yaml": []byte("new a\n"), "b.yaml": []byte("new b\n"), "new/c.yaml": []byte("new c\n")}

	// crash before the commit point: staging exists, journal does not
	tx := filepath.Join(dir, txDirName)
	if err := os.MkdirAll(filepath.Join(tx, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(tx, "data", "0"), []byte("new a\n"), 0o644)
	_ = os.WriteFile(filepath.Join(tx, "journal.tmp"), []byte("[{"), 0o644)
	if err := Recover(dir); err != nil {
		t.Fatal(err)
	}
	if s := snapshot(t, dir); s["a.yaml"] != "old a\n" || len(s) != 3 {
		t.Fatalf("uncommitted staging was applied: %v", s)
	}

	// crash after the commit point with one op applied: roll forward
	if err := commitFiles(dir, files, []string{"gone.yaml"}); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, dir)
	if want["a.yaml"] != "new a\n" || want["new/c.yaml"] != "new c\n" || want["gone.yaml"] != "" {
		t.Fatalf("commit: %v", want)
	}
	if _, err := os.Stat(tx); !os.IsNotExist(err) {
		t.Fatal("staging left behind")
	}
}

// Concurrent writers of one package serialise on the directory lock: the
// result is one writer's complete set of files, never a mix.
func TestConcurrentCommitsDoNotMix(t *testing.T) {
	dir := writeTree(t, map[string]string{"a.yaml": "0\n", "b.yaml": "0\n"})
	var wg sync.WaitGroup
	for w := 1; w <= 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			v := []byte(fmt.Sprintf("%d\n", w))
			if err := commitFiles(dir, map[string][]byte{"a.yaml": v, "b.yaml": v}, nil); err != nil {
				t.Error(err)
			}
		}(w)
	}
	wg.Wait()
	s := snapshot(t, dir)
	if s["a.yaml"] != s["b.yaml"] || len(s) != 2 {
		t.Fatalf("mixed result: %v", s)
	}
}

// Render keeps no shared state: concurrent in-memory renders (what Argo CD's
// parallel generate calls do) each get their own, correct result.
func TestConcurrentInMemoryRenders(t *testing.T) {
	fx := fnimage.Binary(t, "kptr-fx")
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		dir := writeTree(t, map[string]string{
			"Kptfile": kptfile("app", fmt.Sprintf("pipeline:\n  mutators:\n    - exec: %s op=label key=n value=v%d\n", fx, i)),
			"cm.yaml": fmt.Sprintf(cm, fmt.Sprintf("cm-%d", i)),
		})
		wg.Add(1)
		go func(i int, dir string) {
			defer wg.Done()
			out, err := Render(context.Background(), dir, Options{AllowExec: true, Output: OutputMemory})
			if err != nil {
				t.Error(err)
				return
			}
			for _, n := range out.Resources {
				if n.GetLabels()["n"] != fmt.Sprintf("v%d", i) {
					t.Errorf("render %d: %s has label %q", i, n.GetName(), n.GetLabels()["n"])
				}
			}
		}(i, dir)
	}
	wg.Wait()
}

// A symlinked resource file is written through its link, as kpt does.
func TestSymlinkedFileWrittenThrough(t *testing.T) {
	dir := writeTree(t, map[string]string{"real/target.yaml": "old\n"})
	if err := os.Symlink("real/target.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := commitFiles(dir, map[string][]byte{"link.yaml": []byte("new\n")}, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(filepath.Join(dir, "link.yaml")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "real/target.yaml")); string(b) != "new\n" {
		t.Fatalf("target = %q", b)
	}
}

// Render called from Go on a symlink to a package renders the package the
// link points to, as the CLI does.
func TestRenderThroughSymlinkedRoot(t *testing.T) {
	fake := newFake(t)
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - exec: "+fake.fx+" op=label key=r value=y\n"),
		"cm.yaml": fmt.Sprintf(cm, "top"),
	})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	out, err := Render(context.Background(), link, Options{AllowExec: true, Output: OutputMemory})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Resources) != 2 {
		t.Fatalf("rendered %d resources through the link, want 2", len(out.Resources))
	}
	var stderr bytes.Buffer
	if _, err := Render(context.Background(), link, Options{AllowExec: true, Stderr: &stderr}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode().Type() != os.ModeSymlink {
		t.Fatal("the link was replaced")
	}
	b, err := os.ReadFile(filepath.Join(dir, "cm.yaml"))
	if err != nil || !strings.Contains(string(b), "r: 'y'") {
		t.Fatalf("the package behind the link was not rendered in place: %s %v", b, err)
	}
	if !strings.Contains(stderr.String(), `Package "`+filepath.Base(dir)+`"`) {
		t.Fatalf("transcript names the link, not the package:\n%s", stderr.String())
	}
}
