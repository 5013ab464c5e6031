package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

// cachedFake is fakeResolver plus ResolveCached for the images in cached.
type cachedFake struct {
	*fakeResolver
	cached map[string]bool
}

func (c *cachedFake) ResolveCached(_ context.Context, ref string) (cache.Bundle, bool) {
	if !c.cached[ref] {
		return cache.Bundle{}, false
	}
	args := c.images[ref]
	return cache.Bundle{Ref: ref, Config: v1.Config{Entrypoint: []string{c.fx}, Cmd: args}}, true
}

// preparingRunner runs on the host and records Prepare and Run calls in
// order, with the invocation each was given (stdin left out).
type preparingRunner struct {
	mu     sync.Mutex
	events []string
	invs   map[string][]runtime.Invocation
}

func (p *preparingRunner) note(what string, b cache.Bundle, inv runtime.Invocation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, what+" "+b.Ref[strings.LastIndex(b.Ref, "/")+1:])
	inv.Stdin = nil
	p.invs[what] = append(p.invs[what], inv)
}

func (p *preparingRunner) Prepare(_ context.Context, b cache.Bundle, inv runtime.Invocation) {
	p.note("prepare", b, inv)
}

func (p *preparingRunner) Run(ctx context.Context, b cache.Bundle, inv runtime.Invocation) (runtime.Result, error) {
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
	// two is prepared before one runs, three (not cached) never, v2 before v1 runs
	want := "prepare two:latest,run one:latest,run two:latest,run three:latest,prepare v2:latest,run v1:latest,run v2:latest"
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
	if got := strings.Join(pr.events, ","); got != "prepare two:latest,run one:latest" {
		t.Fatalf("events %s", got)
	}
}
