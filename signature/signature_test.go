package signature_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/signature"
	"github.com/kptr-dev/kptr/test/cosigner"
)

const (
	digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	other  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	repo   = "registry.example.com/kpt-fn/cat"
)

func sigs(s ...cosigner.Sig) []signature.Signature {
	var out []signature.Signature
	for _, x := range s {
		out = append(out, signature.Signature{Payload: x.Payload, Sig: x.Signature, Certificate: x.Cert, Chain: x.Chain, RekorBundle: x.RekorBundle})
	}
	return out
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func mustParse(t *testing.T, doc string) *signature.Policy {
	t.Helper()
	p, err := signature.Parse([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatalf("policy: %v\n%s", err, doc)
	}
	return p
}

func keyPolicy(k *cosigner.Key, identity string) string {
	id := ""
	if identity != "" {
		id = `, "signedIdentity": ` + identity
	}
	return `{"default": [{"type": "reject"}], "transports": {"docker": {"` + repo + `": [{"type": "sigstoreSigned", "keyData": "` + b64(k.PublicPEM) + `"` + id + `}]}}}`
}

// Every refusal names the image, the digest, the matched scope and what was
// found; the signature that verifies is the only one allowed.
func TestKeyRequirement(t *testing.T) {
	k, other2 := cosigner.NewKey(t), cosigner.NewKey(t)
	p := mustParse(t, keyPolicy(k, `{"type": "matchRepository"}`))
	good := k.Sign(cosigner.Payload(repo, digest))
	cases := []struct {
		name  string
		image string
		sigs  []signature.Signature
		want  string // "" allowed
	}{
		{"signed", repo + ":v1", sigs(good), ""},
		{"by digest", repo + "@" + digest, sigs(good), ""},
		{"no signature", repo + ":v1", nil, "no signature"},
		{"no signature, by digest", repo + "@" + digest, nil, "no signature"},
		{"another key", repo + ":v1", sigs(other2.Sign(cosigner.Payload(repo, digest))), "wrong key"},
		{"tampered payload", repo + ":v1", sigs(cosigner.Tamper(good)), "wrong key"},
		{"another digest", repo + ":v1", sigs(k.Sign(cosigner.Payload(repo, other))), "digest mismatch: the signature is for " + other},
		{"another repository", repo + ":v1", sigs(k.Sign(cosigner.Payload("registry.example.com/kpt-fn/evil", digest))), "identity mismatch"},
		{"one good among bad", repo + ":v1", sigs(other2.Sign(cosigner.Payload(repo, digest)), good), ""},
		{"not cosign's type", repo + ":v1", sigs(k.Sign([]byte(`{"critical":{"identity":{"docker-reference":"` + repo + `"},"image":{"docker-manifest-digest":"` + digest + `"},"type":"something else"}}`))), "not a cosign container image signature"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := p.Evaluate(c.image, digest, c.sigs)
			if c.want == "" {
				if !d.Allowed {
					t.Fatalf("refused: %v", d.Error())
				}
				return
			}
			if d.Allowed {
				t.Fatal("allowed")
			}
			msg := d.Error()
			if strings.Count(msg, digest) != 1 {
				t.Errorf("refusal %q names the digest %d times", msg, strings.Count(msg, digest))
			}
			image := c.image
			if !strings.Contains(image, "@") {
				image += "@" + digest
			}
			for _, w := range []string{image, `transports.docker["` + repo + `"]`, c.want} {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q lacks %q", msg, w)
				}
			}
		})
	}
}

// matchRepoDigestOrExact (the default) is containers/image's: an image named
// by digest needs a signature for its repository; one named by tag needs a
// signature naming that tag (cosign's own payloads name the repository
// alone, so they satisfy it only for digest references).
func TestDefaultIdentity(t *testing.T) {
	k := cosigner.NewKey(t)
	p := mustParse(t, keyPolicy(k, ""))
	repoOnly := sigs(k.Sign(cosigner.Payload(repo, digest)))
	if d := p.Evaluate(repo+"@"+digest, digest, repoOnly); !d.Allowed {
		t.Errorf("digest reference: %v", d.Error())
	}
	if d := p.Evaluate(repo+":v1", digest, repoOnly); d.Allowed || !strings.Contains(d.Reason, "identity mismatch") {
		t.Errorf("tag reference with a repository-only signature: %+v", d)
	}
	if d := p.Evaluate(repo+":v1", digest, sigs(k.Sign(cosigner.Payload(repo+":v1", digest)))); !d.Allowed {
		t.Errorf("tag reference, signature for the tag: %v", d.Error())
	}
	if d := p.Evaluate(repo+":v1", digest, sigs(k.Sign(cosigner.Payload(repo+":v2", digest)))); d.Allowed {
		t.Error("a signature for another tag satisfied matchRepoDigestOrExact")
	}
}

func TestIdentityRules(t *testing.T) {
	k := cosigner.NewKey(t)
	signedAs := func(ref string) []signature.Signature { return sigs(k.Sign(cosigner.Payload(ref, digest))) }
	cases := []struct {
		rule, image, signed string
		ok                  bool
	}{
		{`{"type":"exactRepository","dockerRepository":"upstream.example.com/fn/cat"}`, repo + ":v1", "upstream.example.com/fn/cat", true},
		{`{"type":"exactRepository","dockerRepository":"upstream.example.com/fn/cat"}`, repo + ":v1", repo, false},
		{`{"type":"remapIdentity","prefix":"registry.example.com/kpt-fn","signedPrefix":"upstream.example.com/fn"}`, repo + "@" + digest, "upstream.example.com/fn/cat", true},
		{`{"type":"remapIdentity","prefix":"registry.example.com/kpt-fn","signedPrefix":"upstream.example.com/fn"}`, repo + "@" + digest, repo, false},
		{`{"type":"exactReference","dockerReference":"upstream.example.com/fn/cat:v9"}`, repo + ":v1", "upstream.example.com/fn/cat:v9", true},
		{`{"type":"exactReference","dockerReference":"upstream.example.com/fn/cat:v9"}`, repo + ":v1", "upstream.example.com/fn/cat", false},
		{`{"type":"matchExact"}`, repo + ":v1", repo + ":v1", true},
		{`{"type":"matchExact"}`, repo + ":v1", repo, false},
	}
	for _, c := range cases {
		p := mustParse(t, keyPolicy(k, c.rule))
		if d := p.Evaluate(c.image, digest, signedAs(c.signed)); d.Allowed != c.ok {
			t.Errorf("%s: image %s signed as %s: allowed %v, want %v (%s)", c.rule, c.image, c.signed, d.Allowed, c.ok, d.Reason)
		}
	}
}

// Scopes are matched most specific first, as containers/image matches them.
func TestScopeOrder(t *testing.T) {
	p := mustParse(t, `{"default": [{"type": "reject"}], "transports": {"docker": {
		"registry.example.com/kpt-fn/cat:v1": [{"type": "insecureAcceptAnything"}],
		"registry.example.com/kpt-fn/cat": [{"type": "reject"}],
		"registry.example.com/kpt-fn": [{"type": "insecureAcceptAnything"}],
		"registry.example.com": [{"type": "reject"}],
		"*.example.com": [{"type": "insecureAcceptAnything"}],
		"": [{"type": "reject"}]}}}`)
	cases := map[string]string{
		"registry.example.com/kpt-fn/cat:v1":     `transports.docker["registry.example.com/kpt-fn/cat:v1"]`,
		"registry.example.com/kpt-fn/cat:v2":     `transports.docker["registry.example.com/kpt-fn/cat"]`,
		"registry.example.com/kpt-fn/sub/x:v2":   `transports.docker["registry.example.com/kpt-fn"]`,
		"registry.example.com/other/x:v2":        `transports.docker["registry.example.com"]`,
		"mirror.example.com/x:v1":                `transports.docker["*.example.com"]`,
		"ghcr.io/kptdev/krm-functions-catalog/x": `transports.docker[""]`,
	}
	for image, want := range cases {
		scope, _, err := p.Match(image)
		if err != nil || scope != want {
			t.Errorf("%s: scope %s (%v), want %s", image, scope, err, want)
		}
	}
	if d := p.Evaluate("registry.example.com/kpt-fn/cat:v1", digest, nil); !d.Allowed {
		t.Errorf("the tag's own scope: %v", d.Error())
	}
	if d := p.Evaluate("registry.example.com/kpt-fn/cat:v2", digest, nil); d.Allowed || !strings.Contains(d.Reason, "reject") {
		t.Errorf("the repository's reject: %+v", d)
	}
	// docker.io names are matched in containers/image's spelling
	p = mustParse(t, `{"default": [{"type": "reject"}], "transports": {"docker": {"docker.io/library/busybox": [{"type": "insecureAcceptAnything"}]}}}`)
	for _, image := range []string{"busybox:1", "index.docker.io/library/busybox:1", "docker.io/busybox:1"} {
		if d := p.Evaluate(image, digest, nil); !d.Allowed {
			t.Errorf("%s: %v", image, d.Error())
		}
	}
}

// A policy kptr cannot honour entirely is refused when it loads, naming
// what it does not implement; nothing is ignored.
func TestLoadRefuses(t *testing.T) {
	k := cosigner.NewKey(t)
	kd := b64(k.PublicPEM)
	cases := map[string]string{
		`{"default": [{"type": "reject"}], "extra": 1}`:                                                                                                 `field "extra"`,
		`{"default": [{"type": "reject", "keyType": "GPGKeys"}]}`:                                                                                       `field "keyType"`,
		`{"default": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/k"}]}`:                                                                    "signedBy",
		`{"default": [{"type": "sigstoreSigned", "pki": {}}]}`:                                                                                          `"pki"`,
		`{"default": [{"type": "sigstoreSigned", "keyData": "` + kd + `", "rekorURL": "x"}]}`:                                                           `field "rekorURL"`,
		`{"default": [{"type": "sigstoreSigned", "keyData": "` + kd + `", "signedIdentity": {"type": "matchRepository", "x": 1}}]}`:                     `field "x"`,
		`{"default": [{"type": "sigstoreSigned", "keyData": "` + kd + `", "signedIdentity": {"type": "matchSomething"}}]}`:                              "matchSomething",
		`{"default": [{"type": "sigstoreSigned"}]}`:                                                                                                     "exactly one of",
		`{"default": [{"type": "sigstoreSigned", "keyData": "` + kd + `", "keyPath": "/k"}]}`:                                                           "exactly one of",
		`{"default": [{"type": "sigstoreSigned", "fulcio": {"caData": "` + b64(cosigner.NewCA(t).PEM) + `", "oidcIssuer": "i", "subjectEmail": "e"}}]}`: "rekor",
		`{"default": [{"type": "sigstoreSigned", "keyData": "` + b64([]byte("not a key")) + `"}]}`:                                                      "key 1",
		`{"default": []}`:    "empty list",
		`{"transports": {}}`: `"default" is missing`,
		`{"default": [{"type": "reject"}], "transports": {"docker": {"busybox": [{"type": "reject"}]}}}`:                         "registry host",
		`{"default": [{"type": "reject"}], "transports": {"docker": {"index.docker.io/library/busybox": [{"type": "reject"}]}}}`: "docker.io/library/busybox",
		`{"default": [{"type": "sigstoreSigned", "keyPath": "missing.pub"}]}`:                                                    "missing.pub",
	}
	refusedOnLoad(t, cases)
}

// refusedOnLoad checks that each policy document fails to load with a
// LoadError (exit 2) whose message contains the case's text.
func refusedOnLoad(t *testing.T, cases map[string]string) {
	t.Helper()
	for doc, want := range cases {
		_, err := signature.Parse([]byte(doc), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", doc, err, want)
			continue
		}
		var le *signature.LoadError
		if !errorsAs(err, &le) || le.ExitCode() != 2 {
			t.Errorf("%s: %T is not a LoadError with exit 2", doc, err)
		}
	}
}

// containers-policy.json(5) rejects duplicated fields; encoding/json keeps
// the last, so a policy that says reject and then accept-anything loaded
// as accept-anything (issue 30). A duplicate at any depth is refused,
// naming the key and where it is; so are keys that differ only in case
// (encoding/json matches a field regardless of case).
func TestLoadRefusesDuplicateKeys(t *testing.T) {
	kd := b64(cosigner.NewKey(t).PublicPEM)
	sig := `{"type": "sigstoreSigned", "keyData": "` + kd + `", "signedIdentity": {"type": "matchRepository"}}`
	cases := map[string]string{
		`{"default": [{"type": "reject"}], "default": [{"type": "insecureAcceptAnything"}]}`:                                                                  `duplicate key "default" in the policy's top level`,
		`{"default": [{"type": "reject"}], "Default": [{"type": "insecureAcceptAnything"}]}`:                                                                  `duplicate key "Default" in the policy's top level (it repeats "default"`,
		"{\"default\": [{\"type\": \"reject\"}], \"transports\": {}, \"tran\u017Fports\": {}}":                                                                `repeats "transports"`,
		`{"default": [{"type": "reject", "type": "insecureAcceptAnything"}]}`:                                                                                 `duplicate key "type" in default[0]`,
		`{"default": [{"type": "reject"}], "transports": {"docker": {}, "docker": {}}}`:                                                                       `duplicate key "docker" in transports`,
		`{"default": [{"type": "reject"}], "transports": {"docker": {"gcr.io": [{"type": "reject"}], "gcr.io": []}}}`:                                         `duplicate key "gcr.io" in transports.docker`,
		`{"default": [{"type": "reject"}], "transports": {"docker": {"gcr.io/x": [{"type": "reject"}, ` + sig[:len(sig)-1] + `, "keyData": "` + kd + `"}]}}}`: `duplicate key "keyData" in transports.docker["gcr.io/x"][1]`,
		`{"default": [{"type": "sigstoreSigned", "keyData": "` + kd + `", "signedIdentity": {"type": "matchRepository", "type": "matchExact"}}]}`:             `duplicate key "type" in default[0].signedIdentity`,
		`{"default": [{"type": "reject"}], "x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`:                                                 "nested deeper than 64 levels",
	}
	refusedOnLoad(t, cases)
	// the same keys in sibling objects are no duplicates
	ok := `{"default": [{"type": "reject"}], "transports": {"docker": {"gcr.io/a": [` + sig + `], "gcr.io/b": [` + sig + `]}}}`
	if _, err := signature.Parse([]byte(ok), t.TempDir()); err != nil {
		t.Errorf("sibling objects with the same keys refused: %v", err)
	}
}

// Load resolves key paths against the policy's directory, and the policy's
// hash covers the keys it read: another key file, another hash.
func TestLoadHashCoversKeys(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	os.WriteFile(pol, []byte(`{"default": [{"type": "sigstoreSigned", "keyPath": "cosign.pub", "signedIdentity": {"type": "matchRepository"}}]}`), 0o644)
	k1, k2 := cosigner.NewKey(t), cosigner.NewKey(t)
	os.WriteFile(filepath.Join(dir, "cosign.pub"), k1.PublicPEM, 0o644)
	p1, err := signature.Load(pol)
	if err != nil {
		t.Fatal(err)
	}
	if d := p1.Evaluate(repo+":v1", digest, sigs(k1.Sign(cosigner.Payload(repo, digest)))); !d.Allowed {
		t.Fatal(d.Error())
	}
	os.WriteFile(filepath.Join(dir, "cosign.pub"), k2.PublicPEM, 0o644)
	p2, err := signature.Load(pol)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Hash == p2.Hash {
		t.Error("the policy hash did not change with its key file")
	}
	if d := p2.Evaluate(repo+":v1", digest, sigs(k1.Sign(cosigner.Payload(repo, digest)))); d.Allowed {
		t.Error("the replaced key still verifies")
	}
}

// The same policy file and keys hash alike on every load, however many
// scopes it has: the hash keys whole renders in the memo, so a hash that
// followed map order made a replay miss at random.
func TestLoadHashIsStable(t *testing.T) {
	dir := t.TempDir()
	var scopes []string
	for i := range 8 {
		k := fmt.Sprintf("k%d.pub", i)
		os.WriteFile(filepath.Join(dir, k), cosigner.NewKey(t).PublicPEM, 0o644)
		scopes = append(scopes, fmt.Sprintf(`"registry.example.com/team%d": [{"type": "sigstoreSigned", "keyPath": %q}]`, i, k))
	}
	pol := filepath.Join(dir, "policy.json")
	os.WriteFile(pol, []byte(`{"default": [{"type": "reject"}], "transports": {"docker": {`+strings.Join(scopes, ", ")+`}}}`), 0o644)
	first := ""
	for range 20 {
		p, err := signature.Load(pol)
		if err != nil {
			t.Fatal(err)
		}
		if first == "" {
			first = p.Hash
		} else if p.Hash != first {
			t.Fatalf("the same policy hashed as %s, then %s", first, p.Hash)
		}
	}
}

func rekorPolicy(k *cosigner.Key, l *cosigner.Log) string {
	return `{"default": [{"type": "sigstoreSigned", "keyData": "` + b64(k.PublicPEM) + `", "rekorPublicKeyData": "` + b64(l.PublicPEM) + `", "signedIdentity": {"type": "matchRepository"}}]}`
}

// With a rekor key, a signature needs a log entry signed by that log that
// describes this very payload, signature and key.
func TestRekorWithKey(t *testing.T) {
	k, l, l2 := cosigner.NewKey(t), cosigner.NewLog(t), cosigner.NewLog(t)
	p := mustParse(t, rekorPolicy(k, l))
	s := k.Sign(cosigner.Payload(repo, digest))
	now := time.Now()
	if d := p.Evaluate(repo+":v1", digest, sigs(l.Entry(t, s, k.PublicPEM, now))); !d.Allowed {
		t.Fatal(d.Error())
	}
	refusals := map[string]cosigner.Sig{
		"no transparency-log entry":     s,
		"log the policy does not trust": l2.Entry(t, s, k.PublicPEM, now),
		"another signature":             withBundle(s, l.Entry(t, k.Sign(cosigner.Payload(repo, digest)), k.PublicPEM, now)),
		"another key":                   l.Entry(t, s, cosigner.NewKey(t).PublicPEM, now),
	}
	altered := l.Entry(t, s, k.PublicPEM, now)
	var b map[string]any
	json.Unmarshal(altered.RekorBundle, &b)
	b["Payload"].(map[string]any)["integratedTime"] = now.Unix() + 1
	altered.RekorBundle, _ = json.Marshal(b)
	refusals["not signed by the policy's rekor key"] = altered
	for want, sig := range refusals {
		if d := p.Evaluate(repo+":v1", digest, sigs(sig)); d.Allowed || !strings.Contains(d.Reason, want) {
			t.Errorf("want a refusal naming %q, got %+v", want, d)
		}
	}
}

func fulcioPolicy(ca *cosigner.CA, l *cosigner.Log) string {
	return `{"default": [{"type": "sigstoreSigned", "fulcio": {"caData": "` + b64(ca.PEM) + `", "oidcIssuer": "https://issuer.example.com", "subjectEmail": "release@example.com"}, "rekorPublicKeyData": "` + b64(l.PublicPEM) + `", "signedIdentity": {"type": "matchRepository"}}]}`
}

// Keyless: a Fulcio certificate from the policy's CA, for its issuer and
// email, valid at the log's integrated time.
func TestFulcio(t *testing.T) {
	ca, l := cosigner.NewCA(t), cosigner.NewLog(t)
	p := mustParse(t, fulcioPolicy(ca, l))
	payload := cosigner.Payload(repo, digest)
	now := time.Now()
	good := cosigner.Keyless(t, ca, l, "release@example.com", "https://issuer.example.com", payload, now)
	if d := p.Evaluate(repo+":v1", digest, sigs(good)); !d.Allowed {
		t.Fatal(d.Error())
	}
	// certificate long expired, but valid when logged: allowed (the log time decides)
	k, cert := ca.Issue(t, "release@example.com", "https://issuer.example.com", now.Add(-20*time.Hour), now.Add(-19*time.Hour))
	old := k.Sign(payload)
	old.Cert, old.Chain = cert, ca.PEM
	if d := p.Evaluate(repo+":v1", digest, sigs(l.Entry(t, old, cert, now.Add(-19*time.Hour-30*time.Minute)))); !d.Allowed {
		t.Errorf("expired certificate with a log time inside its validity: %v", d.Error())
	}
	cases := map[string]cosigner.Sig{
		"expired certificate without a log time":                      old,
		"not valid at the log time":                                   l.Entry(t, old, cert, now),
		"identity mismatch: the certificate is for other@example.com": cosigner.Keyless(t, ca, l, "other@example.com", "https://issuer.example.com", payload, now),
		"from issuer https://evil.example.com":                        cosigner.Keyless(t, ca, l, "release@example.com", "https://evil.example.com", payload, now),
		"not issued by the policy's Fulcio CA":                        cosigner.Keyless(t, cosigner.NewCA(t), l, "release@example.com", "https://issuer.example.com", payload, now),
		"digest mismatch":                                             cosigner.Keyless(t, ca, l, "release@example.com", "https://issuer.example.com", cosigner.Payload(repo, other), now),
		"wrong key: the signature carries no Fulcio certificate":      cosigner.NewKey(t).Sign(payload),
	}
	for want, s := range cases {
		if d := p.Evaluate(repo+":v1", digest, sigs(s)); d.Allowed || !strings.Contains(d.Reason, want) {
			t.Errorf("want a refusal naming %q, got %+v", want, d)
		}
	}
}

// withBundle is s with the Rekor bundle of another signature.
func withBundle(s, from cosigner.Sig) cosigner.Sig {
	s.RekorBundle = from.RekorBundle
	return s
}

// Sigstore bundles (cosign's referrer form): a DSSE in-toto statement whose
// subject is the image, verified by sigstore-go with the policy's key.
func TestBundleWithKey(t *testing.T) {
	k := cosigner.NewKey(t)
	p := mustParse(t, keyPolicy(k, `{"type": "matchRepository"}`))
	bundle := func(b []byte) []signature.Signature { return []signature.Signature{{Bundle: b}} }
	good := k.Bundle(t, repo, digest)
	if d := p.Evaluate(repo+":v1", digest, bundle(good)); !d.Allowed {
		t.Fatal(d.Error())
	}
	cases := map[string][]byte{
		"wrong key":                      cosigner.NewKey(t).Bundle(t, repo, digest),
		"wrong key: the sigstore bundle": cosigner.TamperBundle(t, good),
		"digest mismatch":                k.Bundle(t, repo, other),
		"identity mismatch":              k.Bundle(t, "registry.example.com/kpt-fn/evil", digest),
		// cosign sign --new-bundle-format's statement: the digest, no name
		"the sigstore bundle names only the digest, no image, and matchRepository wants": k.Bundle(t, "", digest),
		"malformed sigstore bundle": []byte(`{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}`),
	}
	for want, b := range cases {
		if d := p.Evaluate(repo+":v1", digest, bundle(b)); d.Allowed || !strings.Contains(d.Reason, want) {
			t.Errorf("want a refusal naming %q, got %+v", want, d)
		}
	}
}

// A keyless bundle is held to the same rules as a keyless classic
// signature: without a transparency-log entry it has no log time, and is
// refused even with a certificate from the policy's CA.
func TestKeylessBundleWithoutLogEntry(t *testing.T) {
	ca, l := cosigner.NewCA(t), cosigner.NewLog(t)
	p := mustParse(t, fulcioPolicy(ca, l))
	b := cosigner.KeylessBundle(t, ca, "release@example.com", "https://issuer.example.com", repo, digest)
	d := p.Evaluate(repo+":v1", digest, []signature.Signature{{Bundle: b}})
	if d.Allowed || !strings.Contains(d.Reason, "sigstore bundle: ") {
		t.Fatalf("want a refusal for the missing log entry, got %+v", d)
	}
	t.Log(d.Reason)
}

// Keyless bundles with their transparency-log entry (signed entry
// timestamp, inclusion proof, signed checkpoint): the certificate is checked
// at the log's time, for the policy's issuer and email, from its CA.
func TestKeylessBundleLogged(t *testing.T) {
	ca, l := cosigner.NewCA(t), cosigner.NewLog(t)
	p := mustParse(t, fulcioPolicy(ca, l))
	now := time.Now()
	valid := func(at time.Time) (time.Time, time.Time) { return at.Add(-time.Minute), at.Add(10 * time.Minute) }
	nb, na := valid(now)
	bundle := func(b []byte) []signature.Signature { return []signature.Signature{{Bundle: b}} }
	good := cosigner.KeylessBundleLogged(t, ca, l, "release@example.com", "https://issuer.example.com", repo, digest, now, nb, na)
	if d := p.Evaluate(repo+":v1", digest, bundle(good)); !d.Allowed {
		t.Fatal(d.Error())
	}
	// expired now, valid when logged: allowed
	old := now.Add(-19 * time.Hour)
	onb, ona := valid(old)
	if d := p.Evaluate(repo+":v1", digest, bundle(cosigner.KeylessBundleLogged(t, ca, l, "release@example.com", "https://issuer.example.com", repo, digest, old, onb, ona))); !d.Allowed {
		t.Errorf("certificate valid at the log time: %v", d.Error())
	}
	mk := func(c *cosigner.CA, lg *cosigner.Log, email, issuer, name, dg string, nb, na time.Time) []byte {
		return cosigner.KeylessBundleLogged(t, c, lg, email, issuer, name, dg, now, nb, na)
	}
	cases := []struct {
		b    []byte
		want string
	}{
		{mk(ca, l, "other@example.com", "https://issuer.example.com", repo, digest, nb, na), `identity mismatch: the bundle's certificate is not for the policy's issuer and email`},
		{mk(ca, l, "release@example.com", "https://evil.example.com", repo, digest, nb, na), `got "https://evil.example.com"`},
		{mk(cosigner.NewCA(t), l, "release@example.com", "https://issuer.example.com", repo, digest, nb, na), "leaf certificate verification failed"},
		{mk(ca, cosigner.NewLog(t), "release@example.com", "https://issuer.example.com", repo, digest, nb, na), "not enough verified log entries"},
		{mk(ca, l, "release@example.com", "https://issuer.example.com", repo, digest, onb, ona), "integrated time outside certificate validity"},
		{mk(ca, l, "release@example.com", "https://issuer.example.com", repo, other, nb, na), "digest mismatch: the signature is for " + other},
		{mk(ca, l, "release@example.com", "https://issuer.example.com", "registry.example.com/kpt-fn/evil", digest, nb, na), "identity mismatch: the signature names registry.example.com/kpt-fn/evil"},
		// a signature under another name says how to sign a mirror's copy
		{mk(ca, l, "release@example.com", "https://issuer.example.com", "registry.example.com/kpt-fn/evil", digest, nb, na), "cosign sign --sign-container-identity " + repo},
	}
	for _, c := range cases {
		if d := p.Evaluate(repo+":v1", digest, bundle(c.b)); d.Allowed || !strings.Contains(d.Reason, c.want) {
			t.Errorf("want a refusal naming %q, got %+v", c.want, d)
		}
	}
}

// A key-signed bundle under a policy with a rekor key needs its log entry.
func TestKeyBundleWithRekor(t *testing.T) {
	k, l := cosigner.NewKey(t), cosigner.NewLog(t)
	p := mustParse(t, rekorPolicy(k, l))
	bundle := func(b []byte) []signature.Signature { return []signature.Signature{{Bundle: b}} }
	if d := p.Evaluate(repo+":v1", digest, bundle(k.BundleLogged(t, l, repo, digest, time.Now()))); !d.Allowed {
		t.Fatal(d.Error())
	}
	for want, b := range map[string][]byte{
		"not enough verified log entries": k.Bundle(t, repo, digest),
		"log entries":                     k.BundleLogged(t, cosigner.NewLog(t), repo, digest, time.Now()),
	} {
		if d := p.Evaluate(repo+":v1", digest, bundle(b)); d.Allowed || !strings.Contains(d.Reason, want) {
			t.Errorf("want a refusal naming %q, got %+v", want, d)
		}
	}
}
