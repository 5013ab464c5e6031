package memo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"strconv"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// FormatVersion is the version of the key encoding and of the record
// format. Changing either changes it: every earlier record then misses
// (its key differs, and its file's magic no longer matches).
const FormatVersion = 1

// Key names one memoised run: SHA-256 over everything that decides it.
type Key [sha256.Size]byte

// String is the key in hex, the record's file name.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Eligible reports whether a run of b with inv may be memoised: an image
// (a rootfs and a manifest digest; kpt exec functions have neither), no
// network, no mounts.
func Eligible(b bundle.Bundle, inv runtime.Invocation) bool {
	return b.Rootfs != "" && b.Digest.Algorithm == "sha256" && len(b.Digest.Hex) == 64 &&
		!inv.Network && len(inv.Mounts) == 0
}

// KeyOf computes the key of running b with inv on stdin. variant names
// what else the caller knows decides the outcome (the sandbox tier and its
// options); inv.Stdin is not read (stdin is passed separately). Every field
// is tagged and length-prefixed, so no two different inputs encode alike.
func KeyOf(b bundle.Bundle, inv runtime.Invocation, variant string, stdin []byte) Key {
	e := NewKey("run")
	e.Str("digest", b.Digest.String())
	if b.Wasm != "" {
		// a wasm function: its module (the digest names the image that holds it)
		e.Str("wasm", b.Wasm)
	}
	e.List("entrypoint", b.Config.Entrypoint)
	e.List("cmd", b.Config.Cmd)
	e.Str("workdir", b.Config.WorkingDir)
	e.Str("user", b.Config.User)
	e.List("image-env", b.Config.Env)
	e.List("env", inv.Env)
	e.Str("as-current-user", strconv.FormatBool(inv.AsCurrentUser))
	e.Str("max-output", strconv.FormatInt(inv.MaxOutput, 10))
	e.Str("variant", variant)
	e.Bytes("stdin", stdin)
	return e.Sum()
}

// KeyBuilder hashes tagged, length-prefixed fields into a Key: what a
// caller that memoises more than one run (a whole render) keys its record
// by. Keys of different kinds never collide.
type KeyBuilder struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

// NewKey starts a key of kind, under the current FormatVersion.
func NewKey(kind string) *KeyBuilder {
	e := &KeyBuilder{h: sha256.New()}
	e.Str("format", "kptr-memo-key/v"+strconv.Itoa(FormatVersion))
	e.Str("kind", kind)
	return e
}

// Sum is the key of the fields written so far.
func (e *KeyBuilder) Sum() Key {
	var k Key
	e.h.Sum(k[:0])
	return k
}

func (e *KeyBuilder) uvarint(n uint64) {
	e.h.Write(e.buf[:binary.PutUvarint(e.buf[:], n)])
}

// Bytes adds a field.
func (e *KeyBuilder) Bytes(tag string, b []byte) {
	e.uvarint(uint64(len(tag)))
	e.h.Write([]byte(tag))
	e.uvarint(uint64(len(b)))
	e.h.Write(b)
}

// Read adds a field of the n bytes r holds; false (and a key that must
// not be used) when r does not hold exactly n bytes.
func (e *KeyBuilder) Read(tag string, r io.Reader, n int64) bool {
	e.uvarint(uint64(len(tag)))
	e.h.Write([]byte(tag))
	e.uvarint(uint64(n))
	if c, err := io.CopyN(e.h, r, n); err != nil || c != n {
		return false
	}
	var one [1]byte
	m, _ := r.Read(one[:])
	return m == 0
}

// Str adds a string field.
func (e *KeyBuilder) Str(tag, s string) { e.Bytes(tag, []byte(s)) }

// List adds a list field (nil and empty alike: Docker treats them alike).
func (e *KeyBuilder) List(tag string, l []string) {
	e.uvarint(uint64(len(tag)))
	e.h.Write([]byte(tag))
	e.uvarint(uint64(len(l)))
	for _, s := range l {
		e.uvarint(uint64(len(s)))
		e.h.Write([]byte(s))
	}
}
