package signature

import (
	"crypto"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
)

// verifyBundle checks a sigstore bundle (cosign's OCI 1.1 referrer form):
// sigstore-go verifies the DSSE envelope's signature with the policy's key
// (or a certificate from its Fulcio CA, for its issuer and email, at the
// log's time) and, with rekor keys, the transparency-log entry; then the
// verified in-toto statement must have a subject with exactly this digest,
// whose name satisfies signedIdentity. A bundle with a bare message
// signature, or a subject without a name (cosign's --new-bundle-format),
// names no image and never satisfies.
func (q requirement) verifyBundle(intended ref, digest string, raw []byte) failure {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return failure{rankMalformed, fmt.Sprintf("malformed sigstore bundle: %v", err)}
	}
	if env, err := b.Envelope(); err != nil || env == nil {
		return failure{rankMalformed, "sigstore bundle without a DSSE in-toto statement (a bare message signature names no image)"}
	}
	var opts []verify.VerifierOption
	if len(q.rekor) > 0 {
		opts = append(opts, verify.WithTransparencyLog(1), verify.WithIntegratedTimestamps(1))
	} else {
		opts = append(opts, verify.WithNoObserverTimestamps())
	}
	var id verify.PolicyOption
	if q.fulcio != nil {
		ci, err := verify.NewShortCertificateIdentity(q.fulcio.oidcIssuer, "", q.fulcio.subjectEmail, "")
		if err != nil {
			return failure{rankMalformed, err.Error()}
		}
		id = verify.WithCertificateIdentity(ci)
	} else {
		id = verify.WithKey()
	}
	var res *verify.VerificationResult
	var lastErr error
	for _, tm := range q.trustedMaterials() {
		v, err := verify.NewVerifier(tm, opts...)
		if err != nil {
			return failure{rankMalformed, err.Error()}
		}
		if res, lastErr = v.Verify(&b, verify.NewPolicy(verify.WithoutArtifactUnsafe(), id)); lastErr == nil {
			break
		}
	}
	if lastErr != nil || res == nil {
		msg := fmt.Sprint(lastErr)
		switch {
		case strings.Contains(msg, "certificate identity") || strings.Contains(msg, "no matching CertificateIdentity"):
			return failure{rankIdentity, "identity mismatch: the bundle's certificate is not for the policy's issuer and email (" + msg + ")"}
		case strings.Contains(msg, "tlog") || strings.Contains(msg, "transparency") || strings.Contains(msg, "timestamp"):
			return failure{rankCertOrLog, "sigstore bundle: " + msg}
		case strings.Contains(msg, "certificate"):
			return failure{rankCertOrLog, "sigstore bundle: " + msg}
		}
		return failure{rankWrongKey, "wrong key: the sigstore bundle does not verify with the policy's key (signed by another key, or the bundle was altered): " + msg}
	}
	if res.Statement == nil {
		return failure{rankMalformed, "sigstore bundle without an in-toto statement"}
	}
	want := strings.TrimPrefix(digest, "sha256:")
	var names []string
	for _, s := range res.Statement.GetSubject() {
		if s.GetDigest()["sha256"] == want {
			names = append(names, s.GetName())
		}
	}
	if len(names) == 0 {
		var got []string
		for _, s := range res.Statement.GetSubject() {
			got = append(got, "sha256:"+s.GetDigest()["sha256"])
		}
		return failure{rankDigest, "digest mismatch: the signature is for " + orNone(strings.Join(got, ", "))}
	}
	best := failure{rankMalformed, "no subject"}
	for _, n := range names {
		f := checkIdentity(q.identity, intended, n)
		if n == "" {
			// cosign's --new-bundle-format (v2.6.5; cosign 3's default)
			// names the digest alone, no repository to hold to signedIdentity
			f = failure{rankIdentity, fmt.Sprintf("identity mismatch: the sigstore bundle names only the digest, no image, and %s wants %s; "+
				"sign in cosign's classic format (cosign sign --new-bundle-format=false), whose signature names the image", q.identity, intended)}
		}
		if f.rank == 0 {
			return f
		}
		if f.rank >= best.rank {
			best = f
		}
	}
	return best
}

// trustedMaterials is what sigstore-go verifies a bundle against: one
// material per policy key (a bundle names its key only by a hint), or the
// Fulcio CA; each with the policy's rekor logs.
func (q requirement) trustedMaterials() []root.TrustedMaterial {
	logs := map[string]*root.TransparencyLog{}
	for _, k := range q.rekor {
		id, _ := hex.DecodeString(k.logID)
		// the policy bounds a log key in no time: valid since the epoch
		logs[k.logID] = &root.TransparencyLog{ID: id, HashFunc: crypto.SHA256, PublicKey: k.pub, SignatureHashFunc: crypto.SHA256, ValidityPeriodStart: time.Unix(0, 0)}
	}
	var cas []root.CertificateAuthority
	if q.fulcio != nil {
		for _, c := range q.fulcio.rootCerts {
			cas = append(cas, &root.FulcioCertificateAuthority{Root: c})
		}
	}
	base, err := root.NewTrustedRoot(root.TrustedRootMediaType01, cas, nil, nil, logs)
	if err != nil {
		return nil
	}
	if q.fulcio != nil {
		return []root.TrustedMaterial{base}
	}
	var out []root.TrustedMaterial
	for _, k := range q.keys {
		key := root.NewExpiringKey(k, time.Time{}, time.Time{})
		pk := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
		out = append(out, root.TrustedMaterialCollection{pk, base})
	}
	return out
}
