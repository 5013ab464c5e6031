package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kptr-dev/kptr/signature"
)

// Signatures (with WithSignaturePolicy). Between "resolved digest" and
// "verified blobs" the policy decides: Resolve fetches the image's
// signatures where cosign puts them (the sha256-<hex>.sig tag of the
// repository actually pulled from, mirror included, and the OCI 1.1
// referrers of the digest), stores them as blobs, and evaluates the policy
// for the logical name (the one the caller gave, before mirrors) and that
// digest, before any layer is downloaded. What it stored is a signature set:
// an OCI index blob (artifactType annSigsetType) whose subject is the image
// manifest and whose entries are the signature manifests, each with its
// layers (payloads, bundles) as blobs. The image's index.json entry points
// at it (annSignatures), so prune keeps it as long as the image, and export
// and import carry it. Offline, or under pull policy Never, the stored set
// is all there is, verified again. An allowed verdict is remembered per
// (policy hash, name, digest, signature set) under verdicts/, so a warm
// Resolve does not verify again; a refusal is never remembered.
const (
	annSignatures  = "dev.kptr.signatures"
	annSigSource   = "dev.kptr.signature-source" // "tag" or "referrer"
	sigsetType     = "application/vnd.dev.kptr.signatures.v1+json"
	simpleSigning  = "application/vnd.dev.cosign.simplesigning.v1+json"
	bundleV03      = "application/vnd.dev.sigstore.bundle.v0.3+json"
	ociEmpty       = "application/vnd.oci.empty.v1+json"
	annCosignSig   = "dev.cosignproject.cosign/signature"
	annCosignCert  = "dev.sigstore.cosign/certificate"
	annCosignChain = "dev.sigstore.cosign/chain"
	annCosignRekor = "dev.sigstore.cosign/bundle"

	// What signatures of one image may cost (a hostile registry may
	// declare anything): signature layers read from the .sig manifest,
	// referrers considered, and the size of one payload or bundle.
	maxSignatureLayers = 64
	maxReferrers       = 64
	maxSignatureBlob   = 1 << 20
)

// ExitSignature is the exit code of a signature policy refusal (README's
// table).
const ExitSignature = 4

// WithSignaturePolicy makes Resolve run an image only if p allows its
// digest (nil: no policy, no signature is looked at).
func WithSignaturePolicy(p *signature.Policy) Option {
	return func(s *settings) { s.sigPolicy = p }
}

// artifactType is an OCI manifest's artifact type: its artifactType, else
// its config's media type ("" when raw is no manifest).
func artifactType(raw []byte) string {
	mf, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return ""
	}
	if mf.ArtifactType != "" {
		return mf.ArtifactType
	}
	return string(mf.Config.MediaType)
}

// isBundleType reports whether an artifact or media type names a sigstore
// bundle v0.3 (cosign writes both spellings).
func isBundleType(t string) bool {
	return t == bundleV03 || t == "application/vnd.dev.sigstore.bundle+json;version=0.3"
}

// checkSignatures applies the signature policy to ir at desc's digest. It
// returns the signature set recorded for the image (zero when none was
// needed), fetching one when it is missing and the network may be used, or
// when the stored one is refused and this Resolve may look again.
func (c *Cache) checkSignatures(ctx context.Context, ir imageRef, desc v1.Descriptor) (v1.Hash, error) {
	p := c.s.sigPolicy
	if p == nil {
		return v1.Hash{}, nil
	}
	digest := desc.Digest.String()
	_, needs, err := p.Match(ir.named)
	if err != nil {
		return v1.Hash{}, usageErr(ir.named, err)
	}
	if !needs {
		if d := p.Evaluate(ir.named, digest, nil); !d.Allowed {
			return v1.Hash{}, refusal(d)
		}
		return v1.Hash{}, nil
	}
	set, have := c.sigsetFor(ir.key, desc.Digest)
	if c.s.policy == PullAlways && !c.s.offline {
		have = false // Always: the registry's signatures of now, as its tag
	}
	var d signature.Decision
	if have {
		if c.hasVerdict(p, ir, desc.Digest, set) {
			return set, nil
		}
		sigs, err := c.readSigset(set)
		if err != nil {
			return v1.Hash{}, err
		}
		if d = p.Evaluate(ir.named, digest, sigs); d.Allowed {
			c.rememberVerdict(p, ir, desc.Digest, set)
			return set, nil
		}
	}
	if c.s.offline || c.s.policy == PullNever {
		if !have {
			d = p.Evaluate(ir.named, digest, nil)
			d.Reason = "no signature in the cache (it was pulled without a signature policy; pull it again online, e.g. kptr cache pull --signature-policy)"
		}
		return v1.Hash{}, refusal(d)
	}
	set, err = c.fetchSignatures(ctx, ir, desc)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("fetching signatures: %w", err)
	}
	sigs, err := c.readSigset(set)
	if err != nil {
		return v1.Hash{}, err
	}
	if d = p.Evaluate(ir.named, digest, sigs); !d.Allowed {
		// The resolution is recorded with its signatures all the same (no
		// layer was fetched): offline, the cache gives the same refusal.
		rd := desc
		if rd.MediaType == "" {
			rd.MediaType = types.OCIManifestSchema1
		}
		rd.Annotations = map[string]string{annSignatures: set.String()}
		if c.hasBlob(rd.Digest) {
			_ = c.record(ctx, ir.key, rd)
		}
		return v1.Hash{}, refusal(d)
	}
	c.rememberVerdict(p, ir, desc.Digest, set)
	return set, nil
}

// refusal is a policy refusal as a cache Error (exit ExitSignature), or
// signatures that could not be checked at all (exit 3); its message already
// names the image and digest.
func refusal(d signature.Decision) error {
	if d.Unverified != nil {
		return &Error{Err: d.Unverified}
	}
	return &Error{Err: d, code: ExitSignature}
}

// RefusedBySignaturePolicy reports whether err is a signature policy refusal.
func RefusedBySignaturePolicy(err error) bool {
	var d signature.Decision
	return errors.As(err, &d)
}

// sigsetFor finds the signature set recorded for key at digest, or for
// another name of the same digest.
func (c *Cache) sigsetFor(key string, digest v1.Hash) (v1.Hash, bool) {
	idx, err := c.readIndex()
	if err != nil {
		return v1.Hash{}, false
	}
	var other string
	for _, d := range idx.Manifests {
		s := d.Annotations[annSignatures]
		if d.Digest != digest || s == "" {
			continue
		}
		if d.Annotations[annRefName] == key {
			other = s
			break
		}
		if other == "" {
			other = s
		}
	}
	if other == "" {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(other)
	if err != nil || !c.hasBlob(h) {
		return v1.Hash{}, false
	}
	return h, true
}

// annotateSignatures points key's entry at digest to set.
func (c *Cache) annotateSignatures(ctx context.Context, key string, digest, set v1.Hash) error {
	return c.updateIndex(ctx, func(idx *v1.IndexManifest) bool {
		changed := false
		for i, d := range idx.Manifests {
			if d.Annotations[annRefName] == key && d.Digest == digest && d.Annotations[annSignatures] != set.String() {
				if d.Annotations == nil {
					idx.Manifests[i].Annotations = map[string]string{}
				}
				idx.Manifests[i].Annotations[annSignatures] = set.String()
				changed = true
			}
		}
		return changed
	})
}

// sigset is the stored signature set: an OCI image index.
type sigset struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     types.MediaType `json:"mediaType"`
	ArtifactType  string          `json:"artifactType"`
	Subject       v1.Descriptor   `json:"subject"`
	Manifests     []v1.Descriptor `json:"manifests"`
}

// fetchSignatures fetches desc's signatures from ir's repository (after
// mirrors) and stores them as a signature set, returned. Everything read is
// bounded: the .sig manifest by the manifest cap and maxSignatureLayers, the
// referrers list by the response cap and maxReferrers, every payload or
// bundle by maxSignatureBlob and its declared size.
func (c *Cache) fetchSignatures(ctx context.Context, ir imageRef, desc v1.Descriptor) (v1.Hash, error) {
	repo := ir.target.Context()
	host := repo.RegistryStr()
	set := sigset{SchemaVersion: 2, MediaType: types.OCIImageIndex, ArtifactType: sigsetType,
		Subject: v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}}
	if set.Subject.MediaType == "" {
		set.Subject.MediaType = types.OCIManifestSchema1
	}

	// cosign's tag scheme
	tag := repo.Tag(desc.Digest.Algorithm + "-" + desc.Digest.Hex + ".sig")
	rd, err := c.puller.Get(ctx, tag)
	switch {
	case isNotFound(err):
	case err != nil:
		return v1.Hash{}, fmt.Errorf("%s: %w", tag.TagStr(), err)
	default:
		d, err := c.storeSignatureManifest(ctx, repo, rd.Manifest, rd.Digest, rd.MediaType, func(l v1.Descriptor) bool { return l.MediaType == simpleSigning })
		if err != nil {
			return v1.Hash{}, &registryError{host: host, msg: tag.TagStr() + ": " + err.Error()}
		}
		d.Annotations = map[string]string{annSigSource: "tag"}
		set.Manifests = append(set.Manifests, d)
	}

	// OCI 1.1 referrers (the API, or its tag fallback on registries without it)
	ri, err := remote.Referrers(repo.Digest(desc.Digest.String()), c.remoteOptions(ctx)...)
	if err != nil && !isNotFound(err) {
		return v1.Hash{}, fmt.Errorf("referrers of %s: %w", desc.Digest, err)
	}
	if err == nil {
		im, err := ri.IndexManifest()
		if err != nil {
			return v1.Hash{}, &registryError{host: host, msg: fmt.Sprintf("referrers of %s: %v", desc.Digest, err)}
		}
		n := 0
		for _, m := range im.Manifests {
			// cosign (v2.6.5, --new-bundle-format) lists its bundle in the
			// referrers tag fallback under its config's media type, the
			// OCI empty type, not the manifest's artifactType: such an
			// entry (or one with none) is read, and kept if the manifest
			// itself names a bundle
			unsure := m.ArtifactType == "" || m.ArtifactType == ociEmpty
			if !isBundleType(m.ArtifactType) && !unsure {
				continue
			}
			if n++; n > maxReferrers {
				c.s.logger.Warn("more sigstore bundles than kptr reads; the rest are ignored", "image", ir.named, "limit", maxReferrers)
				break
			}
			if m.Size <= 0 || m.Size > maxManifestBytes {
				return v1.Hash{}, &registryError{host: host, msg: fmt.Sprintf("referrer %s declares a %d byte manifest, over the %s limit", m.Digest, m.Size, sizeString(maxManifestBytes))}
			}
			md, err := c.puller.Get(ctx, repo.Digest(m.Digest.String()))
			if err != nil {
				return v1.Hash{}, fmt.Errorf("referrer %s: %w", m.Digest, err)
			}
			if md.Digest != m.Digest {
				return v1.Hash{}, &registryError{host: host, msg: fmt.Sprintf("referrer %s: the registry sent %s", m.Digest, md.Digest)}
			}
			at := m.ArtifactType
			if unsure {
				if at = artifactType(md.Manifest); !isBundleType(at) {
					continue
				}
			}
			d, err := c.storeSignatureManifest(ctx, repo, md.Manifest, md.Digest, md.MediaType, func(l v1.Descriptor) bool { return isBundleType(string(l.MediaType)) })
			if err != nil {
				return v1.Hash{}, &registryError{host: host, msg: fmt.Sprintf("referrer %s: %v", m.Digest, err)}
			}
			d.ArtifactType = at
			d.Annotations = map[string]string{annSigSource: "referrer"}
			set.Manifests = append(set.Manifests, d)
		}
	}
	b, err := json.Marshal(set)
	if err != nil {
		return v1.Hash{}, err
	}
	h := sha(b)
	if err := c.commitBytes(b, h); err != nil {
		return v1.Hash{}, err
	}
	return h, nil
}

// storeSignatureManifest checks a signature manifest's declared sizes and
// counts, then stores it and the layers keep selects.
func (c *Cache) storeSignatureManifest(ctx context.Context, repo name.Repository, raw []byte, h v1.Hash, mt types.MediaType, keep func(v1.Descriptor) bool) (v1.Descriptor, error) {
	mf, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("parsing signature manifest: %w", err)
	}
	if len(mf.Layers) > maxSignatureLayers {
		return v1.Descriptor{}, fmt.Errorf("signature manifest lists %d layers, over kptr's limit of %d", len(mf.Layers), maxSignatureLayers)
	}
	for _, l := range mf.Layers {
		if !keep(l) {
			continue
		}
		if l.Size <= 0 || l.Size > maxSignatureBlob {
			return v1.Descriptor{}, fmt.Errorf("signature layer %s declares %d bytes, over the %s limit", l.Digest, l.Size, sizeString(maxSignatureBlob))
		}
		if err := c.ensureBlob(ctx, repo, l.Digest, l.Size, nil); err != nil {
			return v1.Descriptor{}, fmt.Errorf("signature layer %s: %w", l.Digest, err)
		}
	}
	if err := c.commitBytes(raw, h); err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Digest: h, Size: int64(len(raw))}, nil
}

func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusNotFound || hasCode(te, transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode))
}

func hasCode(te *transport.Error, codes ...transport.ErrorCode) bool {
	for _, d := range te.Errors {
		for _, c := range codes {
			if d.Code == c {
				return true
			}
		}
	}
	return false
}

// readBlob reads a stored blob of at most max bytes.
func (c *Cache) readBlob(h v1.Hash, max int64) ([]byte, error) {
	f, err := openChecked(c.blobPath(h))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("blob %s is larger than %s", h, sizeString(max))
	}
	return b, nil
}

// readSigset reads a stored signature set into the signatures it holds. The
// blobs were checked against their digests when stored.
func (c *Cache) readSigset(h v1.Hash) ([]signature.Signature, error) {
	set, err := c.loadSigset(h)
	if err != nil {
		return nil, err
	}
	var out []signature.Signature
	for _, m := range set.Manifests {
		raw, err := c.readBlob(m.Digest, maxManifestBytes)
		if err != nil {
			return nil, fmt.Errorf("signature manifest %s: %w", m.Digest, err)
		}
		mf, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("signature manifest %s: %w", m.Digest, err)
		}
		for i, l := range mf.Layers {
			if i >= maxSignatureLayers {
				break
			}
			switch {
			case l.MediaType == simpleSigning && m.Annotations[annSigSource] == "tag":
				payload, err := c.readBlob(l.Digest, maxSignatureBlob)
				if err != nil {
					return nil, fmt.Errorf("signature payload %s: %w", l.Digest, err)
				}
				sig, _ := base64.StdEncoding.DecodeString(l.Annotations[annCosignSig])
				out = append(out, signature.Signature{Payload: payload, Sig: sig,
					Certificate: []byte(l.Annotations[annCosignCert]), Chain: []byte(l.Annotations[annCosignChain]),
					RekorBundle: []byte(l.Annotations[annCosignRekor])})
			case isBundleType(string(l.MediaType)) && m.Annotations[annSigSource] == "referrer":
				b, err := c.readBlob(l.Digest, maxSignatureBlob)
				if err != nil {
					return nil, fmt.Errorf("signature bundle %s: %w", l.Digest, err)
				}
				out = append(out, signature.Signature{Bundle: b})
			}
		}
	}
	return out, nil
}

func (c *Cache) loadSigset(h v1.Hash) (*sigset, error) {
	b, err := c.readBlob(h, maxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("signature set %s: %w", h, err)
	}
	var set sigset
	if err := json.Unmarshal(b, &set); err != nil || set.ArtifactType != sigsetType {
		return nil, fmt.Errorf("signature set %s: not a kptr signature set", h)
	}
	return &set, nil
}

// sigsetBlobs lists a signature set's blobs (itself first), for prune,
// export and import; a missing or unreadable part ends the list.
func (c *Cache) sigsetBlobs(h v1.Hash, read func(v1.Hash) ([]byte, error)) []v1.Hash {
	out := []v1.Hash{h}
	b, err := read(h)
	if err != nil {
		return out
	}
	var set sigset
	if json.Unmarshal(b, &set) != nil || set.ArtifactType != sigsetType {
		return out
	}
	for _, m := range set.Manifests {
		out = append(out, m.Digest)
		raw, err := read(m.Digest)
		if err != nil {
			continue
		}
		mf, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			continue
		}
		for i, l := range mf.Layers {
			if i >= maxSignatureLayers {
				break
			}
			if l.MediaType == simpleSigning || isBundleType(string(l.MediaType)) {
				out = append(out, l.Digest)
			}
		}
	}
	return out
}

func (c *Cache) readStored(h v1.Hash) ([]byte, error) { return c.readBlob(h, maxManifestBytes) }

// signatureCount is how many signatures the cache holds for an image
// digest (over its names), for cache ls; -1 when none were ever fetched.
func (c *Cache) signatureCount(digest v1.Hash) int {
	set, ok := c.sigsetFor("", digest)
	if !ok {
		return -1
	}
	sigs, err := c.readSigset(set)
	if err != nil {
		return -1
	}
	return len(sigs)
}

// Verdicts: an allowed decision is remembered as an empty file named by
// SHA-256 over the policy hash, the logical name, the digest and the
// signature set. The file's presence is the verdict, so it counts only
// where nobody but the cache's owner (or root) can have made it: verdicts/
// is checked with the rest of the layout when the cache opens, and the file
// itself by the same rule before it counts (owner.go). A file that fails
// the rule is no verdict: the policy decides again, and the file is
// replaced by one of the current user's. Prune clears them.
func (c *Cache) verdictPath(p *signature.Policy, ir imageRef, digest, set v1.Hash) string {
	h := sha256.New()
	for _, s := range []string{"kptr verdict v1", p.Hash, ir.named, digest.String(), set.String()} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return c.path(verdictsDir, hex.EncodeToString(h.Sum(nil)))
}

func (c *Cache) hasVerdict(p *signature.Policy, ir imageRef, digest, set v1.Hash) bool {
	return checkEntry(c.verdictPath(p, ir, digest, set), false) == nil
}

func (c *Cache) rememberVerdict(p *signature.Policy, ir imageRef, digest, set v1.Hash) {
	if c.readOnly {
		return
	}
	path := c.verdictPath(p, ir, digest, set)
	if err := os.MkdirAll(c.path(verdictsDir), 0o755); err != nil {
		return
	}
	_ = os.Remove(path) // a file here failed hasVerdict's check: not ours to keep
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
		f.Close()
	}
}

// clearVerdicts removes every remembered verdict (prune: they are cheap to
// make again, and this bounds their number).
func (c *Cache) clearVerdicts() {
	ents, _ := os.ReadDir(c.path(verdictsDir))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			os.Remove(c.path(verdictsDir, e.Name()))
		}
	}
}

// checkCachedSignatures applies the policy to an image Resolve found cached,
// under the gc lock (a fetched signature set is unreferenced until recorded).
func (c *Cache) checkCachedSignatures(ctx context.Context, ir imageRef, d v1.Descriptor) error {
	// The warm path: d is key's index entry, already read; the verdict is
	// one stat (a verdict names the set it was reached on).
	if set, err := v1.NewHash(d.Annotations[annSignatures]); err == nil && d.Annotations[annRefName] == ir.key &&
		!(c.s.policy == PullAlways && !c.s.offline) && c.hasVerdict(c.s.sigPolicy, ir, d.Digest, set) {
		return nil
	}
	gl, err := c.lock(ctx, gcLock, true)
	if err != nil {
		return err
	}
	defer unlock(gl)
	set, err := c.checkSignatures(ctx, ir, d)
	if err != nil || set.Hex == "" {
		return err
	}
	if cur, ok := c.sigsetFor(ir.key, d.Digest); !ok || cur != set {
		if _, _, recorded := c.lookup(ir.key, c.s.platform); recorded {
			return c.annotateSignatures(ctx, ir.key, d.Digest, set)
		}
		if d.MediaType == "" {
			d.MediaType = types.OCIManifestSchema1
		}
		return c.record(ctx, ir.key, v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest, Platform: d.Platform, Annotations: map[string]string{annSignatures: set.String()}})
	}
	return nil
}
