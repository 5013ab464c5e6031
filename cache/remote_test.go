package cache

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/kptr-dev/kptr/imageref"
)

// A registry that accepts connections and never answers, and one that stops
// sending in the middle of a blob: both fail within the timeout, naming the
// image, and leave nothing behind.
func TestHangingRegistryTimesOut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // hold it open, say nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	c := openTest(t, "", WithTimeout(500*time.Millisecond))
	ref := l.Addr().String() + "/fn/hang:v1"
	start := time.Now()
	_, err = c.Resolve(ctx, ref)
	if err == nil || !strings.Contains(err.Error(), ref) || time.Since(start) > 20*time.Second {
		t.Fatalf("hanging registry: %v after %v", err, time.Since(start))
	}

	// Stalls mid-blob.
	reg := newTestRegistry(t)
	big := gzipLayer(t, file("big", strings.Repeat("0123456789abcdef", 1<<16)))
	img := image(t, false, HostPlatform().Architecture, big)
	stallRef := reg.Host + "/fn/stall:v1"
	push(t, img, stallRef)
	bd, _ := big.Digest()
	bs, _ := big.Size()
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, bd.String()) {
			w.Header().Set("Content-Length", strconv.FormatInt(bs, 10))
			w.WriteHeader(200)
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		reg.Config.Handler.ServeHTTP(w, r)
	}))
	defer stall.Close()
	c = openTest(t, "", WithTimeout(500*time.Millisecond), WithMirrors(imageref.Mirror{From: reg.Host, To: strings.TrimPrefix(stall.URL, "http://")}))
	start = time.Now()
	_, err = c.Resolve(ctx, stallRef)
	if err == nil || !strings.Contains(err.Error(), "stalled") || time.Since(start) > 20*time.Second {
		t.Fatalf("stalled blob: %v after %v", err, time.Since(start))
	}
	partials(t, c, bs) // at most a partial download, kept to be continued
}

type countingProgress struct {
	mu      sync.Mutex
	bytes   map[string]int64
	size    map[string]int64
	resumed map[string]int64
	pulls   []PullInfo
	done    int
	ended   []error
}

func newCountingProgress() *countingProgress {
	return &countingProgress{bytes: map[string]int64{}, size: map[string]int64{}, resumed: map[string]int64{}}
}

func (p *countingProgress) Pull(info PullInfo) PullProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pulls = append(p.pulls, info)
	return p
}

func (p *countingProgress) Layer(i int, d v1.Hash, size, resumed int64) LayerProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.size[d.String()] = size
	p.resumed[d.String()] = resumed
	return &countingLayer{p, d.String()}
}

func (p *countingProgress) Done(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = append(p.ended, err)
}

type countingLayer struct {
	p *countingProgress
	d string
}

func (l *countingLayer) Add(n int) { l.p.mu.Lock(); l.p.bytes[l.d] += int64(n); l.p.mu.Unlock() }
func (l *countingLayer) Done(err error) {
	l.p.mu.Lock()
	if err == nil {
		l.p.done++
	}
	l.p.mu.Unlock()
}

func TestProgressReportsEveryLayerByte(t *testing.T) {
	reg := newTestRegistry(t)
	l1, l2 := gzipLayer(t, file("a", strings.Repeat("a", 300000))), zstdLayer(t, file("b", "b"))
	ref := reg.Host + "/fn/progress:v1"
	push(t, image(t, true, HostPlatform().Architecture, l1, l2), ref)
	p := newCountingProgress()
	if _, err := openTest(t, "", WithProgress(p)).Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if p.done != 2 || len(p.pulls) != 1 || p.pulls[0].Image != ref || p.pulls[0].Layers != 2 || p.pulls[0].Fetch != 2 || len(p.ended) != 1 || p.ended[0] != nil {
		t.Fatalf("%d layers done, pulls %+v ended %v", p.done, p.pulls, p.ended)
	}
	for _, l := range []v1.Layer{l1, l2} {
		d, _ := l.Digest()
		sz, _ := l.Size()
		if p.bytes[d.String()] != sz || p.size[d.String()] != sz {
			t.Fatalf("layer %s: reported %d of %d bytes (announced %d)", d, p.bytes[d.String()], sz, p.size[d.String()])
		}
	}
}

func TestUnknownRegistry(t *testing.T) {
	c := openTest(t, "", WithTimeout(3*time.Second))
	ref := "no-such-registry.invalid/fn/x:v1"
	_, err := c.Resolve(ctx, ref)
	var ce *Error
	if !errors.As(err, &ce) || ce.ExitCode() != 3 || !strings.HasPrefix(err.Error(), ref+": ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("unknown registry: %v", err)
	}
	if n := dirEntries(c.path(blobsDir)); len(n) != 0 {
		t.Fatalf("blobs: %v", n)
	}
}
