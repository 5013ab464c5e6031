package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// What one registry may cost. A registry (or a mirror) is hostile input:
// whatever it sends, these bound the memory, disk and time a pull takes.
// Blobs are bounded by their declared size, itself bounded by Limits.
const (
	// maxManifestBytes bounds a manifest or an index: 4 MiB, what the
	// distribution registry accepts on push (its maxManifestBodySize).
	maxManifestBytes = 4 << 20
	// maxConfigBytes bounds an image config, which is read whole (real
	// configs are kilobytes).
	maxConfigBytes = 16 << 20
	// maxLayers bounds a manifest's layer list (Docker allows 127).
	maxLayers = 1000
	// maxTags and maxTagBytes bound a tag list over all its pages
	// (bytes: tag names plus JSON punctuation).
	maxTags     = 100_000
	maxTagBytes = 8 << 20
	// maxOtherBytes bounds every other body: pings, tokens, error documents.
	maxOtherBytes = 1 << 20
	// minProgress is what a response body must deliver per timeout window;
	// less (a stall, or a trickle of a byte now and then) ends the request.
	minProgress = 1 << 10
	// maxResumes is how often one blob download continues (HTTP Range)
	// after the connection broke, within one pull.
	maxResumes = 3
)

// registryTransport is the HTTP transport under every registry request
// (go-containerregistry's auth and retry layers sit above it). It gives each
// request connect, TLS-handshake and response-header timeouts, and each
// response body an idle-read timeout (at least minProgress bytes per
// timeout window) and a size cap by kind (manifest, tag list, other; blobs
// are capped by their reader at the declared size). Plain HTTP is refused
// except to loopback and listed registries (go-containerregistry would also
// fall back to HTTP for RFC 1918 addresses). Its errors name the registry.
type registryTransport struct {
	next     http.RoundTripper
	insecure map[string]bool
	timeout  time.Duration
}

func newRegistryTransport(timeout time.Duration, insecure map[string]bool) *registryTransport {
	base := remote.DefaultTransport.(*http.Transport).Clone()
	base.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	base.TLSHandshakeTimeout = timeout
	base.ResponseHeaderTimeout = timeout
	return &registryTransport{next: base, insecure: insecure, timeout: timeout}
}

// blobKey marks a request context as a blob download (also across the
// redirects to a storage back end, whose URLs say nothing).
type blobKey struct{}

func (t *registryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if req.URL.Scheme == "http" && !t.insecure[host] && !isLoopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("refusing plain HTTP to %s: only loopback and --insecure-registry hosts may use it", host)
	}
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, t.describe(host, err)
	}
	what, limit := bodyLimit(req, resp)
	if limit >= 0 && resp.ContentLength > limit {
		resp.Body.Close()
		cancel()
		return nil, &registryError{host: host, msg: fmt.Sprintf("%s of %d bytes is over the %s limit", what, resp.ContentLength, sizeString(limit))}
	}
	resp.Body = newWatchedBody(resp.Body, cancel, host, what, limit, t.timeout)
	return resp, nil
}

// describe names the registry and, for a timeout, the setting that bounds it.
func (t *registryTransport) describe(host string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &registryError{host: host, msg: fmt.Sprintf("no answer within %s (--registry-timeout)", t.timeout), err: err}
	}
	var tmp interface{ Temporary() bool }
	return &registryError{host: host, err: err, temporary: errors.As(err, &tmp) && tmp.Temporary()}
}

// bodyLimit says what a response is and how many body bytes it may have
// (-1: the caller bounds it, as for blobs).
func bodyLimit(req *http.Request, resp *http.Response) (string, int64) {
	p := req.URL.Path
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return "error response", maxOtherBytes
	case req.Context().Value(blobKey{}) != nil:
		return "blob", -1
	case strings.Contains(p, "/manifests/"):
		return "manifest", maxManifestBytes
	case strings.HasSuffix(p, "/tags/list"):
		return "tag list", maxTagBytes
	}
	return "response", maxOtherBytes
}

// registryError is a failed exchange with one registry.
type registryError struct {
	host, msg string
	err       error
	temporary bool // go-containerregistry retries temporary errors
}

func (e *registryError) Error() string {
	switch {
	case e.msg == "":
		return "registry " + e.host + ": " + e.err.Error()
	case e.err == nil:
		return "registry " + e.host + ": " + e.msg
	}
	return "registry " + e.host + ": " + e.msg + ": " + e.err.Error()
}
func (e *registryError) Unwrap() error   { return e.err }
func (e *registryError) Temporary() bool { return e.temporary }

// watchedBody is a response body that fails, and cancels its request, when
// the registry sends less than minProgress bytes in a window of timeout, or
// more than limit bytes.
type watchedBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc
	host   string
	what   string
	limit  int64
	window time.Duration
	n      int64

	mu      sync.Mutex
	since   time.Time // start of the current window
	got     int64     // bytes in the current window
	stalled bool
	timer   *time.Timer
}

func newWatchedBody(rc io.ReadCloser, cancel context.CancelFunc, host, what string, limit int64, window time.Duration) *watchedBody {
	b := &watchedBody{rc: rc, cancel: cancel, host: host, what: what, limit: limit, window: window, since: time.Now()}
	b.timer = time.AfterFunc(window, b.check)
	return b
}

// check runs when a window may have ended without progress.
func (b *watchedBody) check() {
	b.mu.Lock()
	if left := b.window - time.Since(b.since); left > 0 {
		b.timer.Reset(left)
		b.mu.Unlock()
		return
	}
	b.stalled = true
	b.mu.Unlock()
	b.cancel()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.limit >= 0 && int64(len(p)) > b.limit-b.n+1 {
		p = p[:b.limit-b.n+1]
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	b.mu.Lock()
	if b.got += int64(n); b.got >= minProgress {
		b.got, b.since = 0, time.Now()
	}
	stalled := b.stalled
	b.mu.Unlock()
	switch {
	case stalled:
		return n, &registryError{host: b.host, msg: fmt.Sprintf("stalled: less than %s of the %s in %s (--registry-timeout)", sizeString(minProgress), b.what, b.window)}
	case b.limit >= 0 && b.n > b.limit:
		return n - int(b.n-b.limit), &registryError{host: b.host, msg: fmt.Sprintf("%s larger than the %s limit", b.what, sizeString(b.limit))}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	b.timer.Stop()
	err := b.rc.Close()
	b.cancel()
	return err
}

// sizeString renders a limit as people write it ("4 MiB").
func sizeString(n int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return fmt.Sprintf("%d %s", n/u.n, u.s)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// blobClient is an authenticated client for one repository's blobs,
// built once per Cache and repository (go-containerregistry's puller does
// the same for manifests); the bearer transport refreshes expired tokens.
func (c *Cache) blobClient(ctx context.Context, repo name.Repository) (*http.Client, error) {
	key := repo.Scheme() + "://" + repo.Name()
	c.mu.Lock()
	cl, ok := c.clients[key]
	c.mu.Unlock()
	if ok {
		return cl, nil
	}
	auth, err := authn.Resolve(ctx, c.s.keychain, repo)
	if err != nil {
		return nil, err
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, transport.NewUserAgent(c.transport, c.s.userAgent), []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, err
	}
	cl = &http.Client{Transport: rt}
	c.mu.Lock()
	c.clients[key] = cl
	c.mu.Unlock()
	return cl, nil
}

// getBlob requests blob h of repo from byte offset on (offset 0: all of it).
// The caller reads at most the declared size from the body.
func (c *Cache) getBlob(ctx context.Context, repo name.Repository, h v1.Hash, offset int64) (*http.Response, error) {
	cl, err := c.blobClient(ctx, repo)
	if err != nil {
		return nil, err
	}
	u := url.URL{Scheme: repo.Scheme(), Host: repo.RegistryStr(), Path: fmt.Sprintf("/v2/%s/blobs/%s", repo.RepositoryStr(), h)}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, blobKey{}, true), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := cl.Do(req)
	if err != nil {
		var re *registryError
		if errors.As(err, &re) {
			return nil, re // without net/http's `Get "URL":` prefix
		}
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK, http.StatusPartialContent); err != nil {
		resp.Body.Close()
		return nil, &registryError{host: repo.RegistryStr(), err: err}
	}
	return resp, nil
}

// listTags reads repo's tag list page by page, failing as soon as it grows
// past maxTags tags or maxTagBytes bytes.
func (c *Cache) listTags(ctx context.Context, repo name.Repository) ([]string, error) {
	l, err := c.puller.Lister(ctx, repo)
	if err != nil {
		return nil, err
	}
	var tags []string
	size := 0
	for l.HasNext() {
		page, err := l.Next(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tags {
			size += len(t) + 3
		}
		tags = append(tags, page.Tags...)
		if len(tags) > maxTags || size > maxTagBytes {
			return nil, &registryError{host: repo.RegistryStr(), msg: fmt.Sprintf("%s has more than %d tags or %s of them (the limit); pin a version instead of a constraint", repo.RepositoryStr(), maxTags, sizeString(maxTagBytes))}
		}
		if len(page.Tags) == 0 && l.HasNext() {
			return nil, &registryError{host: repo.RegistryStr(), msg: "empty tag-list page that links to another"}
		}
	}
	return tags, nil
}
