package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/runtime"
)

// pullingResolver takes pull to resolve each image, as a cold cache does,
// and says so in the bundle.
type pullingResolver struct {
	*fakeResolver
	pull time.Duration
}

func (p *pullingResolver) Resolve(ctx context.Context, ref string) (cache.Bundle, error) {
	time.Sleep(p.pull)
	b, err := p.fakeResolver.Resolve(ctx, ref)
	b.Pulled = p.pull
	return b, err
}

// The function's time in the transcript leaves out the image pull, which
// gets its own line (issue 14: `[PASS] "image" in 4.9s` included the download).
func TestTranscriptTimeExcludesThePull(t *testing.T) {
	fake := newFake(t)
	fake.images["ghcr.io/kptdev/krm-functions-catalog/labeler:latest"] = []string{"op=label", "key=a", "value=1"}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: labeler\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	var stderr bytes.Buffer
	r := &pullingResolver{fakeResolver: fake, pull: 1500 * time.Millisecond}
	if _, err := Render(context.Background(), dir, Options{Resolver: r, Runner: runtime.Host{}, Stderr: &stderr, Output: OutputMemory}); err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	want := regexp.MustCompile(`(?m)^\[RUNNING\] "ghcr.io/kptdev/krm-functions-catalog/labeler:latest"[^\n]*\n  Pulled in 1.5s\n\[PASS\] "ghcr.io/kptdev/krm-functions-catalog/labeler:latest" in (0s|\d{1,3}ms)\n`)
	if !want.MatchString(stderr.String()) {
		t.Fatalf("transcript:\n%s\nwant the pull on its own line and the function's time without it", stderr.String())
	}
}
