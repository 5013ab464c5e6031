package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/kptr-dev/kptr/test/fnimage"
)

// throttle serves the registry at upstream on a loopback port, sending blob
// bodies at most bytesPerSec: a slow registry in front of a large image.
func throttle(t testing.TB, upstream string, bytesPerSec int) string {
	t.Helper()
	u, _ := url.Parse("http://" + upstream)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if strings.Contains(resp.Request.URL.Path, "/blobs/") {
			resp.Body = &slowBody{ReadCloser: resp.Body, perSec: bytesPerSec}
		}
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: proxy}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// slowBody is a body read at perSec bytes a second at most.
type slowBody struct {
	io.ReadCloser
	perSec int
	start  time.Time
	sent   int64
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.start.IsZero() {
		b.start = time.Now()
	}
	n, err := b.ReadCloser.Read(p)
	b.sent += int64(n)
	time.Sleep(time.Until(b.start.Add(time.Duration(b.sent * int64(time.Second) / int64(b.perSec)))))
	return n, err
}

// fetchers lists the running background fetches (kptr cache fetch) of the
// cache at dir.
func fetchers(dir string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "cache\x00fetch\x00") && strings.Contains(string(b), dir) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// A large image behind a slow registry on a cold cache: the first renders
// (eight Applications at once) run out of time while it downloads. Each
// fails well within Argo CD's deadline with kptr's message that the image
// is being fetched and to retry; the download goes on in one background
// fetch; the retry renders; every blob was fetched once; no process is left.
func TestArgoCDRepoServerChainColdLargeImage(t *testing.T) {
	f := pushFunctions(t)
	const layerBytes, rate = 24 << 20, 3 << 20 // 8 s of download
	noise := make([]byte, layerBytes)
	rand.Read(noise)
	bigImg := fnimage.Build(t, "set-labels", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"usr/share/noise": string(noise)})))
	fnimage.Push(t, bigImg, f.reg.Addr+"/fn/big:v1")
	slow := throttle(t, f.reg.Addr, rate)
	big := slow + "/fn/big:v1"

	work := filepath.Join(t.TempDir(), "apps")
	if err := os.Rename(repository(t, f), work); err != nil {
		t.Fatal(err)
	}
	write(t, work, map[string]string{
		"apps/big/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: big\npipeline:\n  mutators:\n  - image: " + big + "\n    configMap:\n      tier: large\n",
		"apps/big/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n",
	})
	// KPTR_TIMEOUT below the controller's deadline, as deploy/ sets it
	// (50 s of 60 s), scaled down.
	c := startChain(t, f, work, map[string]string{"KPTR_ALLOWED_IMAGES": slow + "/fn/*", "KPTR_TIMEOUT": "3s"})
	t.Cleanup(func() {
		for _, pid := range fetchers(c.sidecar.cache) {
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
	})
	digests := blobs(t, bigImg)

	const n, deadline = 8, 30 * time.Second
	errs := make([]error, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			t0 := time.Now()
			_, errs[i] = c.generate(ctx, c.request(fmt.Sprintf("big-%d", i), c.source("apps/big", nil)))
			took[i] = time.Since(t0)
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	withProgress := 0
	for i := range n {
		if errs[i] == nil {
			t.Fatalf("application %d rendered on a cold cache within 3s (the image is too small for the test)", i)
		}
		msg := status.Convert(errs[i]).Message()
		if i == 0 {
			t.Logf("after %s the UI shows: %s", took[i].Round(time.Millisecond), msg)
		}
		// The download's progress, once the fetch knows the image's size.
		if strings.Contains(msg, " MiB so far)") {
			withProgress++
		}
		for _, w := range []string{"kptr generate: timed out after 3s", big + " is still being fetched in the background", "retry in a moment"} {
			if !strings.Contains(msg, w) {
				t.Errorf("application %d: message %q does not contain %q", i, msg, w)
			}
		}
		if took[i] > deadline*2/3 {
			t.Errorf("application %d failed after %s, not well within the %s deadline", i, took[i].Round(time.Millisecond), deadline)
		}
	}
	if withProgress == 0 {
		t.Errorf("no message shows the download's progress")
	}
	if p := fetchers(c.sidecar.cache); len(p) != 1 {
		t.Fatalf("%d background fetches running after the renders ended (%v), want 1", len(p), p)
	}
	for len(fetchers(c.sidecar.cache)) > 0 {
		if time.Since(t0) > 2*time.Minute {
			t.Fatalf("background fetch still running after %s", time.Since(t0).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the background fetch ended %s after the first renders started", time.Since(t0).Round(time.Millisecond))

	// Argo CD's retry.
	for i := range n {
		r, err := c.generate(context.Background(), c.request(fmt.Sprintf("big-%d", i), c.source("apps/big", nil)))
		if err != nil {
			t.Fatalf("application %d after the fetch: %v", i, err)
		}
		if len(r.Manifests) != 1 || !strings.Contains(r.Manifests[0], `"tier":"large"`) {
			t.Errorf("application %d: manifests %v, want the ConfigMap labelled tier: large", i, r.Manifests)
		}
	}
	for _, d := range digests {
		if got := f.reg.BlobGets(d); got != 1 {
			t.Errorf("blob %s fetched %d times, want 1", d, got)
		}
	}
	if p := fetchers(c.sidecar.cache); len(p) != 0 {
		t.Errorf("processes left behind: %v", p)
	}
	// The fetch outlived the renders Argo CD gave up on: an orphan, which
	// kptr init (pid 1) reaped; argocd-cmp-server as pid 1 would have left
	// it a zombie.
	c.sidecar.checkNamespaceClean(t)
}
