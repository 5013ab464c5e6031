package binrec

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	b := binary.AppendVarint(nil, -7)
	b = binary.AppendUvarint(b, 300)
	b = AppendBytes(b, []byte("abc"))
	b = AppendBytes(b, nil)
	b = append(b, 9)
	r := NewReader(b)
	if v := r.Varint(); v != -7 {
		t.Errorf("Varint %d", v)
	}
	if v := r.Uvarint(); v != 300 {
		t.Errorf("Uvarint %d", v)
	}
	if v := r.Bytes(); !bytes.Equal(v, []byte("abc")) {
		t.Errorf("Bytes %q", v)
	}
	if v := r.Bytes(); len(v) != 0 {
		t.Errorf("empty Bytes %q", v)
	}
	if v := r.Byte(); v != 9 || r.Bad() || r.Len() != 0 {
		t.Errorf("Byte %d, bad %v, %d left", v, r.Bad(), r.Len())
	}
	if r.Byte(); !r.Bad() {
		t.Error("a read past the end is not bad")
	}
}

func TestALengthPastTheEndIsBad(t *testing.T) {
	b := binary.AppendUvarint(nil, 1<<40)
	b = append(b, "short"...)
	r := NewReader(b)
	if v := r.Bytes(); v != nil || !r.Bad() {
		t.Fatalf("a length past the end read as %d bytes, bad %v", len(v), r.Bad())
	}
	// after a fault every read is zero, whatever is left
	if r.Uvarint() != 0 || r.Byte() != 0 || r.Count() != 0 {
		t.Error("a read after the fault returned something")
	}
	if r := NewReader(binary.AppendUvarint(nil, 2)); r.Count() != 0 || !r.Bad() {
		t.Error("a count of more things than bytes left accepted")
	}
}
