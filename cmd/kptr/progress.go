package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/schollz/progressbar/v3"

	"github.com/kptr-dev/kptr/cache"
)

// Pull progress: on a terminal one bar per image, "IMAGE layer i/n" with
// bytes, total and rate (i counts finished layers, cached ones included);
// otherwise structured log lines. A resumed layer starts its bytes where the
// interrupted download stopped.

// barProgress draws one progress bar per pulled image on a terminal.
type barProgress struct {
	mu sync.Mutex
	w  io.Writer
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *barProgress) Pull(info cache.PullInfo) cache.PullProgress {
	b := &barPull{info: info, finished: info.Layers - info.Fetch}
	w := lockedWriter{&p.mu, p.w}
	b.bar = progressbar.NewOptions64(info.Bytes,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(b.describe()),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	return b
}

type barPull struct {
	info cache.PullInfo
	bar  *progressbar.ProgressBar

	mu       sync.Mutex
	finished int
}

func (b *barPull) describe() string {
	return fmt.Sprintf("%s layer %d/%d", b.info.Image, min(b.finished+1, b.info.Layers), b.info.Layers)
}

func (b *barPull) Layer(i int, d v1.Hash, size, resumed int64) cache.LayerProgress {
	if resumed > 0 {
		_ = b.bar.Add64(resumed)
	}
	return &barLayer{p: b, left: size - resumed}
}

func (b *barPull) Done(err error) {
	if err == nil {
		if !b.bar.IsFinished() { // a bar that reached its total finished itself
			_ = b.bar.Finish()
		}
		return
	}
	_ = b.bar.Exit()
}

// barLayer counts a layer as finished with its last byte, before the bar
// draws it, so that the bar's last state says layer n/n.
type barLayer struct {
	p    *barPull
	left int64
}

func (l *barLayer) Add(n int) {
	if l.left > 0 {
		if l.left -= int64(n); l.left <= 0 {
			l.p.mu.Lock()
			l.p.finished++
			d := l.p.describe()
			l.p.mu.Unlock()
			l.p.bar.Describe(d)
		}
	}
	_ = l.p.bar.Add(n)
}

func (l *barLayer) Done(error) {}

// logProgress logs a line when a pull starts, one per layer and one when
// the pull ends.
type logProgress struct {
	log *slog.Logger
	lvl slog.Level
}

func (p *logProgress) Pull(info cache.PullInfo) cache.PullProgress {
	p.log.Log(context.Background(), p.lvl, "pulling image", "image", info.Image, "layers", info.Layers, "fetch", info.Fetch, "bytes", info.Bytes)
	return &logPull{p: p, info: info, start: time.Now()}
}

type logPull struct {
	p     *logProgress
	info  cache.PullInfo
	start time.Time
}

func (l *logPull) Layer(i int, d v1.Hash, size, resumed int64) cache.LayerProgress {
	return &logLayer{pull: l, layer: fmt.Sprintf("%d/%d", i, l.info.Layers), d: d, resumed: resumed, start: time.Now()}
}

func (l *logPull) Done(err error) {
	if err != nil {
		l.p.log.Warn("pull failed", "image", l.info.Image, "error", err)
		return
	}
	l.p.log.Log(context.Background(), l.p.lvl, "pulled image", "image", l.info.Image, "bytes", l.info.Bytes, "duration", time.Since(l.start).Round(time.Millisecond))
}

type logLayer struct {
	pull    *logPull
	layer   string
	d       v1.Hash
	resumed int64
	start   time.Time
	mu      sync.Mutex
	n       int64
}

func (l *logLayer) Add(n int) { l.mu.Lock(); l.n += int64(n); l.mu.Unlock() }
func (l *logLayer) Done(err error) {
	if err != nil {
		return // the pull's line says why
	}
	l.pull.p.log.Log(context.Background(), l.pull.p.lvl, "fetched layer", "image", l.pull.info.Image, "layer", l.layer, "digest", l.d.String(),
		"bytes", l.n, "resumed", l.resumed, "duration", time.Since(l.start).Round(time.Millisecond))
}
