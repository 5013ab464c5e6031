package sigverify

import (
	"crypto"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/kptr-dev/kptr/internal/sigwire"
)

// verifyBundle checks a sigstore bundle (cosign's OCI 1.1 referrer form):
// sigstore-go verifies the DSSE envelope's signature with the policy's key
// (or a certificate from its Fulcio CA, for its issuer and email, at the
// log's time) and, with rekor keys, the transparency-log entry. It returns
// the verified in-toto statement's subjects; which of them must name the
// digest and the image is the caller's rule (a subject without a name,
// cosign's --new-bundle-format, never satisfies it). A bundle with a bare
// message signature names no image and never verifies.
func (q requirement) verifyBundle(raw []byte) ([]sigwire.Subject, failure) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return nil, failure{sigwire.RankMalformed, fmt.Sprintf("malformed sigstore bundle: %v", err)}
	}
	if env, err := b.Envelope(); err != nil || env == nil {
		return nil, failure{sigwire.RankMalformed, "sigstore bundle without a DSSE in-toto statement (a bare message signature names no image)"}
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
			return nil, failure{sigwire.RankMalformed, err.Error()}
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
			return nil, failure{sigwire.RankMalformed, err.Error()}
		}
		if res, lastErr = v.Verify(&b, verify.NewPolicy(verify.WithoutArtifactUnsafe(), id)); lastErr == nil {
			break
		}
	}
	if lastErr != nil || res == nil {
		msg := fmt.Sprint(lastErr)
		switch {
		case strings.Contains(msg, "certificate identity") || strings.Contains(msg, "no matching CertificateIdentity"):
			return nil, failure{sigwire.RankIdentity, "identity mismatch: the bundle's certificate is not for the policy's issuer and email (" + msg + ")"}
		case strings.Contains(msg, "tlog") || strings.Contains(msg, "transparency") || strings.Contains(msg, "timestamp"):
			return nil, failure{sigwire.RankCertOrLog, "sigstore bundle: " + msg}
		case strings.Contains(msg, "certificate"):
			return nil, failure{sigwire.RankCertOrLog, "sigstore bundle: " + msg}
		}
		return nil, failure{sigwire.RankWrongKey, "wrong key: the sigstore bundle does not verify with the policy's key (signed by another key, or the bundle was altered): " + msg}
	}
	if res.Statement == nil {
		return nil, failure{sigwire.RankMalformed, "sigstore bundle without an in-toto statement"}
	}
	var out []sigwire.Subject
	for _, s := range res.Statement.GetSubject() {
		out = append(out, sigwire.Subject{Name: s.GetName(), SHA256: s.GetDigest()["sha256"]})
	}
	return out, failure{}
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
