package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/kptr-dev/kptr/bundle"
	"golang.org/x/sync/singleflight"
)

// Cache is an image cache in one directory. It is safe for concurrent use by
// many goroutines and many processes sharing the directory.
type Cache struct {
	dir       string
	s         settings
	transport http.RoundTripper
	puller    *remote.Puller
	sf        singleflight.Group

	sweep   sync.Once // sweepTmp
	mu      sync.Mutex
	holds   map[string]*flock.Flock // manifest hex → shared lock held until Close
	clients map[string]*http.Client // repository → authenticated blob client

	// readOnly: the directory cannot be written (a pre-warmed cache on a
	// read-only volume). Nothing can change it, so resolves of what it holds
	// need no locks; anything that must write fails with the file system's error.
	readOnly bool
}

// Open opens (creating it if needed) the cache in dir. The directory must
// belong to the current user or to root and be writable by nobody else
// (checkOwner): whoever can write a cache decides what runs.
func Open(dir string, opts ...Option) (*Cache, error) {
	s := defaultSettings()
	for _, o := range opts {
		o(&s)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &Error{Err: fmt.Errorf("cache directory %q: %w", dir, err)}
	}
	c := &Cache{dir: abs, s: s, holds: map[string]*flock.Flock{}, clients: map[string]*http.Client{}}
	if err := os.MkdirAll(abs, 0o755); err != nil && !exists(abs) {
		return nil, &Error{Err: fmt.Errorf("cache directory %s: %w", abs, err)}
	}
	if err := c.checkOwners(); err != nil {
		return nil, &Error{Err: err}
	}
	if err := c.initLayout(); err != nil {
		return nil, &Error{Err: fmt.Errorf("cache directory %s: %w", abs, err)}
	}
	if f, err := os.CreateTemp(c.path(tmpDir), "probe-"); err == nil {
		f.Close()
		os.Remove(f.Name())
	} else if errors.Is(err, syscall.EROFS) || errors.Is(err, os.ErrPermission) {
		c.readOnly = true
	}
	c.transport = newRegistryTransport(s.timeout, s.insecure)
	if c.puller, err = remote.NewPuller(c.remoteOptions(context.Background())...); err != nil {
		return nil, &Error{Err: err}
	}
	return c, nil
}

// Dir is the cache directory (absolute).
func (c *Cache) Dir() string { return c.dir }

// Close releases the holds this Cache took on resolved images; until then
// (or until the process exits) prune never removes them.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, l := range c.holds {
		unlock(l)
		delete(c.holds, k)
	}
	return nil
}

func (c *Cache) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(c.transport),
		remote.WithAuthFromKeychain(c.s.keychain),
		remote.WithUserAgent(c.s.userAgent),
		remote.WithJobs(c.s.jobs),
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 2}),
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// meta is rootfs/<hex>/meta.json, written before the rootfs directory is
// committed: its presence in a committed directory means the rootfs is whole.
type meta struct {
	Manifest  string   `json:"manifest"`
	MediaType string   `json:"mediaType,omitempty"`
	Config    string   `json:"config"`
	Layers    []string `json:"layers"`
	Platform  string   `json:"platform,omitempty"`
	// Wasm is the module of a wasm function image, beneath the rootfs.
	Wasm     string    `json:"wasm,omitempty"`
	Image    v1.Config `json:"image"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	Tree     string    `json:"tree"`
	Unpacked time.Time `json:"unpacked"`
	// Format is treeFormat for a tree only its owner may write (treeMode).
	Format int `json:"format,omitempty"`
}

// treeFormat marks a tree extracted with treeMode's modes. Trees of older
// kptrs (no format) kept the image's own, a 1777 /tmp among them, so other
// users may have written into them: they are extracted again from their
// blobs (readMeta) rather than walked and repaired, which could not tell
// what another user put there from what the image had.
const treeFormat = 2

// errLooseTree is a tree an older kptr extracted with the image's modes.
var errLooseTree = errors.New("extracted by an older kptr that kept the image's own modes (a 1777 /tmp, world-writable directories), so other users may have written into it")

func (c *Cache) metaPath(hex string) string { return c.path(rootfsDir, hex, "meta.json") }

// readMeta reads an unpacked image's marker, after checking its directory,
// its rootfs/ and the marker itself by the cache's rule (owner.go): what
// they hold is run without being hashed again.
func (c *Cache) readMeta(hex string) (*meta, error) {
	for _, d := range []string{c.path(rootfsDir, hex), c.path(rootfsDir, hex, "rootfs")} {
		if err := checkEntry(d, true); err != nil {
			return nil, err
		}
	}
	f, err := openChecked(c.metaPath(hex))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetaBytes))
	if err != nil {
		return nil, err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m.Format < treeFormat {
		if c.readOnly {
			// Nobody here can extract it again: refuse it, as the rule
			// refuses any entry others may write (owner.go).
			return &m, untrusted("cache directory %s: %v; its owner can run kptr cache verify --repair, and the next pull extracts it again", c.path(rootfsDir, hex), errLooseTree)
		}
		return &m, fmt.Errorf("%s: %w", c.path(rootfsDir, hex), errLooseTree) // unpack extracts it again
	}
	return &m, nil
}

// Resolve turns an image reference into a runnable bundle, pulling and
// unpacking as the pull policy allows. The returned rootfs stays held (prune
// will not remove it) until Close or process exit.
func (c *Cache) Resolve(ctx context.Context, ref string) (bundle.Bundle, error) {
	ir, err := c.parseRef(ref)
	if err != nil {
		return bundle.Bundle{}, err
	}
	b, err := c.resolve(ctx, ir)
	if err != nil {
		return bundle.Bundle{}, imgErr(ir.named, err)
	}
	return b, nil
}

func (c *Cache) resolve(ctx context.Context, ir imageRef) (bundle.Bundle, error) {
	if c.s.sigPolicy != nil {
		if d, rejected := c.s.sigPolicy.Rejects(ir.named); rejected {
			return bundle.Bundle{}, refusal(d) // before any registry is asked
		}
	}
	if c.s.policy != PullAlways || c.s.offline {
		if d, ok := c.localDescriptor(ir); ok {
			if b, ok, err := c.cached(ctx, ir, d); ok || err != nil {
				return b, err
			}
			if c.hasBlob(d.Digest) || (!c.s.offline && c.s.policy != PullNever) {
				// Recorded (imported, or unpacked and pruned): unpack from
				// the blobs we have, fetching only what is missing.
				return c.pull(ctx, ir, &d)
			}
		}
	}
	if c.s.offline {
		return bundle.Bundle{}, fmt.Errorf("%w (offline)", ErrNotCached)
	}
	if c.s.policy == PullNever {
		return bundle.Bundle{}, fmt.Errorf("%w (image pull policy Never)", ErrNotCached)
	}
	return c.pull(ctx, ir, nil)
}

// localDescriptor is the recorded resolution of ir, or for a digest
// reference the digest itself.
func (c *Cache) localDescriptor(ir imageRef) (v1.Descriptor, bool) {
	if d, _, ok := c.lookup(ir.key, c.s.platform); ok {
		return d, true
	}
	if dg, ok := ir.ref.(name.Digest); ok {
		if h, err := v1.NewHash(dg.DigestStr()); err == nil {
			if _, err := os.Stat(c.metaPath(h.Hex)); err == nil {
				return v1.Descriptor{Digest: h}, true
			}
		}
	}
	return v1.Descriptor{}, false
}

// cached returns the bundle of an already unpacked image, holding it.
func (c *Cache) cached(ctx context.Context, ir imageRef, d v1.Descriptor) (bundle.Bundle, bool, error) {
	if err := c.hold(ctx, d.Digest.Hex); err != nil {
		return bundle.Bundle{}, false, err
	}
	m, err := c.readMeta(d.Digest.Hex)
	if isUntrusted(err) {
		return bundle.Bundle{}, false, err
	}
	if err != nil {
		return bundle.Bundle{}, false, nil
	}
	if c.s.sigPolicy != nil {
		if err := c.checkCachedSignatures(ctx, ir, d); err != nil {
			return bundle.Bundle{}, false, err
		}
	}
	if err := c.wasmAllowed(m); err != nil {
		return bundle.Bundle{}, false, err
	}
	now := time.Now()
	_ = os.Chtimes(c.metaPath(d.Digest.Hex), now, now) // last use, for prune's LRU order
	return c.bundleOf(ir, d.Digest, m), true, nil
}

func (c *Cache) bundleOf(ir imageRef, h v1.Hash, m *meta) bundle.Bundle {
	return bundle.Bundle{Ref: ir.named, Digest: h, Rootfs: c.path(rootfsDir, h.Hex, "rootfs"), Config: m.Image, Wasm: m.Wasm}
}

// ErrWasmNotAllowed is a wasm function image resolved without WithWasm.
var ErrWasmNotAllowed = errors.New("the image is a wasm function: wasm functions run only with --allow-alpha-wasm")

func (c *Cache) wasmAllowed(m *meta) error {
	if m.Wasm != "" && !c.s.wasm {
		p := m.Platform
		if p == "" {
			p = "js/wasm"
		}
		return fmt.Errorf("%w (%s)", ErrWasmNotAllowed, p)
	}
	return nil
}

// isWasmPlatform reports a platform whose images hold a wasm module.
func isWasmPlatform(p v1.Platform) bool {
	return p.Architecture == "wasm" && (p.OS == "js" || p.OS == "wasip1")
}

// platformOK reports whether an image of platform p may be resolved: the
// wanted platform, or a wasm one (whether wasm may run is wasmAllowed's).
func (c *Cache) platformOK(p v1.Platform) bool {
	return platformMatches(p, c.s.platform) || isWasmPlatform(p)
}

// pick chooses the entry of an index Resolve unpacks: with wasm allowed a
// js/wasm entry (then wasip1/wasm), as kpt picks under --allow-alpha-wasm;
// otherwise the wanted platform. An index whose only runnable entries are
// wasm ones fails with ErrWasmNotAllowed unless anyWasm (import, which
// stores and runs nothing).
func (c *Cache) pick(idx *v1.IndexManifest, anyWasm bool) (v1.Descriptor, error) {
	var wasmEntry *v1.Descriptor
	for _, want := range []v1.Platform{{OS: "js", Architecture: "wasm"}, {OS: "wasip1", Architecture: "wasm"}} {
		for i, d := range idx.Manifests {
			if wasmEntry == nil && d.Platform != nil && d.MediaType.IsImage() && d.Platform.OS == want.OS && d.Platform.Architecture == want.Architecture {
				wasmEntry = &idx.Manifests[i]
			}
		}
	}
	if wasmEntry != nil && c.s.wasm {
		return *wasmEntry, nil
	}
	d, err := pickPlatform(idx, c.s.platform)
	if err != nil && wasmEntry != nil {
		if anyWasm {
			return *wasmEntry, nil
		}
		return v1.Descriptor{}, fmt.Errorf("%w (%s)", ErrWasmNotAllowed, platformString(wasmEntry.Platform))
	}
	return d, err
}

// hold takes (once per Cache) a shared lock that prune must get exclusively
// before it may remove the image.
func (c *Cache) hold(ctx context.Context, hex string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.holds[hex]; ok {
		return nil
	}
	l, err := c.lock(ctx, "hold-"+hex+".lock", true)
	if err != nil {
		return err
	}
	c.holds[hex] = l
	return nil
}

// pull resolves ir at the registry (unless desc is given), fetches what is
// missing, unpacks and records the resolution. It holds the gc lock shared
// throughout, so prune never sees a half-recorded image.
func (c *Cache) pull(ctx context.Context, ir imageRef, desc *v1.Descriptor) (bundle.Bundle, error) {
	gl, err := c.lock(ctx, gcLock, true)
	if err != nil {
		return bundle.Bundle{}, err
	}
	defer unlock(gl)
	start := time.Now()
	if desc == nil {
		d, err := c.remoteManifest(ctx, ir)
		if err != nil {
			return bundle.Bundle{}, err
		}
		desc = &d
	}
	// The policy decides on the digest just resolved, before any layer is
	// fetched; that digest is the one unpacked and run.
	set, err := c.checkSignatures(ctx, ir, *desc)
	if err != nil {
		return bundle.Bundle{}, err
	}
	v, err, _ := c.sf.Do("unpack:"+desc.Digest.Hex, func() (any, error) {
		m, made, err := c.unpack(ctx, ir, *desc)
		return unpacked{m, made}, err
	})
	if err != nil {
		return bundle.Bundle{}, err
	}
	m, made := v.(unpacked).m, v.(unpacked).made
	if p, err := v1.ParsePlatform(m.Platform); m.Platform != "" && err == nil && !c.platformOK(*p) {
		return bundle.Bundle{}, fmt.Errorf("image is for %s, not %s", m.Platform, platformString(&c.s.platform))
	}
	if err := c.wasmAllowed(m); err != nil {
		return bundle.Bundle{}, err
	}
	if err := c.hold(ctx, desc.Digest.Hex); err != nil {
		return bundle.Bundle{}, err
	}
	if desc.MediaType == "" {
		desc.MediaType = types.MediaType(m.MediaType)
		if desc.MediaType == "" {
			desc.MediaType = types.OCIManifestSchema1
		}
	}
	if desc.Platform == nil && m.Platform != "" {
		// Single-platform images are recorded with their config's platform,
		// so --platform never picks up a cached image of another one.
		if p, err := v1.ParsePlatform(m.Platform); err == nil {
			desc.Platform = p
		}
	}
	if desc.Size == 0 {
		if st, err := os.Stat(c.blobPath(desc.Digest)); err == nil {
			desc.Size = st.Size()
		}
	}
	if set.Hex != "" {
		desc.Annotations = map[string]string{annSignatures: set.String()}
	}
	if err := c.record(ctx, ir.key, *desc); err != nil {
		return bundle.Bundle{}, fmt.Errorf("recording %s: %w", ir.key, err)
	}
	c.s.logger.Debug("image ready", "image", ir.named, "digest", desc.Digest.String(), "duration", time.Since(start))
	b := c.bundleOf(ir, desc.Digest, m)
	if made {
		b.Pulled = time.Since(start)
	}
	return b, nil
}

// unpacked is what one (single-flight) unpack returns: the marker, and
// whether this call fetched or extracted anything.
type unpacked struct {
	m    *meta
	made bool
}

// remoteManifest fetches ir's manifest (through mirrors), descends an index
// to the wanted platform, and commits the platform manifest blob.
func (c *Cache) remoteManifest(ctx context.Context, ir imageRef) (v1.Descriptor, error) {
	rd, err := c.puller.Get(ctx, ir.target)
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("fetching manifest: %w", err)
	}
	switch {
	case rd.MediaType.IsIndex():
		idx, err := v1.ParseIndexManifest(strings.NewReader(string(rd.Manifest)))
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("parsing index: %w", err)
		}
		child, err := c.pick(idx, false)
		if err != nil {
			return v1.Descriptor{}, err
		}
		if child.Size > maxManifestBytes {
			return v1.Descriptor{}, &registryError{host: ir.target.Context().RegistryStr(), msg: fmt.Sprintf("index entry %s declares a %d byte manifest, over the %s limit", child.Digest, child.Size, sizeString(maxManifestBytes))}
		}
		md, err := c.puller.Get(ctx, ir.target.Context().Digest(child.Digest.String()))
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("fetching %s manifest: %w", child.Platform, err)
		}
		if err := c.commitBytes(md.Manifest, child.Digest); err != nil {
			return v1.Descriptor{}, err
		}
		out := v1.Descriptor{MediaType: child.MediaType, Size: child.Size, Digest: child.Digest, Platform: child.Platform}
		return out, nil
	case rd.MediaType.IsImage():
		if err := c.commitBytes(rd.Manifest, rd.Digest); err != nil {
			return v1.Descriptor{}, err
		}
		return v1.Descriptor{MediaType: rd.MediaType, Size: rd.Size, Digest: rd.Digest}, nil
	}
	return v1.Descriptor{}, fmt.Errorf("unsupported manifest type %q", rd.MediaType)
}

func isAttestation(d v1.Descriptor) bool {
	if d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" {
		return true
	}
	return d.Platform != nil && (d.Platform.OS == "unknown" || d.Platform.Architecture == "unknown")
}

func platformMatches(have, want v1.Platform) bool {
	if have.OS != want.OS || have.Architecture != want.Architecture {
		return false
	}
	hv, wv := have.Variant, want.Variant
	if want.Architecture == "arm64" {
		hv, wv = strings.TrimPrefix(hv, "v8"), strings.TrimPrefix(wv, "v8")
	}
	return hv == "" || wv == "" || hv == wv
}

func platformString(p *v1.Platform) string {
	if p == nil {
		return "unknown platform"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// pickPlatform chooses want's entry of an index, never an attestation; a
// variant-exact match wins over a variant-less one.
func pickPlatform(idx *v1.IndexManifest, want v1.Platform) (v1.Descriptor, error) {
	var avail []string
	var best *v1.Descriptor
	for i, d := range idx.Manifests {
		if isAttestation(d) || d.Platform == nil || !d.MediaType.IsImage() {
			continue
		}
		avail = append(avail, platformString(d.Platform))
		if platformMatches(*d.Platform, want) && (best == nil || d.Platform.Variant == want.Variant) {
			best = &idx.Manifests[i]
		}
	}
	if best == nil {
		has := "no runnable platforms"
		if len(avail) > 0 {
			has = strings.Join(avail, ", ")
		}
		return v1.Descriptor{}, fmt.Errorf("no image for %s (the image has %s)", platformString(&want), has)
	}
	return *best, nil
}

// unpack makes sure manifest desc is extracted under rootfs/<hex>, fetching
// missing blobs from ir's repository. One process extracts; others wait on the
// unpack lock and then find the committed rootfs.
func (c *Cache) unpack(ctx context.Context, ir imageRef, desc v1.Descriptor) (_ *meta, made bool, err error) {
	hex := desc.Digest.Hex
	if err := c.hold(ctx, hex); err != nil {
		return nil, false, err
	}
	if m, err := c.readMeta(hex); err == nil || isUntrusted(err) {
		return m, false, err
	}
	ul, err := c.lock(ctx, "unpack-"+hex+".lock", false)
	if err != nil {
		return nil, false, err
	}
	defer unlock(ul)
	if m, err := c.readMeta(hex); err == nil || isUntrusted(err) {
		return m, false, err
	}
	// A directory without a readable meta.json is debris (never committed
	// that way by this code); move it aside.
	if _, err := os.Lstat(c.path(rootfsDir, hex)); err == nil {
		if err := os.Rename(c.path(rootfsDir, hex), c.tempPath("debris")); err != nil {
			return nil, false, err
		}
	}
	repo := ir.target.Context()
	if err := c.ensureManifest(ctx, repo, desc.Digest); err != nil {
		return nil, false, fmt.Errorf("manifest: %w", err)
	}
	mb, err := c.readBlob(desc.Digest, maxManifestBytes)
	if err != nil {
		return nil, false, err
	}
	mf, err := v1.ParseManifest(strings.NewReader(string(mb)))
	if err != nil {
		return nil, false, fmt.Errorf("parsing manifest %s: %w", desc.Digest, err)
	}
	if mf.Config.Digest.Hex == "" {
		return nil, false, fmt.Errorf("manifest %s has no config (an index or unsupported type)", desc.Digest)
	}
	if err := c.checkDeclared(repo.RegistryStr(), desc.Digest, mf); err != nil {
		return nil, false, err
	}
	if err := c.ensureBlob(ctx, repo, mf.Config.Digest, mf.Config.Size, nil); err != nil {
		return nil, false, fmt.Errorf("config: %w", err)
	}
	cb, err := c.readBlob(mf.Config.Digest, maxConfigBytes)
	if err != nil {
		return nil, false, err
	}
	cf, err := v1.ParseConfigFile(strings.NewReader(string(cb)))
	if err != nil {
		return nil, false, fmt.Errorf("parsing image config: %w", err)
	}
	want := c.s.platform
	if cf.OS != "" && cf.Architecture != "" && !c.platformOK(v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}) {
		return nil, false, fmt.Errorf("image is for %s/%s, not %s", cf.OS, cf.Architecture, platformString(&want))
	}
	if len(cf.RootFS.DiffIDs) != 0 && len(cf.RootFS.DiffIDs) != len(mf.Layers) {
		return nil, false, fmt.Errorf("image config lists %d layers, the manifest %d", len(cf.RootFS.DiffIDs), len(mf.Layers))
	}
	for _, l := range mf.Layers {
		if !l.MediaType.IsDistributable() {
			return nil, false, fmt.Errorf("layer %s is non-distributable (%s)", l.Digest, l.MediaType)
		}
	}

	// Download every missing layer in parallel; extract in order as each
	// arrives.
	var pp PullProgress
	if c.s.progress != nil {
		info := PullInfo{Image: ir.named, Layers: len(mf.Layers)}
		for _, l := range mf.Layers {
			if !c.hasBlob(l.Digest) {
				info.Fetch++
				info.Bytes += l.Size
			}
		}
		if info.Fetch > 0 {
			pp = c.s.progress.Pull(info)
			defer func() { pp.Done(err) }()
		}
	}
	track := func(i int) func(int64) LayerProgress {
		if pp == nil {
			return nil
		}
		return func(resumed int64) LayerProgress {
			return pp.Layer(i+1, mf.Layers[i].Digest, mf.Layers[i].Size, resumed)
		}
	}
	ready := make([]chan error, len(mf.Layers))
	for i := range ready {
		ready[i] = make(chan error, 1)
	}
	gctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	next := make(chan int, len(mf.Layers))
	for i := range mf.Layers {
		next <- i
	}
	close(next)
	for w := 0; w < c.s.jobs && w < len(mf.Layers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if gctx.Err() != nil {
					ready[i] <- gctx.Err()
					continue
				}
				ready[i] <- c.ensureBlob(gctx, repo, mf.Layers[i].Digest, mf.Layers[i].Size, track(i))
			}
		}()
	}
	c.sweepTmp()
	work := c.tempPath("unpack")
	root := filepath.Join(work, "rootfs")
	committed := false
	defer func() {
		if !committed {
			removeTree(work)
		}
	}()
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, false, err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, false, err
	}
	u := newUnpacker(root, c.s.limits)
	var layers []string
	for i, l := range mf.Layers {
		if err := <-ready[i]; err != nil {
			return nil, false, fmt.Errorf("layer %d: %w", i+1, err)
		}
		diffID := ""
		if len(cf.RootFS.DiffIDs) > i {
			diffID = cf.RootFS.DiffIDs[i].String()
		}
		f, err := openChecked(c.blobPath(l.Digest))
		if err != nil {
			return nil, false, err
		}
		err = u.apply(f, diffID)
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("layer %d (%s): %w", i+1, l.Digest, err)
		}
		layers = append(layers, l.Digest.String())
	}
	if err := u.finish(); err != nil {
		return nil, false, err
	}
	if err := ensureMountpoints(root); err != nil {
		return nil, false, err
	}
	ts, err := treeHash(root, u.sums)
	if err != nil {
		return nil, false, err
	}
	m := &meta{Manifest: desc.Digest.String(), MediaType: string(mf.MediaType), Config: mf.Config.Digest.String(), Layers: layers,
		Image: cf.Config, Files: ts.files, Bytes: ts.size, Tree: ts.hash, Unpacked: time.Now().UTC(), Format: treeFormat}
	if cf.OS != "" {
		m.Platform = platformString(&v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant})
	}
	if m.Wasm, err = wasmModule(root, desc.Platform, cf); err != nil {
		return nil, false, err
	}
	if m.Wasm != "" && m.Platform == "" {
		m.Platform = "js/wasm" // kpt's format: the index names it, the config does not
		if desc.Platform != nil {
			m.Platform = platformString(desc.Platform)
		}
	}
	mb, err = json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, false, err
	}
	if err := writeSynced(filepath.Join(work, "meta.json"), mb); err != nil {
		return nil, false, err
	}
	if err := os.Rename(work, c.path(rootfsDir, hex)); err != nil {
		return nil, false, fmt.Errorf("committing rootfs: %w", err)
	}
	committed = true
	if u.skipped > 0 {
		c.s.logger.Debug("skipped device nodes and fifos", "image", ir.named, "count", u.skipped)
	}
	return m, true, nil
}

// wasmModule finds the module of a wasm function image: the one regular
// `.wasm` file at the top of its root filesystem. An image is a wasm function
// when its index entry or its config names a wasm platform, or when it has
// kpt's wasm format without saying so (`kpt alpha wasm push` writes no
// platform in the config: a digest reference to it reaches no index): no
// platform, no entrypoint and no command in its config, one .wasm file.
func wasmModule(root string, entry *v1.Platform, cf *v1.ConfigFile) (string, error) {
	declared := entry != nil && isWasmPlatform(*entry) || isWasmPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture})
	kptFormat := cf.OS == "" && len(cf.Config.Entrypoint) == 0 && len(cf.Config.Cmd) == 0
	if !declared && !kptFormat {
		return "", nil
	}
	des, err := os.ReadDir(root)
	if err != nil {
		return "", err
	}
	var mods []string
	for _, de := range des {
		if de.Type().IsRegular() && strings.HasSuffix(de.Name(), ".wasm") {
			mods = append(mods, de.Name())
		}
	}
	switch {
	case len(mods) == 1:
		return mods[0], nil
	case declared:
		return "", fmt.Errorf("wasm image holds %d .wasm files at its top, not one", len(mods))
	}
	return "", nil
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ensureManifest fetches a manifest blob by digest (registries serve
// manifests from the manifests endpoint, not the blobs one).
func (c *Cache) ensureManifest(ctx context.Context, repo name.Repository, h v1.Hash) error {
	if c.hasBlob(h) {
		return nil
	}
	if c.s.offline {
		return fmt.Errorf("%w (offline)", ErrNotCached)
	}
	md, err := c.puller.Get(ctx, repo.Digest(h.String()))
	if err != nil {
		return err
	}
	return c.commitBytes(md.Manifest, h)
}
