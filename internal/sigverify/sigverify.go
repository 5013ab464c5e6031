// Package sigverify is the cryptography of kptr's signature verifier, the
// kptr-sigverify program: whether one cosign signature verifies with a
// sigstoreSigned requirement's keys, certificate authority and
// transparency-log keys. It links sigstore-go, whose dependencies cost
// every process that links them milliseconds and megabytes at start-up;
// only kptr-sigverify does, and kptr starts it only when a signature must
// be checked (package signature, protocol in internal/sigwire).
//
// Verify is a pure function of its request. A classic signature verifies
// when its signature over its payload holds with a policy key or its
// Fulcio certificate's key, its Rekor bundle (with rekor keys) is signed by
// a policy log key and records this payload, signature and key, and its
// certificate chains to the policy's CA at the log's time for the policy's
// issuer and email. A bundle verifies when sigstore-go verifies its DSSE
// envelope and log entries alike; its statement's subjects are returned.
// The payload's digest and identity are the caller's to check.
package sigverify

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"

	"github.com/kptr-dev/kptr/internal/sigwire"
)

// Serve answers requests from r on w, one line each, until r ends.
func Serve(r io.Reader, w io.Writer) error {
	in := bufio.NewReaderSize(r, 64<<10)
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	for {
		line, err := sigwire.ReadLine(in)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading a request: %w", err)
		}
		var req sigwire.Request
		var resp sigwire.Response
		switch err := json.Unmarshal(line, &req); {
		case err != nil:
			resp.Error = fmt.Sprintf("undecodable request: %v", err)
		case req.Proto != sigwire.Proto:
			resp.Error = fmt.Sprintf("kptr speaks %q, this verifier %q: install the kptr-sigverify of the same kptr version", req.Proto, sigwire.Proto)
		default:
			resp = Verify(req)
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// requirement is a request's key material, parsed.
type requirement struct {
	keys   []sigsig.Verifier
	keyDER [][]byte
	fulcio *fulcio
	rekor  []rekorKey
}

type fulcio struct {
	roots        *x509.CertPool
	rootCerts    []*x509.Certificate
	oidcIssuer   string
	subjectEmail string
}

type rekorKey struct {
	verifier sigsig.Verifier
	pub      crypto.PublicKey
	logID    string // hex SHA-256 of the key's PKIX DER, as Rekor names its log
}

// failure is why a signature did not verify.
type failure struct {
	rank int
	why  string
}

func (f failure) response() sigwire.Response { return sigwire.Response{Rank: f.rank, Why: f.why} }

// Verify answers one request.
func Verify(req sigwire.Request) sigwire.Response {
	q, err := parse(req)
	if err != nil {
		return sigwire.Response{Error: err.Error()}
	}
	if len(req.Signature.Bundle) > 0 {
		subjects, f := q.verifyBundle(req.Signature.Bundle)
		if f.rank != 0 {
			return f.response()
		}
		return sigwire.Response{Subjects: subjects}
	}
	return q.verifyClassic(req.Signature).response()
}

// parse reads the key material kptr's policy loader has already checked.
func parse(req sigwire.Request) (requirement, error) {
	var q requirement
	for i, der := range req.Keys {
		v, err := verifier(der)
		if err != nil {
			return q, fmt.Errorf("key %d: %w", i+1, err)
		}
		q.keys = append(q.keys, v)
		q.keyDER = append(q.keyDER, der)
	}
	for i, der := range req.Rekor {
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return q, fmt.Errorf("rekor key %d: %w", i+1, err)
		}
		v, err := sigsig.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return q, fmt.Errorf("rekor key %d: %w", i+1, err)
		}
		sum := sha256.Sum256(der)
		q.rekor = append(q.rekor, rekorKey{verifier: v, pub: pub, logID: hex.EncodeToString(sum[:])})
	}
	if f := req.Fulcio; f != nil {
		q.fulcio = &fulcio{roots: x509.NewCertPool(), oidcIssuer: f.OIDCIssuer, subjectEmail: f.SubjectEmail}
		for _, der := range f.Roots {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return q, fmt.Errorf("fulcio CA: %w", err)
			}
			q.fulcio.roots.AddCert(c)
			q.fulcio.rootCerts = append(q.fulcio.rootCerts, c)
		}
	}
	return q, nil
}

func verifier(der []byte) (sigsig.Verifier, error) {
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, err
	}
	return sigsig.LoadVerifier(pub, crypto.SHA256)
}

// verifyClassic checks one signature in cosign's classic form, all but its
// payload's digest and identity.
func (q requirement) verifyClassic(s sigwire.Signature) failure {
	if len(s.Payload) == 0 || len(s.Sig) == 0 {
		return failure{sigwire.RankMalformed, "malformed signature (no payload or no signature annotation)"}
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
			return failure{sigwire.RankWrongKey, "wrong key: no signature verifies with the policy's key (signed by another key, or the payload was altered)"}
		}
	} else {
		if len(s.Certificate) == 0 {
			return failure{sigwire.RankWrongKey, "wrong key: the signature carries no Fulcio certificate (a key-signed image under a fulcio policy)"}
		}
		certs, err := cryptoutils.UnmarshalCertificatesFromPEM(s.Certificate)
		if err != nil || len(certs) != 1 {
			return failure{sigwire.RankMalformed, "malformed signature certificate"}
		}
		cert = certs[0]
		v, err := sigsig.LoadVerifier(cert.PublicKey, crypto.SHA256)
		if err != nil || v.VerifySignature(bytes.NewReader(s.Sig), bytes.NewReader(s.Payload)) != nil {
			return failure{sigwire.RankWrongKey, "wrong key: the signature does not verify with its certificate's key (the payload was altered)"}
		}
		signerDER = cert.Raw
	}
	var logTime time.Time
	if len(q.rekor) > 0 {
		t, err := q.checkRekorBundle(s, signerDER, cert != nil)
		if err != nil {
			if cert != nil && len(s.RekorBundle) == 0 && time.Now().After(cert.NotAfter) {
				return failure{sigwire.RankCertOrLog, fmt.Sprintf("expired certificate without a log time (expired %s; no transparency-log entry)", cert.NotAfter.UTC().Format(time.RFC3339))}
			}
			return failure{sigwire.RankCertOrLog, err.Error()}
		}
		logTime = t
	}
	if cert != nil {
		return q.fulcio.checkCertificate(cert, s.Chain, logTime)
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
func (q requirement) checkRekorBundle(s sigwire.Signature, signerDER []byte, isCert bool) (time.Time, error) {
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
		return failure{sigwire.RankCertOrLog, "certificate without a log time"}
	}
	inter := x509.NewCertPool()
	if len(chainPEM) > 0 {
		chain, err := cryptoutils.UnmarshalCertificatesFromPEM(chainPEM)
		if err != nil {
			return failure{sigwire.RankMalformed, "malformed certificate chain"}
		}
		for _, c := range chain {
			inter.AddCert(c)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: f.roots, Intermediates: inter, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}); err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			return failure{sigwire.RankCertOrLog, fmt.Sprintf("certificate not valid at the log time %s (valid %s to %s)", at.UTC().Format(time.RFC3339), cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))}
		}
		return failure{sigwire.RankCertOrLog, fmt.Sprintf("certificate not issued by the policy's Fulcio CA: %v", err)}
	}
	sum, err := certificate.SummarizeCertificate(cert)
	if err != nil {
		return failure{sigwire.RankMalformed, fmt.Sprintf("certificate: %v", err)}
	}
	emails := cert.EmailAddresses
	if sum.Extensions.Issuer != f.oidcIssuer || !slices.Contains(emails, f.subjectEmail) {
		return failure{sigwire.RankIdentity, fmt.Sprintf("identity mismatch: the certificate is for %s from issuer %s, the policy wants %s from %s", strings.Join(emails, ","), orNone(sum.Extensions.Issuer), f.subjectEmail, f.oidcIssuer)}
	}
	return failure{}
}
