package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
)

// fetchRecorder is a Fetcher: it records the images asked for ahead and
// how many Resolve calls had been made by then.
type fetchRecorder struct {
	*fakeResolver
	mu      sync.Mutex
	fetched []string
	before  []int // len(fakeResolver.calls) at each Fetch
}

func (f *fetchRecorder) Fetch(_ context.Context, ref string) {
	f.fakeResolver.mu.Lock()
	n := len(f.fakeResolver.calls)
	f.fakeResolver.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetched = append(f.fetched, ref)
	f.before = append(f.before, n)
}

// Render asks a Fetcher for every image of the root pipeline (mutators and
// validators, each image once, in pipeline order) before any function
// resolves its image, also before a subpackage's function, which renders
// first (issue 26: a cold cache pulled one image at each function's turn).
// A subpackage's own images are left to their turn. Each turn still
// resolves its image: the outcome is the turn's.
func TestRenderFetchesTheRootPipelinesImagesAhead(t *testing.T) {
	fake := newFake(t)
	const (
		labeler   = "ghcr.io/kptdev/krm-functions-catalog/labeler:latest"
		annotator = "gcr.io/kpt-fn/annotator:v1"
		validator = "ghcr.io/kptdev/krm-functions-catalog/checker:v2"
		subOnly   = "ghcr.io/kptdev/krm-functions-catalog/sub-labeler:latest"
	)
	fake.images[labeler] = []string{"op=label", "key=a", "value=1"}
	fake.images[annotator] = []string{"op=label", "key=b", "value=2"}
	fake.images[validator] = []string{"op=label", "key=c", "value=3"}
	fake.images[subOnly] = []string{"op=label", "key=s", "value=4"}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: labeler\n    - image: "+annotator+
			"\n    - image: labeler\n  validators:\n    - image: "+validator+"\n"),
		"cm.yaml":         fmt.Sprintf(cm, "x"),
		"sub/Kptfile":     kptfile("sub", "pipeline:\n  mutators:\n    - image: sub-labeler\n"),
		"sub/cm-sub.yaml": fmt.Sprintf(cm, "y"),
	})
	rec := &fetchRecorder{fakeResolver: fake}
	var stderr bytes.Buffer
	if _, err := Render(context.Background(), dir, Options{Resolver: rec, Runner: runtime.Host{}, Stderr: &stderr, Output: OutputMemory}); err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	if want := []string{labeler, annotator, validator}; !slices.Equal(rec.fetched, want) {
		t.Fatalf("fetched ahead %q, want %q", rec.fetched, want)
	}
	for i, n := range rec.before {
		if n != 0 {
			t.Errorf("%s fetched after %d Resolve call(s), want before the first", rec.fetched[i], n)
		}
	}
	if want := []string{subOnly, labeler, annotator, labeler, validator}; !slices.Equal(fake.calls, want) {
		t.Errorf("resolved %q, want every function's turn as before: %q", fake.calls, want)
	}
}
