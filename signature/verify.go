package signature

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
)

// Signature is one signature of an image as cosign stores it, in one of its
// two forms. The fields are what the registry sent: never trusted.
type Signature struct {
	// Classic form (a layer of the sha256-<hex>.sig tag's manifest): the
	// simple-signing payload (the layer), the raw signature over it
	// (dev.cosignproject.cosign/signature, base64-decoded), and the
	// certificate, chain and Rekor bundle annotations (PEM, PEM, JSON; empty
	// when absent).
	Payload, Sig, Certificate, Chain, RekorBundle []byte
	// Bundle is a sigstore bundle (v0.3 JSON), as an OCI 1.1 referrer carries it.
	Bundle []byte
}

// Decision is the policy's verdict on one image digest.
type Decision struct {
	Allowed bool
	// Image is the logical reference (the name in the Kptfile), Digest the
	// manifest digest that was checked and is the one to run.
	Image, Digest string
	// Scope is the policy entry that applied: `default` or
	// `transports.docker["SCOPE"]`.
	Scope string
	// Reason says, on a refusal, what was found.
	Reason string
	// Signatures counts the signatures considered.
	Signatures int
}

// Error is the one-line refusal: image, digest, scope and what was found.
func (d Decision) Error() string {
	if d.Digest == "" || strings.HasSuffix(d.Image, "@"+d.Digest) {
		// not resolved yet, or named by its digest already
		return fmt.Sprintf("%s: refused by the signature policy (%s): %s", d.Image, d.Scope, d.Reason)
	}
	return fmt.Sprintf("%s@%s: refused by the signature policy (%s): %s", d.Image, d.Digest, d.Scope, d.Reason)
}

// Match returns the scope name and whether its requirements need signatures
// for image (a logical reference).
func (p *Policy) Match(image string) (scope string, needsSignatures bool, err error) {
	r, err := parseRef(image)
	if err != nil {
		return "", false, err
	}
	scope, reqs := p.match(r)
	for _, q := range reqs {
		if q.kind == "sigstoreSigned" {
			needsSignatures = true
		}
	}
	return scope, needsSignatures, nil
}

func (p *Policy) match(r ref) (string, []requirement) {
	for _, s := range r.scopes() {
		if reqs, ok := p.docker[s]; ok {
			return fmt.Sprintf("transports.docker[%q]", s), reqs
		}
	}
	if reqs, ok := p.docker[""]; ok {
		return `transports.docker[""]`, reqs
	}
	return "default", p.def
}

// Rejects reports, before the image is resolved, a refusal that no digest or
// signature can change: the scope that applies to image holds a reject
// requirement. The refusal's Digest is empty.
func (p *Policy) Rejects(image string) (Decision, bool) {
	r, err := parseRef(image)
	if err != nil {
		return Decision{}, false
	}
	scope, reqs := p.match(r)
	for _, q := range reqs {
		if q.kind == "reject" {
			return Decision{Image: image, Scope: scope, Reason: "the policy rejects every image here (reject)"}, true
		}
	}
	return Decision{}, false
}

// Evaluate decides whether image (the logical reference, as named in the
// Kptfile after the image prefix rule) may run at manifest digest, given the
// signatures found for it. Every requirement of the scope must hold; a
// sigstoreSigned requirement holds when at least one signature satisfies it.
func (p *Policy) Evaluate(image, digest string, sigs []Signature) Decision {
	d := Decision{Image: image, Digest: digest, Signatures: len(sigs)}
	r, err := parseRef(image)
	if err != nil {
		d.Scope, d.Reason = "default", err.Error()
		return d
	}
	var reqs []requirement
	d.Scope, reqs = p.match(r)
	for _, q := range reqs {
		switch q.kind {
		case "insecureAcceptAnything":
		case "reject":
			d.Reason = "the policy rejects every image here (reject)"
			return d
		case "sigstoreSigned":
			if why := q.satisfied(r, digest, sigs); why != "" {
				d.Reason = why
				return d
			}
		}
	}
	d.Allowed = true
	return d
}

// failure is why one signature did not satisfy a requirement; the one that
// got furthest (highest rank) is reported.
type failure struct {
	rank int
	why  string
}

const (
	rankMalformed = iota + 1
	rankWrongKey
	rankCertOrLog
	rankDigest
	rankIdentity
)

// satisfied returns "" when a signature satisfies q, else what was found.
func (q requirement) satisfied(intended ref, digest string, sigs []Signature) string {
	if len(sigs) == 0 {
		return "no signature (none found under the image's sha256-<digest>.sig tag or among its referrers)"
	}
	var best failure
	for _, s := range sigs {
		var f failure
		if len(s.Bundle) > 0 {
			f = q.verifyBundle(intended, digest, s.Bundle)
		} else {
			f = q.verifyClassic(intended, digest, s)
		}
		if f.rank == 0 {
			return ""
		}
		if f.rank > best.rank {
			best = f
		}
	}
	if len(sigs) > 1 {
		return fmt.Sprintf("%s (best of %d signatures)", best.why, len(sigs))
	}
	return best.why
}

// verifyClassic checks one signature in cosign's classic form.
func (q requirement) verifyClassic(intended ref, digest string, s Signature) failure {
	if len(s.Payload) == 0 || len(s.Sig) == 0 {
		return failure{rankMalformed, "malformed signature (no payload or no signature annotation)"}
	}
	var signerDER []byte // the signing key, to match a log entry
	var cert *x509.Certificate
	if q.fulcio == nil {
		for i, k := range q.keys {
			if k.VerifySignature(bytes.NewReader(s.Sig), bytes.NewReader(s.Payload)) == nil {
				signerDER = q.keyDER[i]
				break
			}
		}
		if signerDER == nil {
			return failure{rankWrongKey, "wrong key: no signature verifies with the policy's key (signed by another key, or the payload was altered)"}
		}
	} else {
		if len(s.Certificate) == 0 {
			return failure{rankWrongKey, "wrong key: the signature carries no Fulcio certificate (a key-signed image under a fulcio policy)"}
		}
		certs, err := cryptoutils.UnmarshalCertificatesFromPEM(s.Certificate)
		if err != nil || len(certs) != 1 {
			return failure{rankMalformed, "malformed signature certificate"}
		}
		cert = certs[0]
		v, err := sigsig.LoadVerifier(cert.PublicKey, crypto.SHA256)
		if err != nil || v.VerifySignature(bytes.NewReader(s.Sig), bytes.NewReader(s.Payload)) != nil {
			return failure{rankWrongKey, "wrong key: the signature does not verify with its certificate's key (the payload was altered)"}
		}
		signerDER = cert.Raw
	}
	var logTime time.Time
	if len(q.rekor) > 0 {
		t, err := q.checkRekorBundle(s, signerDER, cert != nil)
		if err != nil {
			if cert != nil && len(s.RekorBundle) == 0 && time.Now().After(cert.NotAfter) {
				return failure{rankCertOrLog, fmt.Sprintf("expired certificate without a log time (expired %s; no transparency-log entry)", cert.NotAfter.UTC().Format(time.RFC3339))}
			}
			return failure{rankCertOrLog, err.Error()}
		}
		logTime = t
	}
	if cert != nil {
		if f := q.fulcio.checkCertificate(cert, s.Chain, logTime); f.rank != 0 {
			return f
		}
	}
	return checkPayload(q.identity, intended, digest, s.Payload)
}

// checkPayload checks a simple-signing payload names digest and, per the
// identity rule, the intended image.
func checkPayload(id identityRule, intended ref, digest string, payload []byte) failure {
	var p struct {
		Critical struct {
			Identity struct {
				DockerReference string `json:"docker-reference"`
			} `json:"identity"`
			Image struct {
				DockerManifestDigest string `json:"docker-manifest-digest"`
			} `json:"image"`
			Type string `json:"type"`
		} `json:"critical"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return failure{rankMalformed, fmt.Sprintf("malformed signature payload: %v", err)}
	}
	if p.Critical.Type != "cosign container image signature" {
		return failure{rankMalformed, fmt.Sprintf("signature payload of type %q, not a cosign container image signature", p.Critical.Type)}
	}
	if p.Critical.Image.DockerManifestDigest != digest {
		return failure{rankDigest, fmt.Sprintf("digest mismatch: the signature is for %s", orNone(p.Critical.Image.DockerManifestDigest))}
	}
	return checkIdentity(id, intended, p.Critical.Identity.DockerReference)
}

func checkIdentity(id identityRule, intended ref, signedName string) failure {
	signed, err := parseRef(signedName)
	if err != nil {
		return failure{rankMalformed, fmt.Sprintf("malformed identity in the signature: %v", err)}
	}
	if !id.matches(intended, signed) {
		msg := fmt.Sprintf("identity mismatch: the signature names %s, and %s wants %s", signed, id, intended)
		if signed.repo != intended.repo {
			// the usual cause: a mirror's copy signed under the mirror's name
			msg += fmt.Sprintf("; a copy kept under another name (a mirror) is signed for the name the Kptfile uses: cosign sign --sign-container-identity %s", intended.repo)
		}
		return failure{rankIdentity, msg}
	}
	return failure{}
}

func orNone(s string) string {
	if s == "" {
		return "no digest"
	}
	return s
}

// checkRekorBundle verifies the classic Rekor bundle annotation: its signed
// entry timestamp under one of the policy's log keys, and that the entry it
// signs is a hashedrekord of this payload, this signature and this key (or
// certificate). It returns the entry's integrated time.
func (q requirement) checkRekorBundle(s Signature, signerDER []byte, isCert bool) (time.Time, error) {
	if len(s.RekorBundle) == 0 {
		return time.Time{}, errors.New("no transparency-log entry with the signature (the policy names a rekor key)")
	}
	var b struct {
		SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
		Payload              struct {
			Body           string `json:"body"`
			IntegratedTime int64  `json:"integratedTime"`
			LogIndex       int64  `json:"logIndex"`
			LogID          string `json:"logID"`
		} `json:"Payload"`
	}
	if err := json.Unmarshal(s.RekorBundle, &b); err != nil {
		return time.Time{}, fmt.Errorf("malformed transparency-log bundle: %v", err)
	}
	idx := slices.IndexFunc(q.rekor, func(k rekorKey) bool { return k.logID == b.Payload.LogID })
	if idx < 0 {
		return time.Time{}, fmt.Errorf("transparency-log entry from a log the policy does not trust (log ID %.16s…)", b.Payload.LogID)
	}
	raw, err := json.Marshal(map[string]any{"body": b.Payload.Body, "integratedTime": b.Payload.IntegratedTime, "logIndex": b.Payload.LogIndex, "logID": b.Payload.LogID})
	if err != nil {
		return time.Time{}, err
	}
	canon, err := jsoncanonicalizer.Transform(raw)
	if err != nil {
		return time.Time{}, err
	}
	if err := q.rekor[idx].verifier.VerifySignature(bytes.NewReader(b.SignedEntryTimestamp), bytes.NewReader(canon)); err != nil {
		return time.Time{}, errors.New("transparency-log entry not signed by the policy's rekor key (altered bundle)")
	}
	body, err := base64.StdEncoding.DecodeString(b.Payload.Body)
	if err != nil {
		return time.Time{}, errors.New("malformed transparency-log entry body")
	}
	var e struct {
		Kind string `json:"kind"`
		Spec struct {
			Data struct {
				Hash struct {
					Algorithm string `json:"algorithm"`
					Value     string `json:"value"`
				} `json:"hash"`
			} `json:"data"`
			Signature struct {
				Content   []byte `json:"content"`
				PublicKey struct {
					Content []byte `json:"content"`
				} `json:"publicKey"`
			} `json:"signature"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Kind != "hashedrekord" {
		return time.Time{}, fmt.Errorf("transparency-log entry of kind %q, not hashedrekord", e.Kind)
	}
	sum := sha256.Sum256(s.Payload)
	if e.Spec.Data.Hash.Algorithm != "sha256" || e.Spec.Data.Hash.Value != hex.EncodeToString(sum[:]) {
		return time.Time{}, errors.New("transparency-log entry is for another payload")
	}
	if !bytes.Equal(e.Spec.Signature.Content, s.Sig) {
		return time.Time{}, errors.New("transparency-log entry is for another signature")
	}
	var logged []byte
	if isCert {
		certs, err := cryptoutils.UnmarshalCertificatesFromPEM(e.Spec.Signature.PublicKey.Content)
		if err == nil && len(certs) == 1 {
			logged = certs[0].Raw
		}
	} else if pub, err := cryptoutils.UnmarshalPEMToPublicKey(e.Spec.Signature.PublicKey.Content); err == nil {
		logged, _ = x509.MarshalPKIXPublicKey(pub)
	}
	if logged == nil || !bytes.Equal(logged, signerDER) {
		return time.Time{}, errors.New("transparency-log entry is for another key or certificate")
	}
	return time.Unix(b.Payload.IntegratedTime, 0), nil
}

// checkCertificate checks a Fulcio certificate chains to the policy's CA at
// the log time, for code signing, issued to the policy's OIDC issuer and
// email.
func (f *fulcio) checkCertificate(cert *x509.Certificate, chainPEM []byte, at time.Time) failure {
	if at.IsZero() {
		return failure{rankCertOrLog, "certificate without a log time"}
	}
	inter := x509.NewCertPool()
	if len(chainPEM) > 0 {
		chain, err := cryptoutils.UnmarshalCertificatesFromPEM(chainPEM)
		if err != nil {
			return failure{rankMalformed, "malformed certificate chain"}
		}
		for _, c := range chain {
			inter.AddCert(c)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: f.roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}); err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			return failure{rankCertOrLog, fmt.Sprintf("certificate not valid at the log time %s (valid %s to %s)", at.UTC().Format(time.RFC3339), cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))}
		}
		return failure{rankCertOrLog, fmt.Sprintf("certificate not issued by the policy's Fulcio CA: %v", err)}
	}
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return failure{rankMalformed, fmt.Sprintf("certificate: %v", err)}
	}
	emails := cert.EmailAddresses
	if sum.Extensions.Issuer != f.oidcIssuer || !slices.Contains(emails, f.subjectEmail) {
		return failure{rankIdentity, fmt.Sprintf("identity mismatch: the certificate is for %s from issuer %s, the policy wants %s from %s", strings.Join(emails, ","), orNone(sum.Extensions.Issuer), f.subjectEmail, f.oidcIssuer)}
	}
	return failure{}
}
