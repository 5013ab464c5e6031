package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/cache"
)

// One bar per image: its name, layer i/n (cached layers count as done),
// bytes of the total, the rate; a resumed layer starts where it stopped.
func TestProgressBarNamesImageAndLayer(t *testing.T) {
	var out bytes.Buffer
	p := (&barProgress{w: &out}).Pull(cache.PullInfo{Image: "gcr.io/kpt-fn/set-labels:v0.1.5", Layers: 3, Fetch: 2, Bytes: 3 << 20})
	d := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	l := p.Layer(2, d, 2<<20, 1<<20)
	l.Add(1 << 20)
	l.Done(nil)
	l = p.Layer(3, d, 1<<20, 0)
	l.Add(1 << 20)
	l.Done(nil)
	p.Done(nil)
	s := out.String()
	for _, want := range []string{"gcr.io/kpt-fn/set-labels:v0.1.5 layer 2/3", "gcr.io/kpt-fn/set-labels:v0.1.5 layer 3/3", "(3.0/3.0 MiB, ", "B/s)\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("bar lacks %q:\n%q", want, s)
		}
	}
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("want the finished bar on one line of its own: %q", s)
	}
	if strings.Contains(s, "sha256:aaaa") {
		t.Errorf("bar names a digest: %q", s)
	}
}

// Without a terminal: one line per pull, per layer (with where it resumed)
// and at the end.
func TestProgressLogLines(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	p := (&logProgress{log: log, lvl: slog.LevelInfo}).Pull(cache.PullInfo{Image: "reg/fn:v1", Layers: 2, Fetch: 1, Bytes: 10})
	l := p.Layer(2, v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("b", 64)}, 10, 4)
	l.Add(6)
	l.Done(nil)
	p.Done(nil)
	for _, want := range []string{`msg="pulling image" image=reg/fn:v1 layers=2 fetch=1 bytes=10`, `msg="fetched layer" image=reg/fn:v1 layer=2/2`, "bytes=6 resumed=4", `msg="pulled image" image=reg/fn:v1 bytes=10`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
}
