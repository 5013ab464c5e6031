package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// pullingResolver takes pull to resolve each image, as a cold cache does,
// and says so in the bundle.
type pullingResolver struct {
	*fakeResolver
	pull time.Duration
}

func (p *pullingResolver) Resolve(ctx context.Context, ref string) (bundle.Bundle, error) {
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
	// The pull takes 3 s; the function's own time is far below that, but on
	// a loaded machine may pass a second, so the check is only that the
	// printed time leaves the 3 s out (it would be 3 s or more with them).
	r := &pullingResolver{fakeResolver: fake, pull: 3 * time.Second}
	if _, err := Render(context.Background(), dir, Options{Resolver: r, Runner: runtime.Host{}, Stderr: &stderr, Output: OutputMemory}); err != nil {
		t.Fatalf("render: %v\n%s", err, stderr.String())
	}
	want := regexp.MustCompile(`(?m)^\[RUNNING\] "ghcr.io/kptdev/krm-functions-catalog/labeler:latest"[^\n]*\n  Pulled in 3s\n\[PASS\] "ghcr.io/kptdev/krm-functions-catalog/labeler:latest" in (0s|\d{1,3}ms|[12](\.\d+)?s)\n`)
	if !want.MatchString(stderr.String()) {
		t.Fatalf("transcript:\n%s\nwant the pull on its own line and the function's time without it", stderr.String())
	}
}

// slowRunner takes at least delay for each run.
type slowRunner struct {
	runtime.Host
	delay time.Duration
}

func (s slowRunner) Run(ctx context.Context, b bundle.Bundle, inv runtime.Invocation) (runtime.Result, error) {
	time.Sleep(s.delay)
	return s.Host.Run(ctx, b, inv)
}

// The function's time is truncated to the millisecond, as kpt main prints it
// (pkg/fn/runtime/runner.go FunctionRunner.Filter since 3aa209b:
// time.Since(t0).Truncate(time.Millisecond)), not to 100 ms ("in 300ms").
// A run that took a whole number of tenths of a second is run again: two in
// a row mean the time was truncated to 100 ms.
func TestTranscriptTimeInMilliseconds(t *testing.T) {
	fake := newFake(t)
	fake.images["ghcr.io/kptdev/krm-functions-catalog/labeler:latest"] = []string{"op=label", "key=a", "value=1"}
	dir := writeTree(t, map[string]string{
		"Kptfile": kptfile("app", "pipeline:\n  mutators:\n    - image: labeler\n"),
		"cm.yaml": fmt.Sprintf(cm, "x"),
	})
	re := regexp.MustCompile(`(?m)^\[PASS\] "ghcr.io/kptdev/krm-functions-catalog/labeler:latest" in ([0-9.]+(?:ms|s))$`)
	for try := 0; try < 2; try++ {
		var stderr bytes.Buffer
		opts := Options{Resolver: fake, Runner: slowRunner{delay: 251 * time.Millisecond}, Stderr: &stderr, Output: OutputMemory}
		if _, err := Render(context.Background(), dir, opts); err != nil {
			t.Fatalf("render: %v\n%s", err, stderr.String())
		}
		m := re.FindStringSubmatch(stderr.String())
		if m == nil {
			t.Fatalf("transcript:\n%s\nwant a [PASS] line with the function's time", stderr.String())
		}
		d, err := time.ParseDuration(m[1])
		if err != nil || d < 251*time.Millisecond {
			t.Fatalf("time %q: want at least the runner's 251ms (%v)", m[1], err)
		}
		if d%(100*time.Millisecond) != 0 {
			return
		}
	}
	t.Fatal("the function's time was a whole number of tenths of a second twice: truncated to 100 ms, not to the millisecond as kpt main prints it")
}
