// Package hostileregistry is a registry that lies, written for kptr's tests:
// an HTTP server on 127.0.0.1 with a free port that speaks just enough of the
// OCI distribution API (ping, manifests, blobs, tag lists) to lead a client
// into the traps below, and counts what it served.
//
//	s := hostileregistry.Start(hostileregistry.Options{TrickleEvery: 2 * time.Second})
//	defer s.Close()
//	_, err := c.Resolve(ctx, s.Ref(hostileregistry.Huge))
//	// err must name s.Host and the cause; s.BlobBytes(hostileregistry.Huge) must be 0
//
// Every repository serves tag "v1" and its manifest by digest. What each
// repository does is in the doc comment of its constant. Nothing is stored:
// endless bodies and ten million tags are generated as they are written.
package hostileregistry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The repositories. Each serves tag v1.
const (
	// Good is a well-formed image: one small gzip layer holding /hello.
	Good = "good"
	// Huge declares a 1 TiB layer and serves an endless blob for it.
	Huge = "huge"
	// Endless declares a 1 MiB layer (a digest nothing matches) and serves
	// an endless body without Content-Length.
	Endless = "endless"
	// Longer serves the right layer followed by endless junk, without
	// Content-Length: a client that stops at the declared size gets the
	// right bytes.
	Longer = "longer"
	// BigManifest serves an endless manifest without Content-Length.
	BigManifest = "bigmanifest"
	// BigManifestDeclared serves a manifest whose Content-Length says 1 GiB.
	BigManifestDeclared = "bigmanifest-declared"
	// ManyTags lists Options.Tags tags, paginated: the n query parameter
	// (default 100, at most 1000) and a Link header to the next page.
	ManyTags = "manytags"
	// ManyTagsFlat lists Options.Tags tags in one unpaginated response.
	ManyTagsFlat = "manytags-flat"
	// Stall answers the ping, then never answers a manifest request.
	Stall = "stall"
	// Trickle sends the manifest's headers, then one byte every
	// Options.TrickleEvery.
	Trickle = "trickle"
	// TrickleBlob serves a good manifest and config, then trickles the
	// layer one byte every Options.TrickleEvery.
	TrickleBlob = "trickle-blob"
	// Throttled serves a 1 MiB layer whose first request without a Range
	// header is cut (connection closed) after Options.CutAfter bytes; a
	// request with a Range header gets 206 and the rest.
	Throttled = "throttled"
)

// Options tune the traps; zero values take the defaults.
type Options struct {
	// TrickleEvery is the pause between bytes of Trickle and TrickleBlob (default 2s).
	TrickleEvery time.Duration
	// CutAfter is how many bytes of Throttled's layer the first request gets (default 256 KiB).
	CutAfter int64
	// Tags is the length of ManyTags' and ManyTagsFlat's lists (default 10,000,000).
	Tags int
}

// Server is a running hostile registry.
type Server struct {
	// Host is the registry's host:port (127.0.0.1).
	Host string
	// Blackhole is a host:port on 127.0.0.1 that accepts connections and
	// never reads or writes on them.
	Blackhole string

	opts  Options
	srv   *http.Server
	ln    net.Listener
	hole  net.Listener
	repos map[string]*repo

	mu        sync.Mutex
	conns     []net.Conn
	blobBytes map[string]int64    // repo → layer bytes written
	ranges    map[string][]string // repo → Range headers of layer requests
	requests  map[string]int      // repo → requests
	tagPages  map[string]int      // repo → tag-list responses
}

type repo struct {
	manifest []byte
	digest   string
	config   []byte
	configD  string
	layer    []byte // nil: generated (Huge, Endless)
	layerD   string
}

// Start runs a hostile registry until Close.
func Start(o Options) (*Server, error) {
	if o.TrickleEvery <= 0 {
		o.TrickleEvery = 2 * time.Second
	}
	if o.CutAfter <= 0 {
		o.CutAfter = 256 << 10
	}
	if o.Tags <= 0 {
		o.Tags = 10_000_000
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{Host: ln.Addr().String(), Blackhole: hole.Addr().String(), opts: o, ln: ln, hole: hole,
		blobBytes: map[string]int64{}, ranges: map[string][]string{}, requests: map[string]int{}, tagPages: map[string]int{}}
	s.repos = buildRepos()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go s.srv.Serve(ln)
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Close stops the server and drops every connection.
func (s *Server) Close() {
	s.hole.Close()
	s.srv.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
}

// Ref is repository r's tag v1 on this server.
func (s *Server) Ref(r string) string { return s.Host + "/" + r + ":v1" }

// Repository is repository r on this server (for tag lists).
func (s *Server) Repository(r string) string { return s.Host + "/" + r }

// BlobBytes is how many layer bytes repository r has written so far.
func (s *Server) BlobBytes(r string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blobBytes[r]
}

// Ranges lists the Range headers ("" for none) of r's layer requests.
func (s *Server) Ranges(r string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges[r]...)
}

// Requests is how many requests named repository r.
func (s *Server) Requests(r string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[r]
}

// TagPages is how many tag-list responses r has started.
func (s *Server) TagPages(r string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tagPages[r]
}

// LayerSize is the declared size of r's layer.
func (s *Server) LayerSize(r string) int64 {
	var m struct{ Layers []struct{ Size int64 } }
	json.Unmarshal(s.repos[r].manifest, &m)
	return m.Layers[0].Size
}

func (s *Server) count(r string, f func()) {
	s.mu.Lock()
	f()
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == "/v2/" || p == "/v2" {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		w.WriteHeader(http.StatusOK)
		return
	}
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	name, kind, ref := splitPath(rest)
	s.count(name, func() { s.requests[name]++ })
	rp := s.repos[name]
	switch {
	case kind == "tags" && (name == ManyTags || name == ManyTagsFlat):
		s.serveTags(w, r, name)
	case rp == nil:
		notFound(w, "NAME_UNKNOWN")
	case kind == "manifests":
		s.serveManifest(w, r, name, rp, ref)
	case kind == "blobs" && ref == rp.configD:
		w.Header().Set("Content-Length", strconv.Itoa(len(rp.config)))
		w.Header().Set("Docker-Content-Digest", rp.configD)
		w.Write(rp.config)
	case kind == "blobs" && ref == rp.layerD:
		s.count(name, func() { s.ranges[name] = append(s.ranges[name], r.Header.Get("Range")) })
		s.serveLayer(w, r, name, rp)
	default:
		notFound(w, "BLOB_UNKNOWN")
	}
}

// splitPath splits "a/b/manifests/v1" into ("a/b", "manifests", "v1").
func splitPath(p string) (name, kind, ref string) {
	if n, ok := strings.CutSuffix(p, "/tags/list"); ok {
		return n, "tags", ""
	}
	for _, k := range []string{"/manifests/", "/blobs/"} {
		if i := strings.LastIndex(p, k); i >= 0 {
			return p[:i], strings.Trim(k, "/"), p[i+len(k):]
		}
	}
	return p, "", ""
}

func notFound(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, `{"errors":[{"code":%q,"message":"not here"}]}`, code)
}

func (s *Server) serveManifest(w http.ResponseWriter, r *http.Request, name string, rp *repo, ref string) {
	if ref != "v1" && ref != rp.digest {
		notFound(w, "MANIFEST_UNKNOWN")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	switch name {
	case Stall:
		<-r.Context().Done()
		return
	case BigManifest:
		w.WriteHeader(http.StatusOK)
		io := []byte(`{"schemaVersion":2,"annotations":{"padding":"`)
		w.Write(io)
		endless(w, r, func(n int) {})
		return
	case BigManifestDeclared:
		h.Set("Content-Length", strconv.Itoa(1<<30))
		w.WriteHeader(http.StatusOK)
		endless(w, r, func(n int) {})
		return
	case Trickle:
		s.trickle(w, r, rp.manifest, func(int) {})
		return
	}
	h.Set("Docker-Content-Digest", rp.digest)
	h.Set("Content-Length", strconv.Itoa(len(rp.manifest)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(rp.manifest)
}

func (s *Server) serveLayer(w http.ResponseWriter, r *http.Request, name string, rp *repo) {
	add := func(n int) { s.count(name, func() { s.blobBytes[name] += int64(n) }) }
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	switch name {
	case Huge, Endless:
		w.WriteHeader(http.StatusOK)
		endless(w, r, add)
		return
	case Longer:
		w.WriteHeader(http.StatusOK)
		w.Write(rp.layer)
		add(len(rp.layer))
		endless(w, r, add)
		return
	case TrickleBlob:
		s.trickle(w, r, rp.layer, add)
		return
	case Throttled:
		if rg := r.Header.Get("Range"); rg != "" {
			from, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"), 10, 64)
			if err != nil || from < 0 || from >= int64(len(rp.layer)) {
				w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
				return
			}
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(rp.layer)-1, len(rp.layer)))
			h.Set("Content-Length", strconv.FormatInt(int64(len(rp.layer))-from, 10))
			w.WriteHeader(http.StatusPartialContent)
			n, _ := w.Write(rp.layer[from:])
			add(n)
			return
		}
		// Cut: the headers promise the whole layer, the connection ends early.
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", len(rp.layer))
		cut := min(s.opts.CutAfter, int64(len(rp.layer)))
		buf.Write(rp.layer[:cut])
		buf.Flush()
		add(int(cut))
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(rp.layer)))
	h.Set("Docker-Content-Digest", rp.layerD)
	w.Write(rp.layer)
	add(len(rp.layer))
}

// endless writes zeros until the client goes away or the server closes.
func endless(w http.ResponseWriter, r *http.Request, add func(int)) {
	chunk := bytes.Repeat([]byte{'0'}, 32<<10)
	for r.Context().Err() == nil {
		n, err := w.Write(chunk)
		add(n)
		if err != nil {
			return
		}
	}
}

// trickle sends the headers at once, then body one byte every TrickleEvery.
func (s *Server) trickle(w http.ResponseWriter, r *http.Request, body []byte, add func(int)) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	t := time.NewTicker(s.opts.TrickleEvery)
	defer t.Stop()
	for _, b := range body {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if _, err := w.Write([]byte{b}); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		add(1)
	}
}

// serveTags lists tags "0.<i>.0" for i < Options.Tags, generated as written.
func (s *Server) serveTags(w http.ResponseWriter, r *http.Request, name string) {
	s.count(name, func() { s.tagPages[name]++ })
	from, to := 0, s.opts.Tags
	if name == ManyTags {
		n := 100
		if v, err := strconv.Atoi(r.URL.Query().Get("n")); err == nil && v > 0 {
			n = min(v, 1000)
		}
		if last := r.URL.Query().Get("last"); last != "" {
			i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(last, "0."), ".0"))
			if err != nil {
				notFound(w, "PAGINATION_NUMBER_INVALID")
				return
			}
			from = i + 1
		}
		to = min(from+n, s.opts.Tags)
		if to < s.opts.Tags {
			w.Header().Set("Link", fmt.Sprintf(`</v2/%s/tags/list?n=%d&last=0.%d.0>; rel="next"`, name, n, to-1))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, `{"name":%q,"tags":[`, name)
	for i := from; i < to && bw.err == nil && r.Context().Err() == nil; i++ {
		if i > from {
			bw.Write([]byte{','})
		}
		fmt.Fprintf(bw, `"0.%d.0"`, i)
	}
	bw.Write([]byte("]}"))
}

type errWriter struct {
	w   http.ResponseWriter
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

// buildRepos makes every repository's manifest, config and layer.
func buildRepos() map[string]*repo {
	hello := gzipTar("hello", []byte("hello from the hostile registry\n"))
	rnd := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(rnd)
	throttled := gzipTar("random", rnd)
	fake := sha("nothing matches this")
	out := map[string]*repo{}
	for _, name := range []string{Good, Huge, Endless, Longer, BigManifest, BigManifestDeclared, Stall, Trickle, TrickleBlob, Throttled} {
		layer := hello
		switch name {
		case Throttled:
			layer = throttled
		case Huge, Endless:
			layer = nil
		}
		out[name] = newRepo(name, layer, fake)
	}
	out[Huge].setLayer(fake, 1<<40)
	out[Endless].setLayer(fake, 1<<20)
	return out
}

type blob struct {
	data   []byte
	diffID string
}

func newRepo(name string, layer *blob, fake string) *repo {
	rp := &repo{}
	diffID := fake
	if layer != nil {
		rp.layer, rp.layerD, diffID = layer.data, sha(string(layer.data)), layer.diffID
	}
	cfg := map[string]any{
		"architecture": goruntime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/hello"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	}
	rp.config, _ = json.Marshal(cfg)
	rp.configD = sha(string(rp.config))
	rp.setLayer(rp.layerD, int64(len(rp.layer)))
	return rp
}

// setLayer (re)writes the manifest to declare layer digest d of size n.
func (rp *repo) setLayer(d string, n int64) {
	rp.layerD = d
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": rp.configD, "size": len(rp.config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": n}},
	}
	rp.manifest, _ = json.Marshal(m)
	rp.digest = sha(string(rp.manifest))
}

func gzipTar(name string, body []byte) *blob {
	var t bytes.Buffer
	tw := tar.NewWriter(&t)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write(body)
	tw.Close()
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(t.Bytes())
	zw.Close()
	return &blob{data: z.Bytes(), diffID: sha(t.String())}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}
