package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// cachedFake is fakeResolver plus ResolveCached for the images in cached.
type cachedFake struct {
	*fakeResolver
	cached map[string]bool
}

func (c *cachedFake) ResolveCached(_ context.Context, ref string) (bundle.Bundle, bool) {
	if !c.cached[ref] {
		return bundle.Bundle{}, false
	}
	args := c.images[ref]
	return bundle.Bundle{Ref: ref, Config: v1.Config{Entrypoint: []string{c.fx}, Cmd: args}}, true
}

// preparingRunner runs on the host and records Prepare and Run calls in
// order, with the invocation each was given (stdin left out).
type preparingRunner struct {
	mu     sync.Mutex
	events []string
	invs   map[string][]runtime.Invocation
	ctxs   []context.Context // Prepare's
}

func (p *preparingRunner) note(what string, b bundle.Bundle, inv runtime.Invocation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, what+" "+b.Ref[strings.LastIndex(b.Ref, "/")+1:])
	inv.Stdin = nil
	p.invs[what] = append(p.invs[what], inv)
}

func (p *preparingRunner) Prepare(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) {
	p.note("prepare", b, inv)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctxs = append(p.ctxs, ctx)
}

func (p *preparingRunner) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	p.note("run", b, inv)
	return runtime.Host{}.Run(ctx, b, inv)
}

// The next function of a pipeline is prepared while the current one runs,
// only when its image is cached; resolution order, results and errors are
// exactly those of a render without preparing.
func TestNextFunctionPrepared(t *testing.T) {
	fake := newFake(t)
	for _, n := range []string{"one", "two", "three", "v1", "v2"} {
		op := []string{"op=label", "key=" + n, "value=ran"}
		if n[0] == 'v' {
			op = []string{"op=count"}
		}
		fake.images["ghcr.io/kptdev/krm-functions-catalog/"+n+":latest"] = op
	}
	cf := &cachedFake{fakeResolver: fake, cached: map[string]bool{}}
	for _, n := range []string{"one", "two", "v1", "v2"} { // three is not cached
		cf.cached["ghcr.io/kptdev/krm-functions-catalog/"+n+":latest"] = true
	}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: one\n    - image: two\n    - image: three\n  validators:\n    - image: v1\n    - image: v2\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	pr := &preparingRunner{invs: map[string][]runtime.Invocation{}}
	var stderr bytes.Buffer
	out, err := Render(context.Background(), dir, Options{Resolver: cf, Runner: pr, Stderr: &stderr, Output: OutputMemory, Env: []string{"A=1"}})
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	// one is prepared as soon as the Kptfile is read, two before one runs,
	// three (not cached) never, v1 (the first validator) before the
	// last mutator runs, v2 before v1 runs
	want := "prepare one:latest,prepare two:latest,run one:latest,run two:latest,prepare v1:latest,run three:latest,prepare v2:latest,run v1:latest,run v2:latest"
	got := strings.Join(pr.events, ",")
	if got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	if calls := strings.Join(fake.calls, ","); strings.Count(calls, ",") != 4 || !strings.HasPrefix(calls, "ghcr.io/kptdev/krm-functions-catalog/one:latest,") {
		t.Fatalf("Resolve calls %s: want each function resolved once, at its turn", calls)
	}
	for _, inv := range pr.invs["prepare"] {
		if !reflect.DeepEqual(inv, pr.invs["run"][0]) {
			t.Fatalf("prepared with %+v, run with %+v", inv, pr.invs["run"][0])
		}
	}
	for _, n := range out.Resources {
		if l := n.GetLabels(); n.GetName() == "x" && (l["one"] != "ran" || l["two"] != "ran" || l["three"] != "ran") {
			t.Fatalf("labels %v", l)
		}
	}

	// A cached image whose Resolve fails at its turn (pull policy Always,
	// registry down) fails at its turn, as without preparing.
	fake.calls = nil
	fake.fail["ghcr.io/kptdev/krm-functions-catalog/two:latest"] = errors.New("pull refused: unauthorized")
	pr.events = nil
	stderr.Reset()
	_, err = Render(context.Background(), dir, Options{Resolver: cf, Runner: pr, Stderr: &stderr, Output: OutputMemory})
	if err == nil || !strings.Contains(stderr.String(), `[PASS] "ghcr.io/kptdev/krm-functions-catalog/one:latest"`) ||
		!strings.Contains(stderr.String(), "pull refused: unauthorized") || !strings.Contains(stderr.String(), "Exit code: 125") {
		t.Fatalf("err %v\n%s", err, stderr.String())
	}
	if got := strings.Join(pr.events, ","); got != "prepare one:latest,prepare two:latest,run one:latest" {
		t.Fatalf("events %s", got)
	}
}

// The root pipeline's first image function is asked for as soon as the
// Kptfile is read, before the package's resources are: a package whose
// resources cannot be read still had it asked for, and fails exactly as
// a render without preparing does; the preparations' context ends when
// Render returns, so the runner destroys it. A pipeline whose first
// function is not an image (exec), or whose tag needs a registry's tag
// list, asks for nothing early.
func TestFirstFunctionsPreparedBeforeRead(t *testing.T) {
	fake := newFake(t)
	cf := &cachedFake{fakeResolver: fake, cached: map[string]bool{}}
	for _, n := range []string{"one", "two", "three"} {
		ref := "ghcr.io/kptdev/krm-functions-catalog/" + n + ":latest"
		fake.images[ref] = []string{"op=label", "key=" + n, "value=ran"}
		cf.cached[ref] = true
	}
	files := map[string]string{
		"Kptfile":  kptfile("app", "pipeline:\n  mutators:\n    - image: one\n    - image: two\n    - image: three\n"),
		"bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n",
	}
	render := func(runner Runner) (string, error) {
		var stderr bytes.Buffer
		_, err := Render(context.Background(), writeTree(t, files), Options{Resolver: cf, Runner: runner, Stderr: &stderr, Output: OutputMemory})
		return stderr.String(), err
	}
	pr := &preparingRunner{invs: map[string][]runtime.Invocation{}}
	out, err := render(pr)
	if err == nil {
		t.Fatal("a package with an unreadable resource rendered")
	}
	if got := strings.Join(pr.events, ","); got != "prepare one:latest" {
		t.Fatalf("events %q: want the first function prepared before the package was read, none run", got)
	}
	preparationsEnded(t, pr, "Render")
	plainOut, plainErr := render(runtime.Host{})
	if out != plainOut || err.Error() != plainErr.Error() {
		t.Fatalf("with preparing: %v\n%s\nwithout: %v\n%s", err, out, plainErr, plainOut)
	}
	if len(fake.calls) != 0 {
		t.Fatalf("resolved %v before any function's turn", fake.calls)
	}

	// an exec function first, or an image whose tag is a constraint: nothing early
	for _, first := range []string{"    - exec: ./fn\n", "    - image: one\n      tag: \"~1.2\"\n"} {
		pr = &preparingRunner{invs: map[string][]runtime.Invocation{}}
		files["Kptfile"] = kptfile("app", "pipeline:\n  mutators:\n"+first+"    - image: two\n")
		if _, err := render(pr); err == nil {
			t.Fatal("a package with an unreadable resource rendered")
		}
		if len(pr.events) != 0 {
			t.Fatalf("first function %q: events %v", first, pr.events)
		}
	}
}

// fn eval's one function is prepared before its package is read, with the
// invocation its run then gives (so the run takes the prepared sandbox),
// only when its image is cached; one not taken is released when Eval
// returns, and results and errors are those of an eval without preparing.
func TestEvalPreparesItsFunction(t *testing.T) {
	fake := newFake(t)
	cf := &cachedFake{fakeResolver: fake, cached: map[string]bool{}}
	ref := "ghcr.io/kptdev/krm-functions-catalog/one" // eval adds no :latest
	fake.images[ref] = []string{"op=label", "key=one", "value=ran"}
	fake.images["ghcr.io/kptdev/krm-functions-catalog/uncached"] = fake.images[ref]
	cf.cached[ref] = true
	good := map[string]string{"Kptfile": kptfile("app", ""), "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"}
	bad := map[string]string{"Kptfile": kptfile("app", ""), "bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n"}
	eval := func(files map[string]string, image string, runner Runner) (string, error) {
		var stderr, stdout bytes.Buffer
		_, err := Eval(context.Background(), writeTree(t, files), EvalFunction{Image: image}, Options{
			Resolver: cf, Runner: runner, Stderr: &stderr, Stdout: &stdout, Output: OutputStdout, Env: []string{"A=b"},
		}, nil)
		return stdout.String() + stderr.String(), err
	}

	pr := &preparingRunner{invs: map[string][]runtime.Invocation{}}
	out, err := eval(good, "one", pr)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pr.events, ","); got != "prepare one,run one" {
		t.Fatalf("events %q: want the function prepared, then run", got)
	}
	if !reflect.DeepEqual(pr.invs["prepare"], pr.invs["run"]) {
		t.Fatalf("prepared with %+v, run with %+v: the run would not take the prepared sandbox", pr.invs["prepare"], pr.invs["run"])
	}
	plain, plainErr := eval(good, "one", runtime.Host{})
	took := regexp.MustCompile(` in [0-9.]+[µm]?s\b`) // the transcript's durations
	out, plain = took.ReplaceAllString(out, " in T"), took.ReplaceAllString(plain, " in T")
	if out != plain || plainErr != nil || !strings.Contains(out, "one: 'ran'") {
		t.Fatalf("with preparing:\n%s\nwithout (%v):\n%s", out, plainErr, plain)
	}

	// prepared before the package is read: an unreadable package fails the
	// eval with the function prepared, never run, and its context ended
	pr = &preparingRunner{invs: map[string][]runtime.Invocation{}}
	if _, err := eval(bad, "one", pr); err == nil {
		t.Fatal("a package with an unreadable resource was evaluated")
	}
	if got := strings.Join(pr.events, ","); got != "prepare one" {
		t.Fatalf("events %q: want the function prepared before the package was read, none run", got)
	}
	preparationsEnded(t, pr, "Eval")

	// an image the cache does not hold is not prepared (nothing is pulled)
	pr = &preparingRunner{invs: map[string][]runtime.Invocation{}}
	if _, err := eval(good, "uncached", pr); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pr.events, ","); got != "run uncached" {
		t.Fatalf("events %q: want the uncached image run without preparing", got)
	}
}

// preparationsEnded fails t for every preparation pr was asked for whose
// context is still live after fn (Render, Eval) returned: an unused
// prepared sandbox would wait until the command ends.
func preparationsEnded(t *testing.T, pr *preparingRunner, fn string) {
	t.Helper()
	for i, ctx := range pr.ctxs {
		if ctx.Err() == nil {
			t.Errorf("preparation %d: its context is still live after %s returned (an unused sandbox would wait until the command ends)", i, fn)
		}
	}
}
