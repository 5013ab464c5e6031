package cache

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/internal/sigverifytest"
	"github.com/kptr-dev/kptr/signature"
	"github.com/kptr-dev/kptr/test/cosigner"
)

// signedFixture pushes a function image to reg and signs it with a new key;
// it returns the reference, its digest and a policy trusting the key for
// the registry.
func signedFixture(t testing.TB, reg *testRegistry, repo string) (string, v1.Hash, *signature.Policy, *cosigner.Key) {
	t.Helper()
	ref := reg.Host + "/" + repo + ":v1"
	d := push(t, image(t, false, HostPlatform().Architecture, gzipLayer(t, file("usr/local/bin/function", "x"))), ref)
	k := cosigner.NewKey(t)
	cosigner.Push(t, reg.Host+"/"+repo, d.String(), k.Sign(cosigner.Payload(reg.Host+"/"+repo, d.String())))
	return ref, d, policyFor(t, reg.Host, k), k
}

func policyFor(t testing.TB, host string, k *cosigner.Key) *signature.Policy {
	t.Helper()
	// the verifier beside the test binary, where Evaluate looks for it
	if err := sigverifytest.BesideExecutable(); err != nil {
		t.Fatal(err)
	}
	doc := `{"default": [{"type": "reject"}], "transports": {"docker": {"` + host + `": [{"type": "sigstoreSigned", "keyData": "` +
		base64.StdEncoding.EncodeToString(k.PublicPEM) + `", "signedIdentity": {"type": "matchRepository"}}]}}}`
	p, err := signature.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A warm Resolve under an unchanged policy asks no registry and verifies
// nothing again (the remembered verdict); another policy verifies again,
// from the cache, offline.
func TestSignatureVerdictRemembered(t *testing.T) {
	reg := newTestRegistry(t)
	ref, d, p, _ := signedFixture(t, reg, "fn/signed")
	dir := t.TempDir()
	if _, err := openTest(t, dir, WithSignaturePolicy(p)).Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	n := reg.requestCount()
	b, err := openTest(t, dir, WithSignaturePolicy(p), WithOffline(true)).Resolve(ctx, ref)
	if err != nil || b.Digest != d {
		t.Fatalf("warm resolve: %v %v", b.Digest, err)
	}
	if reg.requestCount() != n {
		t.Errorf("a warm resolve asked the registry %d times", reg.requestCount()-n)
	}
	// another key: the remembered verdict is not this policy's
	other := policyFor(t, reg.Host, cosigner.NewKey(t))
	_, err = openTest(t, dir, WithSignaturePolicy(other), WithOffline(true)).Resolve(ctx, ref)
	if !RefusedBySignaturePolicy(err) || !strings.Contains(err.Error(), "wrong key") {
		t.Fatalf("under another key: %v", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.ExitCode() != ExitSignature {
		t.Errorf("exit code of %v is not %d", err, ExitSignature)
	}
	// prune keeps the signatures with the image, and forgets verdicts
	if _, err := openTest(t, dir).Prune(ctx, PruneOptions{}); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir + "/" + verdictsDir); len(ents) != 0 {
		t.Errorf("verdicts left after prune: %d", len(ents))
	}
	if _, err := openTest(t, dir, WithSignaturePolicy(p), WithOffline(true)).Resolve(ctx, ref); err != nil {
		t.Fatalf("after prune, offline: %v", err)
	}
}

// hostileSigs serves the registry, except that the image's signatures are
// what serve says.
func hostileSigs(t *testing.T, reg *testRegistry, serve func(w http.ResponseWriter, r *http.Request) bool) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !serve(w, r) {
			reg.Config.Handler.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// A registry that lies about signatures costs bounded work: a signature
// manifest with thousands of layers or a payload declared 1 TiB is refused
// before any layer is read, an endless referrers list is cut at its cap.
func TestHostileSignatures(t *testing.T) {
	reg := newTestRegistry(t)
	ref, d, _, k := signedFixture(t, reg, "fn/victim")
	repo := strings.TrimSuffix(ref, ":v1")
	sigTag := "sha256-" + d.Hex + ".sig"

	// thousands of layers
	many := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	var adds []mutate.Addendum
	for i := 0; i < 5000; i++ {
		adds = append(adds, mutate.Addendum{Layer: static.NewLayer([]byte(fmt.Sprint(i)), cosigner.SimpleSigningMediaType)})
	}
	many, err := mutate.Append(many, adds...)
	if err != nil {
		t.Fatal(err)
	}
	manyRaw, _ := many.RawManifest()
	manyDigest, _ := many.Digest()
	// one layer declared 1 TiB
	huge := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%064d","size":2},"layers":[{"mediaType":%q,"digest":"sha256:%064d","size":1099511627776}]}`, 0, cosigner.SimpleSigningMediaType, 1)
	cases := []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request) bool
		want  string
	}{
		{"5000 signature layers", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/manifests/"+sigTag) {
				return false
			}
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			w.Header().Set("Docker-Content-Digest", manyDigest.String())
			w.Write(manyRaw)
			return true
		}, "signature manifest lists 5000 layers, over kptr's limit of 64"},
		{"1 TiB payload", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.HasSuffix(r.URL.Path, "/manifests/"+sigTag) {
				return false
			}
			w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
			w.Write([]byte(huge))
			return true
		}, "declares 1099511627776 bytes, over the 1 MiB limit"},
		{"endless referrers", func(w http.ResponseWriter, r *http.Request) bool {
			if !strings.Contains(r.URL.Path, "/referrers/") {
				return false
			}
			w.Header().Set("Content-Type", string(types.OCIImageIndex))
			w.Write([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[`))
			entry := []byte(`{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json","digest":"sha256:` + strings.Repeat("a", 64) + `","size":100},`)
			for i := 0; i < 1<<16; i++ {
				if _, err := w.Write(entry); err != nil {
					break
				}
			}
			return true
		}, "larger than the 1 MiB limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			host := hostileSigs(t, reg, c.serve)
			p := policyFor(t, "example.test", k)
			dir := t.TempDir()
			cc := openTest(t, dir, WithSignaturePolicy(p), WithMirrors(imageref.Mirror{From: "example.test", To: host}))
			_, err := cc.Resolve(ctx, "example.test/"+strings.TrimPrefix(repo, reg.Host+"/")+":v1")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if ents, _ := os.ReadDir(dir + "/rootfs"); len(ents) != 0 {
				t.Error("an image whose signatures could not be read was unpacked")
			}
		})
	}
}

// BenchmarkSignedResolve is the cost of the policy on a render: a warm
// resolve under an unchanged policy (the remembered verdict, a new process
// each time), and a verification from the cache with no verdict (an image
// seen under another policy, or after prune: reading the signature set and
// checking one ECDSA P-256 signature).
func BenchmarkSignedResolve(b *testing.B) {
	reg := newTestRegistry(b)
	ref, _, p, _ := signedFixture(b, reg, "fn/bench")
	dir := b.TempDir()
	if _, err := openTest(b, dir, WithSignaturePolicy(p)).Resolve(ctx, ref); err != nil {
		b.Fatal(err)
	}
	b.Run("warm-verdict", func(b *testing.B) {
		for b.Loop() {
			c, err := Open(dir, WithSignaturePolicy(p), WithOffline(true))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Resolve(ctx, ref); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	b.Run("no-policy", func(b *testing.B) {
		for b.Loop() {
			c, err := Open(dir, WithOffline(true))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Resolve(ctx, ref); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	b.Run("verify-from-cache", func(b *testing.B) {
		for b.Loop() {
			c, err := Open(dir, WithSignaturePolicy(p), WithOffline(true))
			if err != nil {
				b.Fatal(err)
			}
			c.clearVerdicts()
			if _, err := c.Resolve(ctx, ref); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}
	})
	b.Run("fetch-and-verify", func(b *testing.B) {
		c, err := Open(dir, WithSignaturePolicy(p))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ir, _ := c.parseRef(ref)
		d, _ := c.localDescriptor(ir)
		for b.Loop() {
			set, err := c.fetchSignatures(ctx, ir, d)
			if err != nil {
				b.Fatal(err)
			}
			sigs, err := c.readSigset(set)
			if err != nil {
				b.Fatal(err)
			}
			if dec := p.Evaluate(ir.named, d.Digest.String(), sigs); !dec.Allowed {
				b.Fatal(dec.Error())
			}
		}
	})
}

// A sigstore bundle attached as an OCI 1.1 referrer (no .sig tag) satisfies
// the policy, is stored with the image and verified again offline.
func TestBundleReferrer(t *testing.T) {
	reg := newTestRegistry(t)
	ref := reg.Host + "/fn/bundled:v1"
	img := image(t, false, HostPlatform().Architecture, gzipLayer(t, file("usr/local/bin/function", "b")))
	d := push(t, img, ref)
	raw, _ := img.RawManifest()
	mt, _ := img.MediaType()
	k := cosigner.NewKey(t)
	cosigner.PushBundle(t, reg.Host+"/fn/bundled", v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(raw))}, k.Bundle(t, reg.Host+"/fn/bundled", d.String()))
	p := policyFor(t, reg.Host, k)
	dir := t.TempDir()
	if _, err := openTest(t, dir, WithSignaturePolicy(p)).Resolve(ctx, ref); err != nil {
		t.Fatal(err)
	}
	c := openTest(t, dir, WithSignaturePolicy(p), WithOffline(true))
	c.clearVerdicts()
	if _, err := c.Resolve(ctx, ref); err != nil {
		t.Fatalf("offline, from the stored bundle: %v", err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list) != 1 || list[0].Signatures != 1 {
		t.Fatalf("cache ls: %+v %v", list, err)
	}
	if _, err := openTest(t, t.TempDir(), WithSignaturePolicy(policyFor(t, reg.Host, cosigner.NewKey(t)))).Resolve(ctx, ref); !RefusedBySignaturePolicy(err) || !strings.Contains(err.Error(), "wrong key: the sigstore bundle") {
		t.Fatalf("another key: %v", err)
	}
}

// cosign v2.6.5's --new-bundle-format on a registry without the referrers
// API: the bundle's manifest carries artifactType (the bundle type, over
// the OCI empty config), but the referrers tag fallback cosign writes lists
// it under the config's media type. kptr reads the manifest to decide, and
// the bundle satisfies the policy.
func TestBundleListedUnderTheEmptyType(t *testing.T) {
	reg := newTestRegistry(t)
	repo := reg.Host + "/fn/cosign-bundled"
	img := image(t, false, HostPlatform().Architecture, gzipLayer(t, file("usr/local/bin/function", "c")))
	d := push(t, img, repo+":v1")
	raw, _ := img.RawManifest()
	mt, _ := img.MediaType()
	k := cosigner.NewKey(t)
	b := k.Bundle(t, repo, d.String())

	// the bundle's manifest as cosign writes it: artifactType set, the
	// config the OCI empty descriptor
	bm := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), ociEmpty)
	bm, err := mutate.Append(bm, mutate.Addendum{Layer: static.NewLayer(b, bundleV03)})
	if err != nil {
		t.Fatal(err)
	}
	bi := mutate.Subject(bm, v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(raw))}).(v1.Image)
	bd, _ := bi.Digest()
	push(t, bi, repo+"@"+bd.String()) // the blobs, and a manifest without artifactType
	braw, _ := bi.RawManifest()
	var m map[string]any
	if err := json.Unmarshal(braw, &m); err != nil {
		t.Fatal(err)
	}
	m["artifactType"] = bundleV03
	cosignRaw, _ := json.Marshal(m)
	cosignDigest := putRaw(t, repo, "", cosignRaw)
	// the fallback index, last, as cosign leaves it: one entry, the empty type
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": types.OCIImageIndex, "manifests": []map[string]any{{
		"mediaType": types.OCIManifestSchema1, "size": len(cosignRaw), "digest": cosignDigest.String(), "artifactType": ociEmpty}}})
	putRaw(t, repo, "sha256-"+d.Hex, idx)

	if _, err := openTest(t, t.TempDir(), WithSignaturePolicy(policyFor(t, reg.Host, k))).Resolve(ctx, repo+":v1"); err != nil {
		t.Fatal(err)
	}
}

// putRaw puts a manifest's bytes under tag (by its digest when tag is "").
func putRaw(t *testing.T, repo, tag string, raw []byte) v1.Hash {
	t.Helper()
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	var ref name.Reference = r.Digest(h.String())
	if tag != "" {
		ref = r.Tag(tag)
	}
	if err := remote.Put(ref, rawManifest(raw)); err != nil {
		t.Fatal(err)
	}
	return h
}

type rawManifest []byte

func (r rawManifest) RawManifest() ([]byte, error) { return r, nil }
