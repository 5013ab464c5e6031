// Package sigwire is the protocol between kptr (package signature) and its
// signature verifier, the kptr-sigverify program installed beside it. The
// verifier holds the cryptography (sigstore-go and its dependencies, whose
// package initialisers would otherwise run at every kptr start); kptr keeps
// the policy, the scopes and the identity rules.
//
// kptr starts one verifier per run, at the first signature it must check,
// and writes one Request per signature to its standard input, each a JSON
// object on one line; the verifier answers each with one Response line on
// its standard output, in order. The first request names Proto: a verifier
// of another kptr version answers with an error instead of guessing. It
// exits at the end of its input. The package uses the standard library
// only, so that linking it costs kptr nothing at start-up.
package sigwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Name is the verifier program's file name, beside kptr or in
// ../libexec/kptr/ from it.
const Name = "kptr-sigverify"

// Proto names this protocol; a request of another is refused.
const Proto = "kptr-sigverify/1"

// MaxLine bounds one request or response line. A request holds the policy's
// key material and one signature (a payload or bundle of at most 1 MiB,
// base64 in JSON), so 8 MiB is ample.
const MaxLine = 8 << 20

// Ranks order how far a signature got before it failed a requirement; the
// failure that got furthest is the one reported. 0 is no failure.
const (
	RankMalformed = iota + 1
	RankWrongKey
	RankCertOrLog
	RankDigest
	RankIdentity
)

// Request asks whether one signature verifies with a requirement's keys.
type Request struct {
	Proto string `json:"proto"`
	// Keys are the requirement's public keys (PKIX DER); empty under Fulcio.
	Keys [][]byte `json:"keys,omitempty"`
	// Fulcio is the requirement's certificate authority, when it has one.
	Fulcio *Fulcio `json:"fulcio,omitempty"`
	// Rekor are the transparency-log keys (PKIX DER) whose entry the
	// signature must carry; none: no log entry is needed.
	Rekor [][]byte `json:"rekor,omitempty"`
	// Signature is what the registry sent, untrusted, in one of cosign's
	// two forms (Bundle set: a sigstore bundle; else the classic form).
	Signature Signature `json:"signature"`
}

// Fulcio is a sigstoreSigned requirement's fulcio object.
type Fulcio struct {
	Roots        [][]byte `json:"roots"` // CA certificates, DER
	OIDCIssuer   string   `json:"oidcIssuer"`
	SubjectEmail string   `json:"subjectEmail"`
}

// Signature is signature.Signature on the wire.
type Signature struct {
	Payload     []byte `json:"payload,omitempty"`
	Sig         []byte `json:"sig,omitempty"`
	Certificate []byte `json:"certificate,omitempty"`
	Chain       []byte `json:"chain,omitempty"`
	RekorBundle []byte `json:"rekorBundle,omitempty"`
	Bundle      []byte `json:"bundle,omitempty"`
}

// Response is the verifier's answer to one Request. Rank 0 means the
// signature verifies with the requirement's key material (and log and
// certificate authority); whether it names the digest and the image is
// kptr's to check: from the classic payload, which kptr has, or from
// Subjects, the in-toto statement a bundle proved.
type Response struct {
	Rank     int       `json:"rank,omitempty"`
	Why      string    `json:"why,omitempty"`
	Subjects []Subject `json:"subjects,omitempty"`
	// Error is set when the verifier could not serve the request at all
	// (another protocol, a request it cannot decode): not a verdict.
	Error string `json:"error,omitempty"`
}

// Subject is one subject of a verified in-toto statement.
type Subject struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// ReadLine reads one line (its newline included) of at most MaxLine bytes.
// A last line without its newline is io.ErrUnexpectedEOF; no line, io.EOF.
func ReadLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", MaxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return line, err
	}
}
