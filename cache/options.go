package cache

import (
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/signature"
)

// PullPolicy says when Resolve may contact a registry, with kpt's names.
type PullPolicy string

const (
	// PullAlways resolves the tag at the registry on every call; blobs and
	// rootfs already cached are reused when the digest did not change.
	PullAlways PullPolicy = "Always"
	// PullIfNotPresent (the default) uses the cached resolution of a
	// reference when there is one and pulls otherwise.
	PullIfNotPresent PullPolicy = "IfNotPresent"
	// PullNever uses only what is cached; a miss is an error.
	PullNever PullPolicy = "Never"
)

// ParsePullPolicy accepts kpt's spellings (case-insensitive).
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch strings.ToLower(s) {
	case "always":
		return PullAlways, nil
	case "ifnotpresent", "":
		return PullIfNotPresent, nil
	case "never":
		return PullNever, nil
	}
	return "", fmt.Errorf("unknown image pull policy %q (want Always, IfNotPresent or Never)", s)
}

// Limits bound what extracting one image may write, and so what pulling it
// may download: an image whose layers declare more than MaxBytes in all is
// refused before any of them is fetched.
type Limits struct {
	// MaxBytes is the largest total of uncompressed layer bytes, and of
	// declared (compressed) layer sizes (0: default 4 GiB).
	MaxBytes int64
	// MaxFiles is the largest number of tar entries over all layers (0: default 1,000,000).
	MaxFiles int
}

// Progress receives download progress, one pull of one image at a time per
// Resolve. Implementations must be safe for concurrent use (layers download
// in parallel, and several Resolves may run at once).
type Progress interface {
	// Pull announces that an image needs blobs from its registry.
	Pull(PullInfo) PullProgress
}

// PullInfo describes what one pull of an image downloads.
type PullInfo struct {
	Image  string // the reference as the caller named it
	Layers int    // layers of the image
	Fetch  int    // how many of them are not in the cache
	Bytes  int64  // their declared size in bytes
}

// PullProgress tracks one pull.
type PullProgress interface {
	// Layer announces the download of layer i (1-based) of the image, of
	// size bytes, resuming after the resumed bytes an interrupted download
	// left (0 for a fresh start).
	Layer(i int, digest v1.Hash, size, resumed int64) LayerProgress
	// Done ends the pull, with the error that ended it or nil.
	Done(err error)
}

// LayerProgress tracks one layer download.
type LayerProgress interface {
	Add(n int)
	Done(err error)
}

// Option configures a Cache.
type Option func(*settings)

type settings struct {
	mirrors   []imageref.Mirror
	insecure  map[string]bool
	policy    PullPolicy
	offline   bool
	prefix    string
	keychain  authn.Keychain
	platform  v1.Platform
	limits    Limits
	logger    *slog.Logger
	progress  Progress
	timeout   time.Duration
	jobs      int
	userAgent string
	sigPolicy *signature.Policy
	wasm      bool
}

func defaultSettings() settings {
	return settings{
		insecure:  map[string]bool{},
		policy:    PullIfNotPresent,
		prefix:    imageref.DefaultPrefix,
		keychain:  authn.DefaultKeychain,
		platform:  HostPlatform(),
		limits:    Limits{MaxBytes: 4 << 30, MaxFiles: 1_000_000},
		logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		timeout:   30 * time.Second,
		jobs:      4,
		userAgent: "kptr",
	}
}

// HostPlatform is the platform images are picked for by default.
func HostPlatform() v1.Platform {
	p := v1.Platform{OS: goruntime.GOOS, Architecture: goruntime.GOARCH}
	switch goruntime.GOARCH {
	case "arm64":
		p.Variant = "v8"
	case "arm":
		p.Variant = "v7"
	}
	return p
}

// WithMirrors adds reference rewrites; the longest matching From wins.
func WithMirrors(m ...imageref.Mirror) Option {
	return func(s *settings) { s.mirrors = append(s.mirrors, m...) }
}

// WithInsecureRegistries lists registry hosts ("host:port") that may be
// reached over plain HTTP. Loopback registries always may; nothing else may.
func WithInsecureRegistries(hosts ...string) Option {
	return func(s *settings) {
		for _, h := range hosts {
			s.insecure[strings.TrimSpace(h)] = true
		}
	}
}

// WithPullPolicy sets the pull policy (default IfNotPresent).
func WithPullPolicy(p PullPolicy) Option { return func(s *settings) { s.policy = p } }

// WithOffline forbids all network access: only cached images resolve.
func WithOffline(offline bool) Option { return func(s *settings) { s.offline = offline } }

// WithImagePrefix sets the prefix for names without a '/' (see
// imageref.ApplyPrefix); empty keeps imageref.DefaultPrefix, imageref.NoPrefix means
// none.
func WithImagePrefix(prefix string) Option {
	return func(s *settings) {
		if prefix != "" {
			s.prefix = prefix
		}
	}
}

// WithKeychain sets where registry credentials come from (default
// authn.DefaultKeychain: docker config.json and credential helpers).
func WithKeychain(k authn.Keychain) Option { return func(s *settings) { s.keychain = k } }

// WithWasm lets Resolve return wasm functions (kpt's --allow-alpha-wasm):
// from an index that has a js/wasm or wasip1/wasm entry that entry is
// picked, as kpt picks it under that flag; an image whose config names a wasm
// platform, or that is kpt's wasm format (one .wasm file, no platform and no
// entrypoint in its config), resolves to a Bundle with Wasm set. Without it
// such images fail with ErrWasmNotAllowed. Import stores wasm images either
// way (storing runs nothing).
func WithWasm(allow bool) Option { return func(s *settings) { s.wasm = allow } }

// WithPlatform picks another platform than the host's from multi-arch images.
func WithPlatform(p v1.Platform) Option { return func(s *settings) { s.platform = p } }

// WithLimits bounds extraction; zero fields keep their defaults.
func WithLimits(l Limits) Option {
	return func(s *settings) {
		if l.MaxBytes > 0 {
			s.limits.MaxBytes = l.MaxBytes
		}
		if l.MaxFiles > 0 {
			s.limits.MaxFiles = l.MaxFiles
		}
	}
}

// WithLogger sets the structured logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l != nil {
			s.logger = l
		}
	}
}

// WithProgress reports per-layer download progress.
func WithProgress(p Progress) Option { return func(s *settings) { s.progress = p } }

// WithTimeout bounds every registry request (default 30s): connecting, the
// TLS handshake, waiting for response headers, and reading the body, which
// must deliver at least 1 KiB per period of d (an idle-read timeout, per
// read, not per blob: a large layer on a slow link still downloads). A
// registry that stalls or trickles fails after about d with an error naming
// it.
func WithTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithJobs sets how many blobs of one image download in parallel (default 4).
func WithJobs(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.jobs = n
		}
	}
}
