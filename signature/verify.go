package signature

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kptr-dev/kptr/internal/sigwire"
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
	// Unverified is set (with Allowed false) when the signatures could not
	// be checked at all: kptr's signature verifier is missing or failed
	// (a *VerifierError, exit 3). The image is neither allowed nor refused.
	Unverified error
}

// Error is the one-line refusal: image, digest, scope and what was found.
func (d Decision) Error() string {
	if d.Unverified != nil {
		return d.Unverified.Error()
	}
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
			why, err := q.satisfied(&helper, r, digest, sigs)
			if err != nil {
				d.Unverified = &VerifierError{Image: image, Digest: digest, Err: err}
				d.Reason = err.Error()
				return d
			}
			if why != "" {
				d.Reason = why
				return d
			}
		}
	}
	d.Allowed = true
	return d
}

// failure is why one signature did not satisfy a requirement; the one that
// got furthest (highest sigwire rank) is reported.
type failure struct {
	rank int
	why  string
}

const (
	rankMalformed = sigwire.RankMalformed
	rankDigest    = sigwire.RankDigest
	rankIdentity  = sigwire.RankIdentity
)

// satisfied returns "" when a signature satisfies q, else what was found.
// The verifier checks each signature's cryptography; the digest and the
// identity it names are checked here. An error is a verifier that could
// not answer.
func (q requirement) satisfied(v *verifier, intended ref, digest string, sigs []Signature) (string, error) {
	if len(sigs) == 0 {
		return "no signature (none found under the image's sha256-<digest>.sig tag or among its referrers)", nil
	}
	var best failure
	for _, s := range sigs {
		resp, err := v.verify(q.request(s))
		if err != nil {
			return "", err
		}
		f := failure{resp.Rank, resp.Why}
		if f.rank == 0 {
			if len(s.Bundle) > 0 {
				f = checkSubjects(q.identity, intended, digest, resp.Subjects)
			} else {
				f = checkPayload(q.identity, intended, digest, s.Payload)
			}
		}
		if f.rank == 0 {
			return "", nil
		}
		if f.rank > best.rank {
			best = f
		}
	}
	if len(sigs) > 1 {
		return fmt.Sprintf("%s (best of %d signatures)", best.why, len(sigs)), nil
	}
	return best.why, nil
}

// request is what the verifier needs to check s against q.
func (q requirement) request(s Signature) sigwire.Request {
	req := sigwire.Request{Proto: sigwire.Proto, Keys: q.keyDER, Rekor: q.rekor, Signature: sigwire.Signature(s)}
	if q.fulcio != nil {
		req.Fulcio = &sigwire.Fulcio{Roots: q.fulcio.rootDER, OIDCIssuer: q.fulcio.oidcIssuer, SubjectEmail: q.fulcio.subjectEmail}
	}
	return req
}

// checkSubjects checks a verified bundle's statement has a subject with
// exactly this digest whose name satisfies the identity rule.
func checkSubjects(id identityRule, intended ref, digest string, subjects []sigwire.Subject) failure {
	want := strings.TrimPrefix(digest, "sha256:")
	var names []string
	for _, s := range subjects {
		if s.SHA256 == want {
			names = append(names, s.Name)
		}
	}
	if len(names) == 0 {
		var got []string
		for _, s := range subjects {
			got = append(got, "sha256:"+s.SHA256)
		}
		return failure{rankDigest, "digest mismatch: the signature is for " + orNone(strings.Join(got, ", "))}
	}
	best := failure{rankMalformed, "no subject"}
	for _, n := range names {
		f := checkIdentity(id, intended, n)
		if n == "" {
			// cosign's --new-bundle-format (v2.6.5; cosign 3's default)
			// names the digest alone, no repository to hold to signedIdentity
			f = failure{rankIdentity, fmt.Sprintf("identity mismatch: the sigstore bundle names only the digest, no image, and %s wants %s; "+
				"sign in cosign's classic format (cosign sign --new-bundle-format=false), whose signature names the image", id, intended)}
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
