package signature

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Limits on what a policy may make kptr read: the policy file and each key or
// CA file it names.
const (
	maxPolicyBytes = 1 << 20
	maxKeyBytes    = 256 << 10
)

// Policy is a loaded signature policy.
type Policy struct {
	// Source is the file it was loaded from ("" when parsed from bytes).
	Source string
	// Hash is SHA-256 over the policy and every key and CA it read (hex).
	Hash string

	def    []requirement
	docker map[string][]requirement
}

// LoadError is a policy that cannot be used: unreadable, malformed, or
// naming a field or requirement kptr does not implement. It is a usage error
// (exit 2).
type LoadError struct {
	Source string
	Err    error
}

func (e *LoadError) Error() string {
	if e.Source == "" {
		return "signature policy: " + e.Err.Error()
	}
	return "signature policy " + e.Source + ": " + e.Err.Error()
}
func (e *LoadError) Unwrap() error { return e.Err }

// ExitCode is 2: the operator's input is wrong.
func (e *LoadError) ExitCode() int { return 2 }

// Load reads and checks the policy file at path. Relative key and CA paths in
// it are relative to the file's directory.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &LoadError{Source: path, Err: err}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPolicyBytes+1))
	if err != nil {
		return nil, &LoadError{Source: path, Err: err}
	}
	if len(b) > maxPolicyBytes {
		return nil, &LoadError{Source: path, Err: fmt.Errorf("larger than %d bytes", maxPolicyBytes)}
	}
	abs, _ := filepath.Abs(path)
	p, err := Parse(b, filepath.Dir(abs))
	if err != nil {
		var le *LoadError
		if errors.As(err, &le) {
			le.Source = path
		}
		return nil, err
	}
	p.Source = path
	return p, nil
}

// Parse checks a policy document; baseDir resolves relative paths in it.
func Parse(data []byte, baseDir string) (*Policy, error) {
	ld := &loader{base: baseDir, hash: sha256.New()}
	ld.add([]byte("kptr signature policy v1"))
	ld.add(data)
	if err := checkDuplicateKeys(data); err != nil {
		return nil, &LoadError{Err: err}
	}
	p, err := ld.policy(data)
	if err != nil {
		return nil, &LoadError{Err: err}
	}
	p.Hash = hex.EncodeToString(ld.hash.Sum(nil))
	return p, nil
}

type loader struct {
	base string
	hash hash.Hash
}

// add hashes b, length first, so no two inputs hash alike.
func (ld *loader) add(b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	ld.hash.Write(n[:])
	ld.hash.Write(b)
}

// strict decodes b into v refusing unknown fields and trailing data; where
// names the object in errors.
func strict(b []byte, v any, where string) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("%s: field %s is not implemented by kptr (or misspelt)", where, f)
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	if d.More() {
		return fmt.Errorf("%s: trailing data", where)
	}
	return nil
}

func (ld *loader) policy(data []byte) (*Policy, error) {
	var top struct {
		Default    json.RawMessage                       `json:"default"`
		Transports map[string]map[string]json.RawMessage `json:"transports"`
	}
	if err := strict(data, &top, "policy"); err != nil {
		return nil, err
	}
	if top.Default == nil {
		return nil, errors.New(`"default" is missing (containers-policy.json requires it)`)
	}
	p := &Policy{docker: map[string][]requirement{}}
	var err error
	if p.def, err = ld.requirements(top.Default, "default"); err != nil {
		return nil, err
	}
	for _, t := range slices.Sorted(maps.Keys(top.Transports)) {
		// in order: each scope's keys are hashed as they are read
		for _, scope := range slices.Sorted(maps.Keys(top.Transports[t])) {
			raw := top.Transports[t][scope]
			where := fmt.Sprintf("transports.%s[%q]", t, scope)
			if t == "docker" {
				if err := checkDockerScope(scope); err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
			}
			reqs, err := ld.requirements(raw, where)
			if err != nil {
				return nil, err
			}
			if t == "docker" {
				p.docker[scope] = reqs
			}
		}
	}
	return p, nil
}

// checkDockerScope accepts what containers/image accepts as a docker scope:
// "" (the transport's default), *.domain, a registry host, a
// registry/namespace, a repository, or a repository with tag or digest.
func checkDockerScope(s string) error {
	if s == "" {
		return nil
	}
	if d, ok := strings.CutPrefix(s, "*."); ok {
		if d == "" || strings.ContainsAny(d, "/:@*") {
			return errors.New("a wildcard scope is *.DOMAIN")
		}
		return nil
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, " \t*") {
		return errors.New("not a registry, namespace, repository or image reference")
	}
	host, rest, _ := strings.Cut(s, "/")
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return fmt.Errorf("scope must start with a registry host (e.g. docker.io/%s)", s)
	}
	if rest == "" {
		if _, err := name.NewRegistry(host, name.StrictValidation); err != nil {
			return err
		}
		return nil
	}
	r, err := parseRef(s)
	if err != nil {
		return err
	}
	if r.String() != s {
		return fmt.Errorf("write the scope as %q (containers/image's full spelling)", r.String())
	}
	return nil
}

// requirement is one parsed policy requirement. Its key material is kept
// as DER, checked when the policy loads, for the verifier (helper.go).
type requirement struct {
	kind     string   // insecureAcceptAnything, reject, sigstoreSigned
	keyDER   [][]byte // PKIX DER of the keys
	fulcio   *fulcio
	rekor    [][]byte // PKIX DER of the rekor keys
	identity identityRule
}

type fulcio struct {
	rootDER      [][]byte
	oidcIssuer   string
	subjectEmail string
}

func (ld *loader) requirements(raw json.RawMessage, where string) ([]requirement, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s: want a list of requirements: %w", where, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: empty list of requirements (containers-policy.json forbids it; use insecureAcceptAnything or reject)", where)
	}
	out := make([]requirement, 0, len(list))
	for i, r := range list {
		req, err := ld.requirement(r, fmt.Sprintf("%s[%d]", where, i))
		if err != nil {
			return nil, err
		}
		out = append(out, req)
	}
	return out, nil
}

func (ld *loader) requirement(raw json.RawMessage, where string) (requirement, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return requirement{}, fmt.Errorf("%s: %w", where, err)
	}
	switch head.Type {
	case "insecureAcceptAnything", "reject":
		var v struct {
			Type string `json:"type"`
		}
		if err := strict(raw, &v, where); err != nil {
			return requirement{}, err
		}
		return requirement{kind: head.Type}, nil
	case "sigstoreSigned":
		return ld.sigstoreSigned(raw, where)
	case "signedBy":
		return requirement{}, fmt.Errorf("%s: requirement type signedBy (GPG signatures) is not implemented by kptr; use sigstoreSigned", where)
	case "signedBaseLayer":
		return requirement{}, fmt.Errorf("%s: requirement type signedBaseLayer is not implemented by kptr", where)
	case "":
		return requirement{}, fmt.Errorf("%s: requirement without a type", where)
	}
	return requirement{}, fmt.Errorf("%s: unknown requirement type %q", where, head.Type)
}

func (ld *loader) sigstoreSigned(raw json.RawMessage, where string) (requirement, error) {
	var v struct {
		Type                string          `json:"type"`
		KeyPath             string          `json:"keyPath"`
		KeyPaths            []string        `json:"keyPaths"`
		KeyData             []byte          `json:"keyData"`
		KeyDatas            [][]byte        `json:"keyDatas"`
		Fulcio              json.RawMessage `json:"fulcio"`
		RekorPublicKeyPath  string          `json:"rekorPublicKeyPath"`
		RekorPublicKeyPaths []string        `json:"rekorPublicKeyPaths"`
		RekorPublicKeyData  []byte          `json:"rekorPublicKeyData"`
		RekorPublicKeyDatas [][]byte        `json:"rekorPublicKeyDatas"`
		SignedIdentity      json.RawMessage `json:"signedIdentity"`
	}
	if err := strict(raw, &v, where); err != nil {
		if strings.Contains(err.Error(), `field "pki"`) {
			return requirement{}, fmt.Errorf("%s: field \"pki\" (X.509 certificates without Fulcio) is not implemented by kptr", where)
		}
		return requirement{}, err
	}
	r := requirement{kind: "sigstoreSigned"}
	var keyPEMs [][]byte
	if n := btoi(v.KeyPath != "") + btoi(v.KeyPaths != nil) + btoi(v.KeyData != nil) + btoi(v.KeyDatas != nil) + btoi(v.Fulcio != nil); n != 1 {
		return r, fmt.Errorf("%s: sigstoreSigned needs exactly one of keyPath, keyPaths, keyData, keyDatas or fulcio (got %d)", where, n)
	}
	if v.KeyPath != "" {
		b, err := ld.file(v.KeyPath, where+".keyPath")
		if err != nil {
			return r, err
		}
		keyPEMs = append(keyPEMs, b)
	}
	if v.KeyPaths != nil {
		if len(v.KeyPaths) == 0 {
			return r, fmt.Errorf("%s.keyPaths: empty", where)
		}
		for i, p := range v.KeyPaths {
			b, err := ld.file(p, fmt.Sprintf("%s.keyPaths[%d]", where, i))
			if err != nil {
				return r, err
			}
			keyPEMs = append(keyPEMs, b)
		}
	}
	if v.KeyData != nil {
		ld.add(v.KeyData)
		keyPEMs = append(keyPEMs, v.KeyData)
	}
	if v.KeyDatas != nil {
		if len(v.KeyDatas) == 0 {
			return r, fmt.Errorf("%s.keyDatas: empty", where)
		}
		for _, k := range v.KeyDatas {
			ld.add(k)
			keyPEMs = append(keyPEMs, k)
		}
	}
	if v.Fulcio != nil {
		f, err := ld.fulcio(v.Fulcio, where+".fulcio")
		if err != nil {
			return r, err
		}
		r.fulcio = f
	}
	for i, k := range keyPEMs {
		der, err := publicKeyDER(k)
		if err != nil {
			return r, fmt.Errorf("%s: key %d: %w", where, i+1, err)
		}
		r.keyDER = append(r.keyDER, der)
	}
	var rekorPEMs [][]byte
	rekorSources := 0
	if v.RekorPublicKeyPath != "" {
		rekorSources++
		b, err := ld.file(v.RekorPublicKeyPath, where+".rekorPublicKeyPath")
		if err != nil {
			return r, err
		}
		rekorPEMs = append(rekorPEMs, b)
	}
	if v.RekorPublicKeyPaths != nil {
		rekorSources++
		if len(v.RekorPublicKeyPaths) == 0 {
			return r, fmt.Errorf("%s.rekorPublicKeyPaths: empty", where)
		}
		for i, p := range v.RekorPublicKeyPaths {
			b, err := ld.file(p, fmt.Sprintf("%s.rekorPublicKeyPaths[%d]", where, i))
			if err != nil {
				return r, err
			}
			rekorPEMs = append(rekorPEMs, b)
		}
	}
	if v.RekorPublicKeyData != nil {
		rekorSources++
		ld.add(v.RekorPublicKeyData)
		rekorPEMs = append(rekorPEMs, v.RekorPublicKeyData)
	}
	if v.RekorPublicKeyDatas != nil {
		rekorSources++
		if len(v.RekorPublicKeyDatas) == 0 {
			return r, fmt.Errorf("%s.rekorPublicKeyDatas: empty", where)
		}
		for _, k := range v.RekorPublicKeyDatas {
			ld.add(k)
			rekorPEMs = append(rekorPEMs, k)
		}
	}
	if rekorSources > 1 {
		return r, fmt.Errorf("%s: give at most one of rekorPublicKeyPath, rekorPublicKeyPaths, rekorPublicKeyData, rekorPublicKeyDatas", where)
	}
	if r.fulcio != nil && rekorSources == 0 {
		return r, fmt.Errorf("%s: fulcio needs a rekor public key (rekorPublicKeyPath or rekorPublicKeyData): a certificate is checked at the log's time", where)
	}
	for i, k := range rekorPEMs {
		der, err := publicKeyDER(k)
		if err != nil {
			return r, fmt.Errorf("%s: rekor key %d: %w", where, i+1, err)
		}
		r.rekor = append(r.rekor, der)
	}
	id, err := parseIdentity(v.SignedIdentity, where+".signedIdentity")
	if err != nil {
		return r, err
	}
	r.identity = id
	return r, nil
}

func (ld *loader) fulcio(raw json.RawMessage, where string) (*fulcio, error) {
	var v struct {
		CAPath       string `json:"caPath"`
		CAData       []byte `json:"caData"`
		OIDCIssuer   string `json:"oidcIssuer"`
		SubjectEmail string `json:"subjectEmail"`
	}
	if err := strict(raw, &v, where); err != nil {
		return nil, err
	}
	var pemBytes []byte
	switch {
	case v.CAPath != "" && v.CAData != nil:
		return nil, fmt.Errorf("%s: give caPath or caData, not both", where)
	case v.CAPath != "":
		b, err := ld.file(v.CAPath, where+".caPath")
		if err != nil {
			return nil, err
		}
		pemBytes = b
	case v.CAData != nil:
		ld.add(v.CAData)
		pemBytes = v.CAData
	default:
		return nil, fmt.Errorf("%s: caPath or caData is required", where)
	}
	if v.OIDCIssuer == "" {
		return nil, fmt.Errorf("%s: oidcIssuer is required", where)
	}
	if v.SubjectEmail == "" {
		return nil, fmt.Errorf("%s: subjectEmail is required", where)
	}
	certs, err := certificatesDER(pemBytes)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificates in the CA (%v)", where, err)
	}
	return &fulcio{rootDER: certs, oidcIssuer: v.OIDCIssuer, subjectEmail: v.SubjectEmail}, nil
}

// publicKeyDER reads a PEM public key (PKIX, or PKCS #1 for RSA) of a kind
// cosign signs with (ECDSA, RSA, Ed25519) and returns it as PKIX DER.
func publicKeyDER(pemBytes []byte) ([]byte, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("PEM decoding failed")
	}
	var pub any
	var err error
	switch b.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(b.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(b.Bytes)
	default:
		return nil, fmt.Errorf("PEM block of type %q, not a PUBLIC KEY", b.Type)
	}
	if err != nil {
		return nil, err
	}
	switch pub.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey, ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("unsupported public key type %T", pub)
	}
	return x509.MarshalPKIXPublicKey(pub)
}

// certificatesDER reads the certificates of a PEM file, checking each parses.
func certificatesDER(pemBytes []byte) ([][]byte, error) {
	var out [][]byte
	for rest := bytes.TrimSpace(pemBytes); len(rest) > 0; rest = bytes.TrimSpace(rest) {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, errors.New("not PEM")
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, err
		}
		out = append(out, b.Bytes)
	}
	return out, nil
}

// file reads a key or CA file named by the policy, bounded, and hashes it in.
func (ld *loader) file(p, where string) ([]byte, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(ld.base, p)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(b) > maxKeyBytes {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes", where, p, maxKeyBytes)
	}
	ld.add([]byte(p))
	ld.add(b)
	return b, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Describe lists the policy's scopes and their requirements, one line each,
// most specific scope first ("default" last), for kptr doctor.
func (p *Policy) Describe() []string {
	scopes := make([]string, 0, len(p.docker))
	for s := range p.docker {
		scopes = append(scopes, s)
	}
	// longer scopes are more specific; "" (the transport's default) sorts last
	sort.Slice(scopes, func(i, j int) bool {
		if len(scopes[i]) != len(scopes[j]) {
			return len(scopes[i]) > len(scopes[j])
		}
		return scopes[i] < scopes[j]
	})
	var out []string
	for _, s := range scopes {
		out = append(out, fmt.Sprintf("transports.docker[%q]: %s", s, describe(p.docker[s])))
	}
	return append(out, "default: "+describe(p.def))
}

func describe(reqs []requirement) string {
	var parts []string
	for _, r := range reqs {
		switch {
		case r.kind != "sigstoreSigned":
			parts = append(parts, r.kind)
		case r.fulcio != nil:
			parts = append(parts, fmt.Sprintf("sigstoreSigned (Fulcio: %s from %s; %d rekor key(s); %s)", r.fulcio.subjectEmail, r.fulcio.oidcIssuer, len(r.rekor), r.identity))
		default:
			parts = append(parts, fmt.Sprintf("sigstoreSigned (%d key(s); %d rekor key(s); %s)", len(r.keyDER), len(r.rekor), r.identity))
		}
	}
	return strings.Join(parts, " and ")
}
