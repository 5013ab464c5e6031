// Package cosigner signs test images the way cosign does, with keys,
// certificate authorities and transparency-log keys the tests make, so that
// kptr's signature policy is tested against cosign's formats without cosign
// or the public Sigstore services.
//
//	k := cosigner.NewKey(t)
//	sig := k.Sign(cosigner.Payload(reg.Addr+"/kpt-fn/cat", digest))
//	cosigner.Push(t, reg.Addr+"/kpt-fn/cat", digest, sig)   // the sha256-<hex>.sig tag
//
// Formats (learnt from cosign's documentation and the signatures it pushes):
// a signature is one layer of an OCI manifest tagged sha256-<hex>.sig in the
// image's repository, of media type
// application/vnd.dev.cosign.simplesigning.v1+json, whose content is the
// simple-signing payload and whose annotations carry the base64 signature
// (dev.cosignproject.cosign/signature) and, for keyless signatures, the
// Fulcio certificate, its chain and the Rekor bundle (dev.sigstore.cosign/
// certificate, chain, bundle). The Rekor bundle's SignedEntryTimestamp is the
// log key's signature over the canonical JSON of its Payload.
package cosigner

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	rekorutil "github.com/sigstore/rekor/pkg/util"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
)

// SimpleSigningMediaType is the media type of a classic signature layer.
const SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"

// Key is an ECDSA P-256 key pair, as `cosign generate-key-pair` makes.
type Key struct {
	Priv      *ecdsa.PrivateKey
	PublicPEM []byte
}

// NewKey makes a key pair.
func NewKey(t testing.TB) *Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{Priv: priv, PublicPEM: publicPEM(t, &priv.PublicKey)}
}

func publicPEM(t testing.TB, pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Sig is one signature in cosign's classic form.
type Sig struct {
	Payload     []byte
	Signature   []byte
	Cert, Chain []byte // PEM; keyless only
	RekorBundle []byte // JSON; when logged
}

// Payload is cosign's simple-signing payload for digest, naming dockerRef
// (cosign names the repository, without tag) as the identity.
func Payload(dockerRef, digest string) []byte {
	b, _ := json.Marshal(map[string]any{
		"critical": map[string]any{
			"identity": map[string]string{"docker-reference": dockerRef},
			"image":    map[string]string{"docker-manifest-digest": digest},
			"type":     "cosign container image signature",
		},
		"optional": nil,
	})
	return b
}

// Sign signs payload (ECDSA over its SHA-256, ASN.1), as cosign does.
func (k *Key) Sign(payload []byte) Sig {
	sum := sha256.Sum256(payload)
	sig, err := ecdsa.SignASN1(rand.Reader, k.Priv, sum[:])
	if err != nil {
		panic(err)
	}
	return Sig{Payload: payload, Signature: sig}
}

// Image is the .sig manifest holding sigs, one layer each.
func Image(t testing.TB, sigs ...Sig) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, s := range sigs {
		ann := map[string]string{"dev.cosignproject.cosign/signature": base64.StdEncoding.EncodeToString(s.Signature)}
		if len(s.Cert) > 0 {
			ann["dev.sigstore.cosign/certificate"] = string(s.Cert)
			ann["dev.sigstore.cosign/chain"] = string(s.Chain)
		}
		if len(s.RekorBundle) > 0 {
			ann["dev.sigstore.cosign/bundle"] = string(s.RekorBundle)
		}
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(s.Payload, SimpleSigningMediaType), Annotations: ann})
		if err != nil {
			t.Fatal(err)
		}
	}
	return img
}

// Tag is the tag cosign signs digest under in repo.
func Tag(t testing.TB, repo string, digest string) name.Tag {
	t.Helper()
	h, err := v1.NewHash(digest)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(repo + ":" + h.Algorithm + "-" + h.Hex + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// Push writes sigs as the signatures of digest in repo (replacing any).
func Push(t testing.TB, repo, digest string, sigs ...Sig) {
	t.Helper()
	if err := remote.Write(Tag(t, repo, digest), Image(t, sigs...)); err != nil {
		t.Fatal(err)
	}
}

// Log is a transparency log's signing key: it makes Rekor bundles.
type Log struct {
	Key
	ID string // hex SHA-256 of the key's PKIX DER, as Rekor names its log
}

// NewLog makes a log key.
func NewLog(t testing.TB) *Log {
	k := NewKey(t)
	der, _ := x509.MarshalPKIXPublicKey(&k.Priv.PublicKey)
	sum := sha256.Sum256(der)
	return &Log{Key: *k, ID: hex.EncodeToString(sum[:])}
}

// Entry logs s (signed by the key or certificate signerPEM) at time at and
// returns s with its Rekor bundle: a hashedrekord entry and the log's
// signed entry timestamp over it.
func (l *Log) Entry(t testing.TB, s Sig, signerPEM []byte, at time.Time) Sig {
	t.Helper()
	sum := sha256.Sum256(s.Payload)
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "0.0.1", "kind": "hashedrekord",
		"spec": map[string]any{
			"data":      map[string]any{"hash": map[string]string{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
			"signature": map[string]any{"content": s.Signature, "publicKey": map[string]any{"content": signerPEM}},
		},
	})
	payload := map[string]any{"body": base64.StdEncoding.EncodeToString(body), "integratedTime": at.Unix(), "logIndex": 7, "logID": l.ID}
	raw, _ := json.Marshal(payload)
	canon, err := jsoncanonicalizer.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	cs := sha256.Sum256(canon)
	set, err := ecdsa.SignASN1(rand.Reader, l.Priv, cs[:])
	if err != nil {
		t.Fatal(err)
	}
	s.RekorBundle, _ = json.Marshal(map[string]any{"SignedEntryTimestamp": set, "Payload": payload})
	return s
}

// CA is a Fulcio-like certificate authority.
type CA struct {
	Cert *x509.Certificate
	Priv *ecdsa.PrivateKey
	PEM  []byte
}

// NewCA makes a self-signed root valid for a day around now.
func NewCA(t testing.TB) *CA {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kptr test fulcio"},
		NotBefore: time.Now().Add(-24 * time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, Priv: priv, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue makes a short-lived code-signing certificate for email, from OIDC
// issuer, valid from notBefore to notAfter, as Fulcio issues them.
func (ca *CA) Issue(t testing.TB, email, issuer string, notBefore, notAfter time.Time) (*Key, []byte) {
	t.Helper()
	k := NewKey(t)
	iss, _ := asn1.Marshal(asn1.RawValue{Tag: asn1.TagUTF8String, Bytes: []byte(issuer)})
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: notBefore, NotAfter: notAfter,
		EmailAddresses: []string{email}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage:     []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: iss}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &k.Priv.PublicKey, ca.Priv)
	if err != nil {
		t.Fatal(err)
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Keyless signs payload with a certificate from ca and logs it in l at at.
func Keyless(t testing.TB, ca *CA, l *Log, email, issuer string, payload []byte, at time.Time) Sig {
	t.Helper()
	k, certPEM := ca.Issue(t, email, issuer, at.Add(-time.Minute), at.Add(10*time.Minute))
	s := k.Sign(payload)
	s.Cert, s.Chain = certPEM, ca.PEM
	if l != nil {
		s = l.Entry(t, s, certPEM, at)
	}
	return s
}

// Tamper returns s with its payload altered in one byte.
func Tamper(s Sig) Sig {
	p := bytes.Clone(s.Payload)
	p[len(p)-2] ^= 0x01
	s.Payload = p
	return s
}

// BundleMediaType is a sigstore bundle v0.3, as a referrer's artifact type
// and layer media type.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// Bundle is a sigstore bundle v0.3 whose DSSE envelope, signed by k, holds
// an in-toto statement with one subject: name at digest (what cosign's
// bundle format signs for an image). Keyed: no log entry.
func (k *Key) Bundle(t testing.TB, name, digest string) []byte {
	t.Helper()
	return k.bundle(t, name, digest, map[string]any{"publicKey": map[string]string{"hint": ""}})
}

// KeylessBundle is Bundle signed with a certificate from ca for email and
// issuer, carrying the certificate and no transparency-log entry.
func KeylessBundle(t testing.TB, ca *CA, email, issuer, name, digest string) []byte {
	t.Helper()
	now := time.Now()
	k, certPEM := ca.Issue(t, email, issuer, now.Add(-time.Minute), now.Add(10*time.Minute))
	blk, _ := pem.Decode(certPEM)
	return k.bundle(t, name, digest, map[string]any{"certificate": map[string]string{"rawBytes": base64.StdEncoding.EncodeToString(blk.Bytes)}})
}

// KeylessBundleLogged is KeylessBundle with a transparency-log entry in l
// at time at, valid for the certificate from notBefore to notAfter: a dsse
// entry with its signed entry timestamp and an inclusion proof in a
// one-entry tree whose checkpoint l signs (what a bundle v0.3 carries).
func KeylessBundleLogged(t testing.TB, ca *CA, l *Log, email, issuer, name, digest string, at, notBefore, notAfter time.Time) []byte {
	t.Helper()
	k, certPEM := ca.Issue(t, email, issuer, notBefore, notAfter)
	blk, _ := pem.Decode(certPEM)
	raw := k.bundle(t, name, digest, map[string]any{"certificate": map[string]string{"rawBytes": base64.StdEncoding.EncodeToString(blk.Bytes)}})
	return l.logBundle(t, raw, certPEM, at)
}

// BundleLogged is Bundle with a transparency-log entry in l at time at.
func (k *Key) BundleLogged(t testing.TB, l *Log, name, digest string, at time.Time) []byte {
	t.Helper()
	return l.logBundle(t, k.Bundle(t, name, digest), k.PublicPEM, at)
}

// logBundle adds to a DSSE bundle its entry in l, logged with verifierPEM
// (the certificate or public key) at time at.
func (l *Log) logBundle(t testing.TB, raw, verifierPEM []byte, at time.Time) []byte {
	t.Helper()
	certPEM := verifierPEM
	var b map[string]any
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	env := b["dsseEnvelope"].(map[string]any)
	envJSON, _ := json.Marshal(env)
	payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	sig := env["signatures"].([]any)[0].(map[string]any)["sig"].(string)
	hexSum := func(p []byte) string { s := sha256.Sum256(p); return hex.EncodeToString(s[:]) }
	body, _ := json.Marshal(map[string]any{"apiVersion": "0.0.1", "kind": "dsse", "spec": map[string]any{
		"envelopeHash": map[string]string{"algorithm": "sha256", "value": hexSum(envJSON)},
		"payloadHash":  map[string]string{"algorithm": "sha256", "value": hexSum(payload)},
		"signatures":   []any{map[string]string{"signature": sig, "verifier": base64.StdEncoding.EncodeToString(certPEM)}},
	}})
	set := map[string]any{"body": base64.StdEncoding.EncodeToString(body), "integratedTime": at.Unix(), "logIndex": 0, "logID": l.ID}
	setJSON, _ := json.Marshal(set)
	canon, err := jsoncanonicalizer.Transform(setJSON)
	if err != nil {
		t.Fatal(err)
	}
	cs := sha256.Sum256(canon)
	setSig, err := ecdsa.SignASN1(rand.Reader, l.Priv, cs[:])
	if err != nil {
		t.Fatal(err)
	}
	leaf := sha256.Sum256(append([]byte{0}, body...))
	signer, err := sigsig.LoadECDSASigner(l.Priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	checkpoint, err := rekorutil.CreateAndSignCheckpoint(context.Background(), "rekor.test", 0, 1, leaf[:], signer)
	if err != nil {
		t.Fatal(err)
	}
	logID, _ := hex.DecodeString(l.ID)
	b["verificationMaterial"].(map[string]any)["tlogEntries"] = []any{map[string]any{
		"logIndex":          "0",
		"logId":             map[string]string{"keyId": base64.StdEncoding.EncodeToString(logID)},
		"kindVersion":       map[string]string{"kind": "dsse", "version": "0.0.1"},
		"integratedTime":    fmt.Sprint(at.Unix()),
		"inclusionPromise":  map[string]string{"signedEntryTimestamp": base64.StdEncoding.EncodeToString(setSig)},
		"inclusionProof":    map[string]any{"logIndex": "0", "rootHash": base64.StdEncoding.EncodeToString(leaf[:]), "treeSize": "1", "hashes": []string{}, "checkpoint": map[string]string{"envelope": string(checkpoint)}},
		"canonicalizedBody": base64.StdEncoding.EncodeToString(body),
	}}
	out, _ := json.Marshal(b)
	return out
}

func (k *Key) bundle(t testing.TB, name, digest string, material map[string]any) []byte {
	t.Helper()
	h, err := v1.NewHash(digest)
	if err != nil {
		t.Fatal(err)
	}
	stmt, _ := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": name, "digest": map[string]string{"sha256": h.Hex}}},
		"predicateType": "https://sigstore.dev/cosign/sign/v1",
		"predicate":     map[string]any{},
	})
	const payloadType = "application/vnd.in-toto+json"
	pae := []byte("DSSEv1 " + itoa(len(payloadType)) + " " + payloadType + " " + itoa(len(stmt)) + " " + string(stmt))
	sum := sha256.Sum256(pae)
	sig, err := ecdsa.SignASN1(rand.Reader, k.Priv, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{
		"mediaType":            BundleMediaType,
		"verificationMaterial": material,
		"dsseEnvelope": map[string]any{
			"payload":     base64.StdEncoding.EncodeToString(stmt),
			"payloadType": payloadType,
			"signatures":  []any{map[string]string{"sig": base64.StdEncoding.EncodeToString(sig)}},
		},
	})
	return b
}

func itoa(n int) string { return big.NewInt(int64(n)).String() }

// PushBundle attaches bundle to digest in repo as an OCI 1.1 referrer
// (go-containerregistry updates the referrers tag fallback on registries
// without the referrers API, as cosign does).
func PushBundle(t testing.TB, repo string, image v1.Descriptor, bundle []byte) {
	t.Helper()
	var err error
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.MediaType(BundleMediaType))
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(bundle, types.MediaType(BundleMediaType))})
	if err != nil {
		t.Fatal(err)
	}
	subject := mutate.Subject(img, v1.Descriptor{MediaType: image.MediaType, Digest: image.Digest, Size: image.Size}).(v1.Image)
	r, err := name.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	d, err := subject.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r.Digest(d.String()), subject); err != nil {
		t.Fatal(err)
	}
}

// TamperBundle changes one byte of a bundle's statement, keeping its signature.
func TamperBundle(t testing.TB, b []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	env := m["dsseEnvelope"].(map[string]any)
	p, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	p = bytes.Replace(p, []byte("cosign/sign"), []byte("cosign/sigN"), 1)
	env["payload"] = base64.StdEncoding.EncodeToString(p)
	out, _ := json.Marshal(m)
	return out
}
