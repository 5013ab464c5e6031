package signatures

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kptr-dev/kptr/test/cosigner"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// fixture is the registry with one image per case, signed (or not) as the
// case says, and the keys a policy trusts.
type fixture struct {
	reg     *registry.Registry
	digests map[string]string // case → manifest digest
	key     *cosigner.Key     // the release key the policy names
	ca      *cosigner.CA
	log     *cosigner.Log
}

const (
	issuer = "https://issuer.example.com"
	email  = "release@example.com"
)

// upstream is the logical name of a case's image (the name in the Kptfile;
// it is pulled through the mirror gcr.io=REGISTRY).
func upstream(c string) string {
	if strings.HasPrefix(c, "keyless-") {
		return "gcr.io/keyless/" + c
	}
	return "gcr.io/kpt-fn/" + c
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: registry.Start(t), digests: map[string]string{}, key: cosigner.NewKey(t), ca: cosigner.NewCA(t), log: cosigner.NewLog(t)}
	cases := []string{"signed", "unsigned", "other-key", "tampered", "other-digest", "other-repository", "keyless-good", "keyless-expired", "bundle-signed", "bundle-other-key"}
	descs := map[string]v1.Descriptor{}
	for _, c := range cases {
		img := fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"case": c})))
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		f.digests[c] = d.String()
		raw, _ := img.RawManifest()
		mt, _ := img.MediaType()
		descs[c] = v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(raw))}
		fnimage.Push(t, img, f.reg.Addr+"/"+strings.TrimPrefix(upstream(c), "gcr.io/")+":v1")
	}
	now := time.Now()
	sign := func(c string, s cosigner.Sig) {
		cosigner.Push(t, f.reg.Addr+"/"+strings.TrimPrefix(upstream(c), "gcr.io/"), f.digests[c], s)
	}
	sign("signed", f.key.Sign(cosigner.Payload(upstream("signed"), f.digests["signed"])))
	sign("other-key", cosigner.NewKey(t).Sign(cosigner.Payload(upstream("other-key"), f.digests["other-key"])))
	sign("tampered", cosigner.Tamper(f.key.Sign(cosigner.Payload(upstream("tampered"), f.digests["tampered"]))))
	sign("other-digest", f.key.Sign(cosigner.Payload(upstream("other-digest"), f.digests["signed"])))
	sign("other-repository", f.key.Sign(cosigner.Payload(upstream("signed"), f.digests["other-repository"])))
	sign("keyless-good", cosigner.Keyless(t, f.ca, f.log, email, issuer, cosigner.Payload(upstream("keyless-good"), f.digests["keyless-good"]), now))
	k, cert := f.ca.Issue(t, email, issuer, now.Add(-20*time.Hour), now.Add(-19*time.Hour))
	expired := k.Sign(cosigner.Payload(upstream("keyless-expired"), f.digests["keyless-expired"]))
	expired.Cert, expired.Chain = cert, f.ca.PEM
	sign("keyless-expired", expired)
	// sigstore bundles as OCI 1.1 referrers (this registry has no referrers
	// API: the referrers tag fallback, as cosign writes it)
	bundle := func(c string, k *cosigner.Key) {
		repo := f.reg.Addr + "/" + strings.TrimPrefix(upstream(c), "gcr.io/")
		cosigner.PushBundle(t, repo, descs[c], k.Bundle(t, upstream(c), f.digests[c]))
	}
	bundle("bundle-signed", f.key)
	bundle("bundle-other-key", cosigner.NewKey(t))
	return f
}

// policy writes the policy and its keys into w; key replaces the release
// key (another policy, same file names).
func (f *fixture) policy(t *testing.T, w *world, key *cosigner.Key) string {
	t.Helper()
	doc := map[string]any{
		"default": []any{map[string]string{"type": "reject"}},
		"transports": map[string]any{"docker": map[string]any{
			"gcr.io/kpt-fn": []any{map[string]any{"type": "sigstoreSigned", "keyPath": "cosign.pub", "signedIdentity": map[string]string{"type": "matchRepository"}}},
			"gcr.io/keyless": []any{map[string]any{"type": "sigstoreSigned",
				"fulcio":             map[string]string{"caPath": "fulcio.pem", "oidcIssuer": issuer, "subjectEmail": email},
				"rekorPublicKeyPath": "rekor.pub", "signedIdentity": map[string]string{"type": "matchRepository"}}},
		}},
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	dir := w.write(t, "policy", map[string]string{"policy.json": string(b), "cosign.pub": string(key.PublicPEM),
		"fulcio.pem": string(f.ca.PEM), "rekor.pub": string(f.log.PublicPEM)})
	return filepath.Join(dir, "policy.json")
}

// pkg writes a package whose pipeline runs image.
func pkg(t *testing.T, w *world, rel, image string) string {
	return w.write(t, rel, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " + image + "\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
	})
}

// refusals are the cases the policy refuses, and what the refusal says was found.
var refusals = map[string]string{
	"unsigned":         "no signature",
	"other-key":        "wrong key",
	"tampered":         "wrong key",
	"other-digest":     "digest mismatch: the signature is for ",
	"other-repository": "identity mismatch: the signature names gcr.io/kpt-fn/signed",
	"keyless-expired":  "expired certificate without a log time",
	"bundle-other-key": "wrong key: the sigstore bundle does not verify with the policy's key",
}

func scopeOf(c string) string {
	if strings.HasPrefix(c, "keyless-") {
		return `transports.docker["gcr.io/keyless"]`
	}
	return `transports.docker["gcr.io/kpt-fn"]`
}

// Every refusal, online then offline from the cache, through fn render,
// cache pull and generate, as root and as uid 999: exit 4, one line naming
// the image, its digest, the scope and what was found; the package is left
// as it was and no layer of a refused image is fetched. Signed images
// render, online and offline.
func TestPolicyDecidesWhatRuns(t *testing.T) {
	f := setup(t)
	for _, id := range identities() {
		t.Run(id.name, func(t *testing.T) {
			w := newWorld(t, id)
			pol := f.policy(t, w, f.key)
			online := []string{"KPTR_MIRRORS=gcr.io=" + f.reg.Addr, "KPTR_SIGNATURE_POLICY=" + pol}
			offline := append([]string{"KPTR_OFFLINE=true"}, online...)
			for _, c := range []string{"signed", "keyless-good", "bundle-signed"} {
				p := pkg(t, w, "pkg-"+c, upstream(c)+":v1")
				w.kptr(t, "", online, "fn", "render", p).exits(t, 0)
				w.kptr(t, "", offline, "fn", "render", p).exits(t, 0)
				w.kptr(t, p, append([]string{"KPTR_ALLOWED_IMAGES=gcr.io/**"}, offline...), "generate").exits(t, 0).says(t, "kind: ConfigMap")
			}
			for c, found := range refusals {
				t.Run(c, func(t *testing.T) {
					image := upstream(c) + ":v1"
					line := image + "@" + f.digests[c] + ": refused by the signature policy (" + scopeOf(c) + "): " + found
					p := pkg(t, w, "pkg-"+c, image)
					// the resources are untouched (the Kptfile records the
					// failed render's status, as kpt's does)
					before := snapshot(t, filepath.Join(p, "cm.yaml"))
					w.kptr(t, "", online, "fn", "render", p).exits(t, 4).says(t, line)
					w.kptr(t, "", offline, "fn", "render", p).exits(t, 4).says(t, line)
					w.kptr(t, "", online, "cache", "pull", image).exits(t, 4).says(t, "kptr cache pull: "+line)
					w.kptr(t, p, append([]string{"KPTR_ALLOWED_IMAGES=gcr.io/**"}, offline...), "generate").exits(t, 4).says(t, line)
					if after := snapshot(t, filepath.Join(p, "cm.yaml")); after != before {
						t.Errorf("the package changed:\n%s\n---\n%s", before, after)
					}
					if _, err := os.Stat(filepath.Join(w.cache, "rootfs", strings.TrimPrefix(f.digests[c], "sha256:"))); err == nil {
						t.Error("a refused image was unpacked")
					}
				})
			}
			// No policy: behaviour exactly as today (the unsigned image runs).
			w.kptr(t, "", []string{"KPTR_MIRRORS=gcr.io=" + f.reg.Addr}, "fn", "render", pkg(t, w, "pkg-nopolicy", upstream("unsigned")+":v1")).exits(t, 0)
		})
	}
}

// A replayed render never outlives the policy: with memo on, a render
// recorded under one policy is refused, not replayed, under a policy that
// trusts another key; an offline cache with signatures stored refuses from
// the cache alone.
func TestMemoNeverReplaysARefusal(t *testing.T) {
	f := setup(t)
	for _, id := range identities() {
		t.Run(id.name, func(t *testing.T) {
			w := newWorld(t, id)
			pol := f.policy(t, w, f.key)
			env := []string{"KPTR_MIRRORS=gcr.io=" + f.reg.Addr, "KPTR_SIGNATURE_POLICY=" + pol, "KPTR_MEMO=on", "KPTR_LOG_LEVEL=debug"}
			p := pkg(t, w, "pkg", upstream("signed")+":v1")
			w.kptr(t, "", env, "fn", "render", p).exits(t, 0)
			w.kptr(t, "", env, "fn", "render", p).exits(t, 0) // the Kptfile now carries its render status
			w.kptr(t, "", env, "fn", "render", p).exits(t, 0).says(t, "replaying the recorded render")
			f.policy(t, w, cosigner.NewKey(t)) // the operator rotates the key
			w.kptr(t, "", append([]string{"KPTR_OFFLINE=true"}, env...), "fn", "render", p).exits(t, 4).
				says(t, upstream("signed")+":v1@"+f.digests["signed"]+": refused by the signature policy", "wrong key")
			w.kptr(t, p, append([]string{"KPTR_OFFLINE=true", "KPTR_ALLOWED_IMAGES=gcr.io/**"}, env...), "generate").exits(t, 4).says(t, "wrong key")
		})
	}
}

// The signatures travel with the image: written out of one cache and
// imported into another, they are verified there with no network.
func TestExportImportCarriesSignatures(t *testing.T) {
	f := setup(t)
	w := newWorld(t, identity{"root", -1})
	pol := f.policy(t, w, f.key)
	env := []string{"KPTR_MIRRORS=gcr.io=" + f.reg.Addr, "KPTR_SIGNATURE_POLICY=" + pol}
	w.kptr(t, "", env, "cache", "pull", upstream("signed")+":v1").exits(t, 0)
	w.kptr(t, "", env, "cache", "ls").exits(t, 0).says(t, "signatures: 1")
	tar := filepath.Join(w.base, "images.tar")
	w.kptr(t, "", env, "cache", "export", "--tar", "-o", tar, upstream("signed")+":v1").exits(t, 0)
	other := w.dir(t, "cache2")
	env2 := []string{"KPTR_CACHE_DIR=" + other, "KPTR_OFFLINE=true", "KPTR_SIGNATURE_POLICY=" + pol}
	w.kptr(t, "", env2, "cache", "import", tar).exits(t, 0)
	w.kptr(t, "", env2, "fn", "render", pkg(t, w, "pkg", upstream("signed")+":v1")).exits(t, 0)
	w.kptr(t, "", env2, "cache", "ls").exits(t, 0).says(t, "signatures: 1")

	// prewarm (what an operator runs for the sidecar's cache, and for the
	// air gap with --export) fetches the signatures with the images
	third := w.dir(t, "cache3")
	p := pkg(t, w, "pkg-prewarm", upstream("bundle-signed")+":v1")
	exported := filepath.Join(w.base, "prewarmed.tar")
	w.kptr(t, "", append([]string{"KPTR_CACHE_DIR=" + third}, env...), "prewarm", p, "--export", exported).exits(t, 0)
	fourth := w.dir(t, "cache4")
	env4 := []string{"KPTR_CACHE_DIR=" + fourth, "KPTR_OFFLINE=true", "KPTR_SIGNATURE_POLICY=" + pol}
	w.kptr(t, "", env4, "cache", "import", exported).exits(t, 0)
	w.kptr(t, "", env4, "fn", "render", p).exits(t, 0)
	w.kptr(t, "", env4, "cache", "ls").exits(t, 0).says(t, "signatures: 1")
}

// snapshot is a package's files and contents, as one string.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			b.WriteString(p + "\n" + string(c) + "\n")
		}
		return nil
	})
	return b.String()
}

// generate pulls through a background fetch (`kptr cache fetch`, its own
// process): the fetch is held to the policy (given as a relative path, the
// fetch runs in /), so a refused image downloads no layer and the refusal is
// generate's, exit 4; a signed one renders.
func TestGenerateOnlineFetch(t *testing.T) {
	f := setup(t)
	for _, id := range identities() {
		t.Run(id.name, func(t *testing.T) {
			w := newWorld(t, id)
			f.policy(t, w, f.key)
			env := []string{"KPTR_MIRRORS=gcr.io=" + f.reg.Addr, "KPTR_SIGNATURE_POLICY=../policy/policy.json", "KPTR_ALLOWED_IMAGES=gcr.io/**"}
			p := pkg(t, w, "app-signed", upstream("signed")+":v1")
			w.kptr(t, p, env, "generate").exits(t, 0).says(t, "kind: ConfigMap")
			p = pkg(t, w, "app-unsigned", upstream("unsigned")+":v1")
			w.kptr(t, p, env, "generate").exits(t, 4).says(t, upstream("unsigned")+":v1@"+f.digests["unsigned"]+": refused by the signature policy", "no signature")
			if _, err := os.Stat(filepath.Join(w.cache, "rootfs", strings.TrimPrefix(f.digests["unsigned"], "sha256:"))); err == nil {
				t.Error("the refused image was unpacked")
			}
		})
	}
}
