package memo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"strconv"

	"github.com/kptr-dev/kptr/cache"
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
func Eligible(b cache.Bundle, inv runtime.Invocation) bool {
	return b.Rootfs != "" && b.Digest.Algorithm == "sha256" && len(b.Digest.Hex) == 64 &&
		!inv.Network && len(inv.Mounts) == 0
}

// KeyOf computes the key of running b with inv on stdin. variant names
// what else the caller knows decides the outcome (the sandbox tier and its
// options); inv.Stdin is not read (stdin is passed separately). Every field
// is tagged and length-prefixed, so no two different inputs encode alike.
func KeyOf(b cache.Bundle, inv runtime.Invocation, variant string, stdin []byte) Key {
	e := encoder{h: sha256.New()}
	e.str("format", "kptr-memo-key/v"+strconv.Itoa(FormatVersion))
	e.str("digest", b.Digest.String())
	e.list("entrypoint", b.Config.Entrypoint)
	e.list("cmd", b.Config.Cmd)
	e.str("workdir", b.Config.WorkingDir)
	e.str("user", b.Config.User)
	e.list("image-env", b.Config.Env)
	e.list("env", inv.Env)
	e.str("as-current-user", strconv.FormatBool(inv.AsCurrentUser))
	e.str("max-output", strconv.FormatInt(inv.MaxOutput, 10))
	e.str("variant", variant)
	e.bytes("stdin", stdin)
	var k Key
	e.h.Sum(k[:0])
	return k
}

// encoder writes tagged, length-prefixed fields into a hash.
type encoder struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (e *encoder) uvarint(n uint64) {
	e.h.Write(e.buf[:binary.PutUvarint(e.buf[:], n)])
}

func (e *encoder) bytes(tag string, b []byte) {
	e.uvarint(uint64(len(tag)))
	e.h.Write([]byte(tag))
	e.uvarint(uint64(len(b)))
	e.h.Write(b)
}

func (e *encoder) str(tag, s string) { e.bytes(tag, []byte(s)) }

// list encodes a nil list and an empty one alike (Docker treats them alike).
func (e *encoder) list(tag string, l []string) {
	e.uvarint(uint64(len(tag)))
	e.h.Write([]byte(tag))
	e.uvarint(uint64(len(l)))
	for _, s := range l {
		e.uvarint(uint64(len(s)))
		e.h.Write([]byte(s))
	}
}
