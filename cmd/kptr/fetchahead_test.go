package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// A render on a cold cache pulls its pipeline's images at once (issue 26:
// it pulled one at each function's turn, the pipeline's pulls one after
// another). The registry holds back every manifest request until it has
// seen one for each of the three images (or gave up after 5 s): pulled one
// at a time, the first image's request waits out the 5 s; pulled together,
// all arrive at once. The render's output is a cold render's, each
// function's time in the transcript without the pull.
func TestRenderPullsThePipelinesImagesAtOnce(t *testing.T) {
	const images = 3
	var (
		armed    atomic.Bool
		mu       sync.Mutex
		seen     = map[string]bool{}
		all      = make(chan struct{})
		timedOut atomic.Bool
	)
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if repo, _, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/"); ok && armed.Load() {
			mu.Lock()
			if !seen[repo] {
				seen[repo] = true
				if len(seen) == images {
					close(all)
				}
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(5 * time.Second):
				timedOut.Store(true)
			}
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img := fnimage.Build(t, "cat")
	var mutators strings.Builder
	for i := range images {
		ref := fmt.Sprintf("%s/fn/cat-%d:v1", host, i)
		fnimage.Push(t, img, ref)
		fmt.Fprintf(&mutators, "    - image: %s\n", ref)
	}
	armed.Store(true)

	dir := filepath.Join(t.TempDir(), "app")
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n" + mutators.String(),
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: v\n",
	})
	code, _, errs := runKptr(t, "fn", "render", dir, "--cache-dir", t.TempDir(), "--sandbox", "none", "--progress", "none")
	if code != 0 {
		t.Fatalf("render: exit %d\n%s", code, errs)
	}
	if timedOut.Load() {
		t.Errorf("the registry waited 5 s for the other images' manifest requests: the images were pulled one at a time\n%s", errs)
	}
	// each function's time leaves out only what its turn waited for the
	// pull (it was negative when the background pull's time was taken off)
	for i := range images {
		ref := fmt.Sprintf("%s/fn/cat-%d:v1", host, i)
		pass := regexp.MustCompile(`(?m)^\[PASS\] "` + regexp.QuoteMeta(ref) + `" in (\d+(\.\d+)?(ms|s|µs|ns)|0s)$`)
		if !pass.MatchString(errs) {
			t.Errorf("no [PASS] line with a function time at or above 0 for %s:\n%s", ref, errs)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cm.yaml")); err != nil || !strings.Contains(string(b), "k: v") {
		t.Errorf("cm.yaml after the render: %q, %v", b, err)
	}
}

// An image fetched ahead that cannot be pulled fails at its function's
// turn, as before: the functions before it run, the error names it and the
// exit code is a registry's (3). When an earlier function fails first, the
// render fails with that function's failure (1): the failed fetch of a
// later image, which no turn took, decides nothing.
func TestFetchAheadFailuresAtTheirTurn(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cat, fx, missing := host+"/fn/cat:v1", host+"/fn/kptr-fx:v1", host+"/fn/missing:v1"
	fnimage.Push(t, fnimage.Build(t, "cat"), cat)
	fnimage.Push(t, fnimage.Build(t, "kptr-fx"), fx)
	for _, c := range []struct {
		name, first string
		code        int
		want        string
	}{
		{"missing image", "    - image: " + cat + "\n", 3, missing},
		{"earlier function fails", "    - image: " + fx + "\n      configMap:\n        op: crash\n        code: \"1\"\n        message: boom\n", 1, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "app")
			writeTree(t, dir, map[string]string{
				"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n" + c.first + "    - image: " + missing + "\n",
				"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			})
			code, _, errs := runKptr(t, "fn", "render", dir, "--cache-dir", t.TempDir(), "--sandbox", "none", "--progress", "none")
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, want %d; stderr should name %q:\n%s", code, c.code, c.want, errs)
			}
			if c.code == 3 && !strings.Contains(errs, fmt.Sprintf("[PASS] %q", cat)) {
				t.Errorf("the function before the missing image did not run:\n%s", errs)
			}
		})
	}
}

// A render that stops at its first function's failure needs none of the
// later images, and kpt would never pull them (issue 30 item 8: kptr's
// fetch ahead still pulled them, six connections to two hosts). The
// registry holds every manifest request of a later image until its client
// gives up: the pulls ahead under way when the render ends are cancelled
// with it, the ones not yet started (fnenv.FetchAheadJobs at a time) are never
// asked for, and the first function's own image is fetched first whatever
// else is queued (it was queued behind them by chance: five renders
// make that chance small to miss).
func TestFetchAheadEndsWithTheRender(t *testing.T) {
	const later, renders = 12, 5
	type req struct {
		repo      string
		at        time.Time     // when it arrived
		cancelled chan struct{} // closed when the client gave up
	}
	var (
		mu   sync.Mutex
		held []req
	)
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	var armed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo, _, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/")
		if ok && armed.Load() && strings.HasPrefix(repo, "fn/later-") {
			q := req{repo: repo, at: time.Now(), cancelled: make(chan struct{})}
			mu.Lock()
			held = append(held, q)
			mu.Unlock()
			select {
			case <-r.Context().Done():
				close(q.cancelled)
				return
			case <-time.After(10 * time.Second):
			}
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	fx := host + "/fn/kptr-fx:v1"
	fnimage.Push(t, fnimage.Build(t, "kptr-fx"), fx)
	cat := fnimage.Build(t, "cat")
	mutators := "    - image: " + fx + "\n      configMap:\n        op: crash\n        code: \"1\"\n        message: boom\n"
	for i := range later {
		ref := fmt.Sprintf("%s/fn/later-%d:v1", host, i)
		fnimage.Push(t, cat, ref)
		mutators += "    - image: " + ref + "\n"
	}
	armed.Store(true)
	dir := filepath.Join(t.TempDir(), "app")
	writeTree(t, dir, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n" + mutators,
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
	})
	for range renders {
		mu.Lock()
		held = nil
		mu.Unlock()
		start := time.Now()
		code, _, errs := runKptr(t, "fn", "render", dir, "--cache-dir", t.TempDir(), "--sandbox", "none", "--progress", "none")
		if code != 1 || !strings.Contains(errs, "boom") {
			t.Fatalf("exit %d, want 1 naming the first function's failure:\n%s", code, errs)
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Errorf("the render took %s: its first function's image waited behind the later ones", d.Round(time.Millisecond))
		}
		ended := time.Now()
		// a request that arrives now was started after the render ended
		time.Sleep(500 * time.Millisecond)
		mu.Lock()
		reqs := slices.Clone(held)
		mu.Unlock()
		if len(reqs) > fnenv.FetchAheadJobs {
			t.Errorf("%d later images asked for: more than fnenv.FetchAheadJobs (%d) at once", len(reqs), fnenv.FetchAheadJobs)
		}
		for _, q := range reqs {
			if q.at.After(ended) {
				t.Errorf("%s was asked for %s after the render ended", q.repo, q.at.Sub(ended))
			}
			select {
			case <-q.cancelled:
			default:
				t.Errorf("the pull of %s was still under way 500 ms after the render ended", q.repo)
			}
		}
	}
}
