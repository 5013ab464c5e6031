// Package binrec writes and reads the binary records kptr keeps on disk
// (the memo's records, a render's recorded outcome): numbers as varints,
// byte strings as a uvarint length and their bytes.
//
// A Reader never trusts a length: one past the end of the record marks the
// record bad instead of making anything of that size, and after the first
// fault every read returns zero values, so a decoder reads all its fields
// and asks Bad once.
package binrec

import "encoding/binary"

// AppendBytes appends v as a length-prefixed byte string.
func AppendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Reader reads a record's fields in order.
type Reader struct {
	b   []byte
	bad bool
}

// NewReader reads b (the slices Bytes returns alias it).
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Bad reports whether a read ran past the record or found a malformed
// field.
func (r *Reader) Bad() bool { return r.bad }

// Len is how many bytes are left unread.
func (r *Reader) Len() int { return len(r.b) }

// Fail marks the record bad (a decoder's own check of a field's value).
func (r *Reader) Fail() { r.bad = true }

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 { return readVarint(r, binary.Uvarint) }

// Varint reads a signed (zig-zag) varint.
func (r *Reader) Varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads one varint with decode (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](r *Reader, decode func([]byte) (T, int)) T {
	if r.bad {
		return 0
	}
	v, n := decode(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Count reads the number of things that follow, each at least a byte long:
// never more than the bytes left.
func (r *Reader) Count() int {
	n := r.Uvarint()
	if n > uint64(len(r.b)) {
		r.bad = true
	}
	if r.bad {
		return 0
	}
	return int(n)
}

// Bytes reads a length-prefixed byte string.
func (r *Reader) Bytes() []byte {
	n := r.Count()
	if r.bad {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}
